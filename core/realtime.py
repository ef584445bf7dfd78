"""Fan-out to live pages through the channel layer.

Groups are named `session-<uuid>`, `task-<uuid>` (one object's page) and
`project-<id>-sessions`, `project-<id>-tasks` (one list of a project, each its own group so a
task list never hears of appends). ASCII and hyphens: channels' group-name rules.

Only core.domain_events sends: services publish domain events, never channel messages.
"""

import asyncio
import concurrent.futures
import logging
import os
import threading
from typing import Any

from asgiref.sync import SyncToAsync
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


def send_to_groups(groups: list[str], message: dict[str, Any], *, wait: bool = True) -> bool:
    """Send `message` to every group; False (logged) when the channel layer failed.

    A live update is a courtesy to open pages: a Redis hiccup must not fail a committed write.
    With `wait=False` (live-only events) the send is queued and this returns True at once; its
    failure is logged all the same. Either way the sends of a process go out in the order they
    were made (one queue per event loop).
    """
    layer = get_channel_layer()
    if layer is None:
        return True

    try:
        done = _submit(layer, groups, message)
    except Exception as exc:
        _layer_outage.failed(exc)
        return False
    if not wait:
        done.add_done_callback(_log_outcome)
        return True
    try:
        # Bounded even when sends queued before this one are stuck on a hung Redis.
        done.result(timeout=2 * SEND_TIMEOUT_SECONDS)
    except Exception as exc:
        _layer_outage.failed(exc)
        return False
    _layer_outage.succeeded()
    return True


def _log_outcome(done: concurrent.futures.Future[None]) -> None:
    exc = done.exception()
    if exc is None:
        _layer_outage.succeeded()
    else:
        _layer_outage.failed(exc)


async def _send_all(layer: Any, groups: list[str], message: dict[str, Any]) -> None:
    async with asyncio.timeout(SEND_TIMEOUT_SECONDS):
        results = await asyncio.gather(
            *(layer.group_send(group, message) for group in groups), return_exceptions=True
        )
    for result in results:
        if isinstance(result, BaseException):
            raise result


# A sync caller under an ASGI server (Django's ASGI handler, or config.asgi's WSGI side) has the
# server's event loop (asgiref records it for the thread): the send runs there, on the layer's
# connections (and the in-memory layer lives there).
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


# One FIFO of sends per event loop, drained by one task on that loop: a request that does not
# wait for its live update still sends it after the ones before it.
_queues: dict[asyncio.AbstractEventLoop, asyncio.Queue[Any]] = {}
_drainers: set[asyncio.Task[None]] = set()


def _submit(
    layer: Any, groups: list[str], message: dict[str, Any]
) -> concurrent.futures.Future[None]:
    loop = _server_loop() or _background_loop()
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:  # no loop runs in this thread: the usual case
        running = None
    if running is loop:  # waiting here would block the very loop that sends
        raise RuntimeError("send_to_groups() called on its event loop's own thread")
    done: concurrent.futures.Future[None] = concurrent.futures.Future()

    def put() -> None:
        queue = _queues.get(loop)
        if queue is None:
            queue = _queues[loop] = asyncio.Queue()
            task = loop.create_task(_drain(queue))
            _drainers.add(task)
            task.add_done_callback(_drainers.discard)
        queue.put_nowait((layer, groups, message, done))

    loop.call_soon_threadsafe(put)
    return done


async def _drain(queue: asyncio.Queue[Any]) -> None:
    while True:
        layer, groups, message, done = await queue.get()
        try:
            await _send_all(layer, groups, message)
        except Exception as exc:
            done.set_exception(exc)
        else:
            done.set_result(None)
