"""Live updates cross server processes: a page connected to server B sees what an agent
appends through server A. Two real uvicorn processes on the test database, with the Redis
channel layer between them (an in-memory layer cannot do this; STACK.md item 3)."""

import re
import time

import httpx
import pytest
from django.conf import settings as django_settings
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.dashboard.conftest import Team, append, message, team  # noqa: F401  (personas)
from tests.factories import make_api_key, make_session
from tests.servers import asgi_server

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    # An in-memory channel layer cannot reach another process.
    pytest.mark.requires_redis("cross-process live updates"),
]

TIMEOUT = 5.0  # seconds; the latency is printed, not asserted


def signed_in_cookie(base_url: str, username: str) -> str:
    """Sign in through the real login form of `base_url`; the session cookie's value."""
    with httpx.Client(base_url=base_url, timeout=10) as client:
        form = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text).group(1)
        response = client.post(
            "/accounts/login/",
            data={
                "username": username,
                "password": "pw-for-tests-1",
                "csrfmiddlewaretoken": token,
                "next": "/",
            },
        )
        assert response.status_code == 302, response.text[:500]
        return client.cookies[django_settings.SESSION_COOKIE_NAME]


def receive_until(ws, pattern: str, timeout: float = TIMEOUT) -> str:
    """Frames until one contains `pattern`; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    seen = []
    while (left := deadline - time.monotonic()) > 0:
        try:
            frame = ws.recv(timeout=left)
        except TimeoutError:
            break
        if pattern in frame:
            return frame
        seen.append(frame[:200])
    raise AssertionError(f"no frame with {pattern!r} within {timeout}s; got {seen}")


def test_an_event_appended_on_server_a_reaches_a_page_on_server_b(team: Team):
    session = make_session(team.project, title="Across processes")
    append(session, message("before the page opened"))
    _, raw_key = make_api_key(team.project)

    with asgi_server() as server_a, asgi_server() as server_b:
        ws_url = server_b.replace("http://", "ws://") + f"/ws/sessions/{session.pk}/?rows=1"
        # Without a signed-in cookie B refuses the handshake (the consumer closes before accept).
        with pytest.raises(InvalidStatus) as refused:
            connect(ws_url, origin=server_b, proxy=None, open_timeout=10)
        assert refused.value.response.status_code == 403
        cookie = signed_in_cookie(server_b, team.viewer.username)
        headers = {"Cookie": f"{django_settings.SESSION_COOKIE_NAME}={cookie}"}
        with connect(
            ws_url, origin=server_b, additional_headers=headers, proxy=None, open_timeout=10
        ) as ws:
            # Opened at the head: nothing to catch up on.
            with pytest.raises(TimeoutError):
                ws.recv(timeout=0.3)

            # A warm request first (A sees the committed session), so the figure below is the
            # append and the push, not A's first connection to the database.
            auth = {"Authorization": f"Bearer {raw_key}"}
            warm = httpx.get(f"{server_a}/api/v1/sessions/{session.pk}", headers=auth, timeout=10)
            assert warm.status_code == 200 and warm.json()["head_seq"] == 1, warm.text

            started = time.monotonic()
            response = httpx.post(
                f"{server_a}/api/v1/sessions/{session.pk}/events",
                json={
                    "events": [
                        {
                            "kind": "message",
                            "role": "assistant",
                            "content": {"text": "written through server A"},
                        }
                    ]
                },
                headers=auth,
                timeout=10,
            )
            assert response.status_code == 201, response.text
            answered = time.monotonic()
            seq = response.json()["events"][0]["seq"]
            assert seq == 2
            frame = receive_until(ws, f'id="event-{seq}"')
            arrived = time.monotonic()
            print(
                f"\ncross-process latency: POST to A -> row on B's socket "
                f"{(arrived - started) * 1000:.0f} ms (A answered after "
                f"{(answered - started) * 1000:.0f} ms)"
            )
            # The rendered row partial of the session page, inserted on top of the log.
            assert '<div hx-swap-oob="afterbegin:#event-rows">' in frame
            assert f'<article id="event-{seq}" data-live-row class="event event-message">' in frame
            assert "written through server A" in frame
            assert f'data-head-seq="{seq}"' in frame

            # A lifecycle change made through A reaches B too (header, actions, timeline).
            response = httpx.post(
                f"{server_a}/api/v1/sessions/{session.pk}/pause",
                json={"reason": "over to a human"},
                headers=auth,
                timeout=10,
            )
            assert response.status_code == 200, response.text
            frame = receive_until(ws, 'id="timeline"')
            assert "over to a human" in frame
            assert 'class="status status-paused"' in frame
