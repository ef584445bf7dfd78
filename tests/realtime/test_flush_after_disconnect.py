"""A live list's delayed flush never sends to a client that has gone, as far as the server log
can tell (issue 13, defect 5: a `ClientDisconnected` traceback from ProjectConsumer._flush_later
was seen when scripts/run stopped).

A real uvicorn (its log kept) on the Redis channel layer; signed-in websockets on the sessions
list. Each round appends an event through the HTTP API (a flush of the list is then pending for
0.5 s) and drops one socket at a different moment of that wait or of the flush after it, without
a close handshake (the TCP connection just goes, as when a laptop lid closes). Last, a socket is
left open with a flush pending and the server is stopped (SIGINT, Ctrl-C). The log must hold no
traceback and no error.
"""

import signal
import socket as sockets
import subprocess
import time

import httpx
import pytest
from django.conf import settings as django_settings
from websockets.sync.client import connect

from tests.dashboard.conftest import Team, team  # noqa: F401  (personas)
from tests.factories import make_api_key, make_session
from tests.realtime.test_cross_process import signed_in_cookie
from tests.servers import ROOT, _bin, child_env, free_port, wait_for_http

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.requires_redis("the live list's flush after a client went away"),
]

# Moments (seconds after the append) at which a socket goes: before, around and after the
# sessions list's 0.5 s flush delay.
DROP_AFTER = [0.0, 0.2, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7, 0.9]


def drop(ws) -> None:
    """Gone without a close frame: reset the TCP connection under the client."""
    raw = ws.socket
    raw.setsockopt(sockets.SOL_SOCKET, sockets.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    raw.close()


def test_a_client_gone_while_a_flush_is_pending_leaves_no_traceback(team: Team, tmp_path):
    session = make_session(team.project, title="Busy agent")
    _, raw_key = make_api_key(team.project)
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    log = tmp_path / "uvicorn.log"
    command = [
        *_bin("uvicorn"),
        "config.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--lifespan",
        "off",
        "--timeout-graceful-shutdown",
        "2",
    ]
    with log.open("w") as out:
        server = subprocess.Popen(
            command, cwd=ROOT, env=child_env(), stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_for_http(base_url + "/accounts/login/", process=server)
        cookie = signed_in_cookie(base_url, team.viewer.username)
        ws_url = f"ws://127.0.0.1:{port}/ws/projects/{team.project.pk}/?view=sessions"
        headers = {"Cookie": f"{django_settings.SESSION_COOKIE_NAME}={cookie}"}

        def open_socket():
            return connect(
                ws_url, origin=base_url, additional_headers=headers, proxy=None, open_timeout=10
            )

        def append(text: str) -> None:
            response = httpx.post(
                f"{base_url}/api/v1/sessions/{session.pk}/events",
                json={"events": [{"kind": "message", "content": {"text": text}}]},
                headers={"Authorization": f"Bearer {raw_key}"},
                timeout=10,
            )
            assert response.status_code == 201, response.text

        # A socket that stays: it sees every flush, so the others had one pending too.
        with open_socket() as witness:
            for index, delay in enumerate(DROP_AFTER):
                leaving = open_socket()
                append(f"round {index}")
                time.sleep(delay)
                drop(leaving)
                assert witness.recv(timeout=10)  # the flush of this round
            time.sleep(1)  # any flush left for the dropped ones

            # Stopped with a flush pending on an open socket.
            append("just before the stop")
            time.sleep(0.2)
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()

    text = log.read_text()
    assert "Traceback" not in text, text
    assert "ERROR" not in text, text
    assert "Exception" not in text, text
    assert "Finished server process" in text  # it did stop
