"""A private redis-server for "Redis down" tests: this test's own process on a free port, which
the test stops and starts again. The shared Redis other suites use is never touched."""

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.servers import free_port


class PrivateRedis:
    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
        )
        self._wait(up=True)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
        self._wait(up=False)

    def answers(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def _wait(self, *, up: bool, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.answers() == up:
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on {self.port} did not {'start' if up else 'stop'}")


@contextmanager
def private_redis(workdir: Path) -> Iterator[PrivateRedis]:
    """A running private redis-server; stopped on exit whatever state the test left it in."""
    server = PrivateRedis(workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()
