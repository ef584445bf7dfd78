"""The sign-in throttle's client address under the real servers (issue 23, defect 3).

Behind the README's reverse proxy every request comes from the proxy's address: counted by that
address, 20 failed sign-ins from anywhere locked everyone out. And uvicorn, by default, believes
X-Forwarded-For from 127.0.0.1, so a local client could name any address it liked. Now the
servers hand Django the connection's address (uvicorn with --no-proxy-headers, as scripts/run,
tests/servers.py and README start it; granian's WSGI server never reads the header) and
core.client_address believes the header only from SWITCHBOARD_TRUSTED_PROXIES.

A direct client connects from 127.0.0.2 (the loopback answers to all of 127/8); the "proxy" is
127.0.0.1, adding X-Forwarded-For as nginx's $proxy_add_x_forwarded_for does. The servers run
without Redis (a cache of their own, fresh at each start) and with 3 failures per address in a
window of 10^9 s (clock-aligned: its next end is in 2033), so no count crosses a window.
"""

import contextlib
import os
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.servers import (
    asgi_server,
    free_port,
    scripts_run_process,
    wait_for_http,
    wsgi_server,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LIMIT = 3


def throttle_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "REDIS_URL": "",
        "CELERY_FILESYSTEM_BROKER_DIR": str(tmp_path / "broker"),
        "SWITCHBOARD_LOGIN_FAILURES_PER_ADDRESS": str(LIMIT),
        "SWITCHBOARD_LOGIN_FAILURES_PER_ACCOUNT": "1000",
        "SWITCHBOARD_LOGIN_WINDOW_SECONDS": str(10**9),
        **extra,
    }


def failed_sign_ins(
    base_url: str, forwarded_for: Callable[[int], str], *, count: int, source: str = "127.0.0.1"
) -> list[int]:
    """The statuses of `count` failed sign-ins (a different unknown name each, so no account
    fills up) from the local address `source`, the i-th with X-Forwarded-For forwarded_for(i)."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(base_url=base_url, transport=transport, timeout=10) as client:
        form = client.get("/accounts/login/", headers={"X-Forwarded-For": forwarded_for(0)})
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        return [
            client.post(
                "/accounts/login/",
                data={"username": f"nobody-{i}", "password": "wrong", "csrfmiddlewaretoken": token},
                headers={"X-Forwarded-For": forwarded_for(i)},
            ).status_code
            for i in range(count)
        ]


def spoofed(i: int) -> str:
    return f"203.0.113.{i + 1}"  # a different address each time: believed, none would fill up


def test_uvicorn_as_scripts_run_starts_it_ignores_x_forwarded_for_from_localhost(tmp_path):
    with scripts_run(tmp_path) as base_url:
        statuses = failed_sign_ins(base_url, spoofed, count=LIMIT + 1)
    assert statuses == [200] * LIMIT + [429]


@pytest.mark.parametrize("server", ["uvicorn", "granian-wsgi"])
def test_clients_behind_a_trusted_proxy_are_counted_apart_and_direct_ones_by_connection(
    server, tmp_path
):
    env = throttle_env(tmp_path, SWITCHBOARD_TRUSTED_PROXIES="127.0.0.1")
    start = asgi_server if server == "uvicorn" else wsgi_server
    with start(**env) as base_url:
        # Directly, not through the proxy: the header, whatever it says, is the client's own.
        direct = failed_sign_ins(base_url, spoofed, count=LIMIT + 1, source="127.0.0.2")
        # Through the proxy: the client 198.51.100.7 prepends an address of its choosing, the
        # proxy appends the one it was connected from.
        first = failed_sign_ins(base_url, lambda i: f"{spoofed(i)}, 198.51.100.7", count=LIMIT + 1)
        # Another client through the same proxy has its own count.
        second = failed_sign_ins(base_url, lambda i: "198.51.100.8", count=1)
    assert direct == [200] * LIMIT + [429]
    assert first == [200] * LIMIT + [429]
    assert second == [200]


@contextlib.contextmanager
def scripts_run(tmp_path: Path) -> Iterator[str]:
    """`bash scripts/run` for real (without its bootstrap, agents or Redis), as
    tests/test_run_stop.py runs it; stopped with Ctrl-C on exit."""
    port = free_port()
    run = scripts_run_process(
        tmp_path / "run.log",
        port,
        SIMULATE_AGENTS="0",
        SWITCHBOARD_TRUSTED_PROXIES=None,  # the default: none
        **throttle_env(tmp_path),
    )
    try:
        base_url = f"http://127.0.0.1:{port}"
        wait_for_http(base_url + "/accounts/login/", timeout=180, process=run)
        yield base_url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGINT)
        try:
            run.wait(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):  # anything it left behind
                os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=10)
