"""Fan-out to live pages through the channel layer.

Groups are named `session-<uuid>`, `task-<uuid>` (one object's page) and
`project-<id>-sessions`, `project-<id>-tasks` (one list of a project, each its own group so a
task list never hears of appends). ASCII and hyphens: channels' group-name rules.

Only core.domain_events sends: services publish domain events, never channel messages.
"""

import asyncio
import logging
import os
import threading
from collections.abc import Coroutine
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer

from .outage import OutageLog

logger = logging.getLogger(__name__)

# During a Redis outage every write's send fails: one warning for the outage, not a traceback
# per write (outboxed events are re-sent by the relay job; live-only ones are caught up on).
_layer_outage = OutageLog(logger, "channel layer (live updates)")


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
    try:
        # One hop to the event loop for all the groups, sent concurrently: each group's
        # messages keep their order, and the groups are independent of each other.
        _run_on_a_loop(_send_all(layer, groups, message))
    except Exception as exc:
        _layer_outage.failed(exc)
        return False
    _layer_outage.succeeded()
    return True


async def _send_all(layer: Any, groups: list[str], message: dict[str, Any]) -> None:
    results = await asyncio.gather(
        *(layer.group_send(group, message) for group in groups), return_exceptions=True
    )
    for result in results:
        if isinstance(result, BaseException):
            raise result


# A sync caller under an ASGI server (Django's ASGI handler, or config.asgi's WSGI side) has the
# server's event loop: asgiref's async_to_sync runs the send there, on the layer's connections.
# Anywhere else (a WSGI server's thread, a Celery worker, a command) async_to_sync would start
# a new loop, and with it a new Redis connection, for every send: one long-lived loop per
# process serves those instead.
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid = 0
_loop_lock = threading.Lock()


def _server_loop() -> asyncio.AbstractEventLoop | None:
    local = SyncToAsync.threadlocal
    loop: asyncio.AbstractEventLoop | None = getattr(local, "main_event_loop", None)
    if loop is not None and getattr(local, "main_event_loop_pid", None) == os.getpid():
        return loop if loop.is_running() else None
    return None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _loop_pid
    with _loop_lock:
        if _loop is None or _loop_pid != os.getpid():  # none yet, or inherited by a fork
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="channel-layer-sends", daemon=True
            ).start()
            _loop, _loop_pid = loop, os.getpid()
        return _loop


def _run_on_a_loop(coroutine: Coroutine[Any, Any, Any]) -> Any:
    if _server_loop() is not None:

        async def run() -> Any:
            return await coroutine

        return async_to_sync(run)()
    return asyncio.run_coroutine_threadsafe(coroutine, _background_loop()).result()
