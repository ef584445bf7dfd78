"""A real HTTP receiver on the loopback for the webhook tests: records every request it gets
(time, headers, raw body) and answers scripted status codes, then a default one.

It runs in a thread of the test process (http.server), so a Celery worker in another process
reaches it over real TCP like any receiver. It de-duplicates by the Switchboard-Delivery
header, as the README tells receivers to.
"""

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    at: float  # time.time() when the body was read
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)


class Receiver:
    def __init__(self, codes: list[int] | None = None, default: int = 200, delay: float = 0.0):
        self.script = list(codes or [])
        self.default = default
        self.delay = delay
        self.requests: list[Received] = []
        self.processed: dict[str, Received] = {}  # delivery id → first request (de-duplicated)
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.url = ""

    def arrive(self, request: Received) -> None:
        """Record a request as soon as its body is read (before any scripted delay)."""
        with self.lock:
            self.requests.append(request)
            self.arrived.notify_all()

    def answer(self, request: Received) -> int:
        """The scripted status for it; a 2xx marks its delivery id processed (once)."""
        with self.lock:
            code = self.script.pop(0) if self.script else self.default
            if 200 <= code < 300:
                self.processed.setdefault(request.headers.get("switchboard-delivery", ""), request)
        return code

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"receiver got {len(self.requests)} of {count} requests")
                self.arrived.wait(left)
            return list(self.requests)


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            request = Received(
                time.time(),
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                body,
            )
            receiver.arrive(request)
            if receiver.delay:
                time.sleep(receiver.delay)
            code = receiver.answer(request)
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def handle_one_request(self) -> None:
            # The sender may have given up (a timeout) or died: nothing to answer then.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                super().handle_one_request()

    return Handler


class _Server(ThreadingHTTPServer):
    # A listen backlog for many senders at once (socketserver's default is 5: a burst from
    # several workers would meet refused connections, which the product rightly retries later).
    request_queue_size = 128


@contextmanager
def receiver(codes: list[int] | None = None, **options: Any) -> Iterator[Receiver]:
    """A Receiver listening on 127.0.0.1 (a free port) for the duration of the block."""
    recv = Receiver(codes, **options)
    server = _Server(("127.0.0.1", 0), _handler(recv))
    server.daemon_threads = True
    recv.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield recv
    finally:
        server.shutdown()
        server.server_close()
