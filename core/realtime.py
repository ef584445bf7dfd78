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
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from asgiref.sync import SyncToAsync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer
from channels_redis.utils import _consistent_hash, decode_hosts
from django.db import close_old_connections

from .notify_layer import PostgresNotifyChannelLayer
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
    With `wait=False` (live-only events) a send that goes through an event loop (any layer but
    Redis pub/sub, which is published to from this thread) is queued and this returns True at
    once; its failure is logged all the same. Either way a thread's sends go out in the order
    they were made.
    """
    if not wait:
        held = getattr(_after_response, "sends", None)
        if held is not None:
            held.append((groups, message))
            return True
    layer = get_channel_layer()
    if layer is None:
        return True

    try:
        done = _publish_or_submit(layer, groups, message)
    except Exception as exc:
        _layer_outage.failed(exc)
        return False
    if done is None:  # published already
        _layer_outage.succeeded()
        return True
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


# Live notices (wait=False) made while this thread serves a request under
# sends_after_response are sent once its response has been handed to the server: the agent's
# append answers without waiting for the PUBLISH round trip. A notice is a courtesy (pages
# catch up from the database); one lost with its process is lost as one lost in flight was.
_after_response = threading.local()


@contextmanager
def sends_after_response() -> Iterator[None]:
    """Hold back the live notices sent inside the block and send them, in order, when it ends
    (core.domain_events.relays_after_response, which config.wsgi_bridge and config.wsgi wrap
    around a request's whole exchange, enters it). Elsewhere notices go at once."""
    outer = getattr(_after_response, "sends", None)
    held: list[tuple[list[str], dict[str, Any]]] = []
    _after_response.sends = held
    try:
        yield
    finally:
        _after_response.sends = outer
        for groups, message in held:
            send_to_groups(groups, message, wait=False)
        if held and isinstance(get_channel_layer(), PostgresNotifyChannelLayer):
            # Those NOTIFYs took a connection again after the response gave it back: give it
            # back once more (the PostgreSQL layer only; Redis sends use none).
            close_old_connections()


def _publish_or_submit(
    layer: Any, groups: list[str], message: dict[str, Any]
) -> concurrent.futures.Future[None] | None:
    """Publish `message` from this thread (channels_redis's pub/sub layer, or the PostgreSQL
    layer of a deployment without Redis: None when done), or queue it on an event loop (any
    other layer: a future)."""
    publisher = _publisher(layer)
    if publisher is not None:
        publisher.publish(groups, message)
        return None
    if isinstance(layer, PostgresNotifyChannelLayer):
        # A NOTIFY on this thread's own database connection, in its transaction. (Checked by
        # class: channels_redis's pub/sub layer answers any attribute through its loop's layer,
        # and raises outside a loop.)
        layer.publish_from_thread(groups, message)
        return None
    return _submit(layer, groups, message)


def feed_reaches_every_process() -> bool:
    """Whether live notices sent by any process (a Celery job, another server) reach this
    server's websockets: false for an in-memory layer (SWITCHBOARD_CHANNEL_LAYER=memory), whose
    pages hear only what this process does. The Live indicator says so (core.context_processors)."""
    layer = get_channel_layer()
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


class _Publisher:
    """PUBLISH to channels_redis's pub/sub layer from the calling thread: one pipeline, one
    round trip, for all of a message's groups (on each Redis shard they hash to).

    The layer's own group_send is a coroutine: a sync caller hands it to an event loop (the
    server's, or a thread of its own) and the loop spends more CPU on the hop, the queue, the
    timeout and two async PUBLISH round trips than the request spent writing the event (0.7 ms
    per single-event append, measured by thread under granian's WSGI server). The bytes
    published are the layer's own: its serializer, its group channel name
    (`<prefix>__group__<group>`) and its shard choice, so its subscribers hear them unchanged
    (tests/core/test_realtime_publisher.py subscribes through the layer).
    """

    def __init__(self, layer: Any) -> None:
        config = dict(layer._kwargs)
        self.prefix = config.get("prefix", "asgi")
        self.serialize = layer.serialize
        self.clients = []
        for host in decode_hosts(config.get("hosts")):
            options = dict(host)
            address = options.pop("address")
            # Bounded like the loop's sends: a hung Redis holds a write for at most this long.
            options["socket_timeout"] = SEND_TIMEOUT_SECONDS
            options["socket_connect_timeout"] = SEND_TIMEOUT_SECONDS
            self.clients.append(redis.Redis.from_url(address, **options))

    def publish(self, groups: list[str], message: dict[str, Any]) -> None:
        payload = self.serialize(message)
        by_shard: dict[int, list[str]] = {}
        for group in groups:
            channel = f"{self.prefix}__group__{group}"
            by_shard.setdefault(_consistent_hash(channel, len(self.clients)), []).append(channel)
        for shard, channels in by_shard.items():
            pipe = self.clients[shard].pipeline(transaction=False)
            for channel in channels:
                pipe.publish(channel, payload)
            pipe.execute()


# By the layer object itself (weakly: a layer built and dropped, as a test does, takes its
# publisher with it, and a later layer at the same address never finds it).
_publishers: weakref.WeakKeyDictionary[Any, _Publisher | None] = weakref.WeakKeyDictionary()


def _publisher(layer: Any) -> _Publisher | None:
    """The layer's publisher (one per layer object: redis-py's pools survive a fork), or None
    for a layer it does not speak for (in memory, the list-based Redis layer, Sentinel hosts)."""
    if layer not in _publishers:
        usable = isinstance(layer, RedisPubSubChannelLayer) and all(
            "address" in host for host in decode_hosts(layer._kwargs.get("hosts"))
        )
        _publishers[layer] = _Publisher(layer) if usable else None
    return _publishers[layer]


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
