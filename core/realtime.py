"""Fan-out to live pages through the channel layer.

Groups are named `session-<uuid>`, `task-<uuid>` (one object's page) and
`project-<id>-sessions`, `project-<id>-tasks` (one list of a project, each its own group so a
task list never hears of appends). ASCII and hyphens: channels' group-name rules.

Only core.domain_events sends: services publish domain events, never channel messages.
"""

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from .outage import OutageLog

logger = logging.getLogger(__name__)

# During a Redis outage every write's send fails: one warning for the outage, not a traceback
# per write (outboxed events are re-sent by the relay job; live-only ones are caught up on).
_layer_outage = OutageLog(logger, "channel layer (live updates)")

# Seconds a write's sends may take in all. The layer's socket timeout is long on purpose (its
# receivers block 5 s waiting for messages, config/settings.py); a Redis that accepts
# connections but never answers would otherwise hold every write for that long.
SEND_TIMEOUT_SECONDS = 1.0


def session_group(session_id: object) -> str:
    return f"session-{session_id}"


def task_group(task_id: object) -> str:
    return f"task-{task_id}"


def project_list_group(project_id: object, listing: str) -> str:
    """The group of one list of a project: "sessions" (list and overview), "tasks", …"""
    return f"project-{project_id}-{listing}"


def send_to_groups(groups: list[str], message: dict[str, Any]) -> bool:
    """Send `message` to every group; False (logged) when the channel layer failed.

    A live update is a courtesy to open pages: a Redis hiccup must not fail a committed write.
    """
    layer = get_channel_layer()
    if layer is None:
        return True

    async def send_all() -> None:
        async with asyncio.timeout(SEND_TIMEOUT_SECONDS):
            for group in groups:
                await layer.group_send(group, message)

    try:
        async_to_sync(send_all)()
    except Exception as exc:
        _layer_outage.failed(exc)
        return False
    _layer_outage.succeeded()
    return True
