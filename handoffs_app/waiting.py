"""The agent's long-poll: wait for a handoff to change without a thread or a connection.

`wait_for_resolution` joins the handoff's channel-layer group (`handoff-<uuid>`, which every
outboxed handoff step is sent to after its commit, core.domain_events) on a fresh channel and
awaits a message there; the row is read (through `read`, which gives its connection back) only
before and after a wake-up. While waiting, the coroutine holds neither a database connection nor
a thread: a few hundred waiting agents cost a few hundred idle coroutines, and each server
process one Redis subscription per handoff waited on.

A message can be lost (Redis restarted, the relay job sends it later), so a waiter re-reads the
row every RECHECK_SECONDS anyway; with the in-memory layer (no Redis: other processes cannot
reach this one) or a layer that fails, it polls every POLL_SECONDS instead.
"""

import asyncio
import logging
import re
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer

from core.outage import OutageLog

from .domain_events import handoff_group

logger = logging.getLogger(__name__)
_outage = OutageLog(logger, "channel layer (handoff long-poll; polling instead)")

RECHECK_SECONDS = 10.0
POLL_SECONDS = 1.0
# Joins and leaves in flight at once per event loop: each takes a connection from the layer's
# Redis pool (100 at most), which a burst of a few hundred long-polls would otherwise exhaust.
LAYER_CONCURRENCY = 16
_gates: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = (
    weakref.WeakKeyDictionary()
)


# The longest `wait` an agent may ask for, in seconds.
MAX_WAIT = 60
_DIGITS = re.compile(r"[0-9]{1,9}")


def parse_wait(raw: object) -> int:
    """`?wait=S` as seconds, 0..MAX_WAIT; ValueError otherwise. Only ASCII digits: `+30`, ` 30`
    (what `?wait=+30` and `?wait=%2030` decode to), `30.0` or `3_0`, which int() or pydantic's
    lax mode would take, are refused. The one reading of it, by the thread-free router
    (config/longpoll.py) and by the endpoint (handoffs_app.api.read_handoff): a spelling the
    endpoint would wait for is always one the router waits for, and the endpoint refuses (422)
    every other, so no wait is ever held on a server thread."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        seconds = raw
    elif isinstance(raw, str) and _DIGITS.fullmatch(raw):
        seconds = int(raw)
    else:
        seconds = -1
    if not 0 <= seconds <= MAX_WAIT:
        raise ValueError(f"wait is a whole number of seconds from 0 to {MAX_WAIT}, in digits")
    return seconds


def _gate() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Semaphore(LAYER_CONCURRENCY)
    return gate


async def _join(group: str) -> tuple[BaseChannelLayer, str] | None:
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return None
    try:
        channel = await layer.new_channel("handoff-wait.")
        async with _gate():
            await layer.group_add(group, channel)
    except Exception as exc:
        _outage.failed(exc)
        return None
    _outage.succeeded()
    return layer, channel


async def _leave(joined: tuple[BaseChannelLayer, str] | None, group: str) -> None:
    if joined is None:
        return
    layer, channel = joined
    try:
        async with _gate():
            await layer.group_discard(group, channel)
    except Exception as exc:
        _outage.failed(exc)


async def wait_for_resolution(
    handoff_id: object,
    *,
    timeout: float,
    read: Callable[[], Awaitable[tuple[dict[str, Any], bool]]],
) -> dict[str, Any]:
    """Wait up to `timeout` seconds for `read()` to report the handoff resolved; return its
    last reading. `read` returns (body, resolved) and must not keep a connection."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    group = handoff_group(handoff_id)
    joined = await _join(group)
    wake: asyncio.Future[Any] | None = None
    try:
        # Read after joining: a change committed before the join is seen here, one after it
        # wakes the receive below. Nothing falls between the two.
        body, resolved = await read()
        while not resolved:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            if joined is not None:
                layer, channel = joined
                # One receive for the whole wait, kept across rechecks: a receive cancelled by a
                # timeout gives up its channel (channels-redis pub/sub unsubscribes it), and a
                # notice arriving before the next receive would be missed.
                if wake is None:
                    wake = asyncio.ensure_future(layer.receive(channel))
                done, _ = await asyncio.wait({wake}, timeout=min(remaining, RECHECK_SECONDS))
                if wake in done:
                    finished, wake = wake, None
                    if (failure := finished.exception()) is not None:
                        _outage.failed(failure)
                        joined = None
            else:
                await asyncio.sleep(min(remaining, POLL_SECONDS))
            body, resolved = await read()
        return body
    finally:
        if wake is not None:
            wake.cancel()
        await _leave(joined, group)
