"""The server process is stopping: a process-wide flag the handoff long-poll waits on.

A long-poll (config/longpoll.py) waits up to 30 s. When uvicorn is asked to stop (SIGINT or
SIGTERM: scripts/run's Ctrl-C) it stops accepting connections, gives the requests still running
`--timeout-graceful-shutdown` seconds, then cancels them and logs "ERROR Cancel N running
task(s)" with a traceback per request. A long-poll that ends as soon as the stop begins answers
the handoff's current state, as its timeout would, and leaves nothing to cancel.

How the stop is seen: uvicorn (0.54) sends the ASGI lifespan `shutdown` only *after* that grace
period and the cancelling, too late to help; its `should_exit` is not the application's to
read. What it does first is run its SIGINT/SIGTERM handler. So `watch_signals()` puts a handler
in front of the server's own: it marks the stop, then calls the server's handler unchanged. It
is installed at lifespan startup (config/asgi.py) and, with `--lifespan off`, by the first
long-poll; in the event loop's (main) thread only, where Python runs signal handlers. The
lifespan `shutdown` marks the stop too, for servers that send it before their grace period.
"""

import asyncio
import signal
import threading
import weakref
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_stopping = False
# One event per event loop (an asyncio.Event belongs to the loop it is first awaited on).
_events: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event]" = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def stopping() -> bool:
    return _stopping


def begin() -> None:
    """Mark the process as stopping and wake every waiter. Safe from a signal handler."""
    global _stopping
    _stopping = True
    for loop, event in list(_events.items()):
        if loop.is_closed():
            continue
        # From a signal handler or another thread: set it on its own loop.
        loop.call_soon_threadsafe(event.set)


async def wait() -> None:
    """Return once the process is stopping."""
    loop = asyncio.get_running_loop()
    with _lock:
        event = _events.get(loop)
        if event is None:
            event = _events[loop] = asyncio.Event()
    if _stopping:
        event.set()
    await event.wait()


def watch_signals() -> None:
    """Chain `begin()` in front of the current SIGINT and SIGTERM handlers (once: a handler
    already chained is left). Does nothing outside the main thread, where signal handlers
    cannot be set."""
    if threading.current_thread() is not threading.main_thread():
        return
    with _lock:
        for sig in SIGNALS:
            previous = signal.getsignal(sig)
            if getattr(previous, "switchboard_shutdown", False) or not callable(previous):
                # SIG_DFL/SIG_IGN or none from Python: no server handler to put this before.
                continue
            signal.signal(sig, _chained(previous))


def _chained(previous: Any) -> Any:
    def handler(signum: int, frame: FrameType | None) -> Any:
        begin()
        return previous(signum, frame)

    handler.switchboard_shutdown = True  # type: ignore[attr-defined]
    return handler
