"""config/asgi.py: one ASGI application that serves websockets and the async HTTP paths through
Django's ASGI handler and every other HTTP request through Django's WSGI handler (a2wsgi)."""

import re

import httpx
import pytest
from django.conf import settings as django_settings
from websockets.sync.client import connect

from tests.dashboard.conftest import Team, append, message, team  # noqa: F401  (personas)
from tests.factories import make_api_key, make_session
from tests.realtime.test_cross_process import receive_until, signed_in_cookie
from tests.servers import asgi_server


def async_path(path: str) -> bool:
    from config.asgi import application

    return bool(application.async_path.match(path))


def test_only_the_declared_paths_go_to_the_async_handler():
    assert async_path("/api/v1/sessions/0b0e6c1e-7d2e-4b8a-9d1c-3f1f2f3f4f5f/export")
    assert async_path("/sessions/0b0e6c1e-7d2e-4b8a-9d1c-3f1f2f3f4f5f/export.jsonl")
    assert async_path("/api/v1/handoffs/0b0e6c1e-7d2e-4b8a-9d1c-3f1f2f3f4f5f")
    for path in (
        "/api/v1/sessions/0b0e6c1e-7d2e-4b8a-9d1c-3f1f2f3f4f5f/events",
        "/api/v1/sessions/0b0e6c1e-7d2e-4b8a-9d1c-3f1f2f3f4f5f/export/more",
        "/api/v1/handoffs/0b0e6c1e-7d2e-4b8a-9d1c-3f1f2f3f4f5f/accept",
        "/api/v1/handoffs",
        "/sessions/0b0e6c1e-7d2e-4b8a-9d1c-3f1f2f3f4f5f/",
        "/x/api/v1/sessions/s/export",
        "/",
    ):
        assert not async_path(path), path


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_an_append_through_wsgi_reaches_a_socket_on_the_in_memory_layer(team: Team):
    """Without Redis the channel layer lives in the server process: an append served by a WSGI
    thread reaches a socket served by the ASGI side of the same process. (That the broadcast
    runs on the server's loop rather than a new loop per call is a matter of speed, measured by
    bench/ingest.py, not observable here.)"""
    session = make_session(team.project, title="One process")
    append(session, message("before the page opened"))
    _, raw_key = make_api_key(team.project)
    with asgi_server(REDIS_URL="") as server:
        ws_url = server.replace("http://", "ws://") + f"/ws/sessions/{session.pk}/?rows=1"
        cookie = signed_in_cookie(server, team.viewer.username)
        headers = {"Cookie": f"{django_settings.SESSION_COOKIE_NAME}={cookie}"}
        with connect(
            ws_url, origin=server, additional_headers=headers, proxy=None, open_timeout=10
        ) as ws:
            with pytest.raises(TimeoutError):
                ws.recv(timeout=0.3)
            response = httpx.post(
                f"{server}/api/v1/sessions/{session.pk}/events",
                json={"events": [{"kind": "message", "role": "user", "content": {"text": "hi"}}]},
                headers={"Authorization": f"Bearer {raw_key}", "X-Request-ID": "route-test-1"},
                timeout=10,
            )
            assert response.status_code == 201, response.text
            # The request-id middleware runs on the WSGI side too.
            assert response.headers["X-Request-ID"] == "route-test-1"
            frame = receive_until(ws, 'id="event-2"')
            assert "hi" in frame

        # Pages, static files and the CSRF check, through the WSGI side.
        with httpx.Client(base_url=server, timeout=10) as client:
            page = client.get("/accounts/login/")
            assert page.status_code == 200
            css = re.search(r'href="(/static/[^"]+\.css)"', page.text)
            assert css, page.text[:500]
            assert client.get(css.group(1)).status_code == 200
            refused = client.post("/accounts/login/", data={"username": "x", "password": "y"})
            assert refused.status_code == 403  # no CSRF token
