"""Live updates: domain functions announce changes after commit, consumers render them.

Groups are named `session-<uuid>`, `project-<id>` (ASCII, hyphens; channels' 100-char limit).
Nothing is announced for a write that rolled back: every send waits for `on_commit`.
"""

import json
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def session_group(session_id: object) -> str:
    return f"session-{session_id}"


def project_group(project_id: object) -> str:
    return f"project-{project_id}"


def task_group(task_id: object) -> str:
    return f"task-{task_id}"


def _send_rollback_unsafe(groups: list[str], message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        for group in groups:
            async_to_sync(layer.group_send)(group, message)
    except Exception:
        # A live update is a courtesy: a Redis hiccup must not fail a committed write.
        logger.exception("broadcast to %s failed", groups)


def broadcast_on_commit(session: Any, message: dict[str, Any]) -> None:
    """Announce a change to a session (to its group and its project's) once it has committed."""
    payload = {**message, "session_id": str(session.pk), "project_id": session.project_id}
    json.dumps(payload)  # fail at the source if a payload is not JSON-safe (channels needs it)
    groups = [session_group(session.pk), project_group(session.project_id)]
    transaction.on_commit(lambda: _send_rollback_unsafe(groups, payload))


def broadcast_task_on_commit(task: Any, message: dict[str, Any]) -> None:
    payload = {**message, "task_id": str(task.pk), "project_id": task.project_id}
    json.dumps(payload)
    groups = [task_group(task.pk), project_group(task.project_id)]
    transaction.on_commit(lambda: _send_rollback_unsafe(groups, payload))
