"""A websocket left idle stays open and still receives pushes (issue 8, defect 3).

channels-redis waits for a consumer's messages with a 5 s blocking pop; redis-py 8's default
socket timeout is also 5 s, so with it an idle socket's read timed out and the server dropped
the websocket every 5 s. config/settings.py gives the layer's connections a 30 s read timeout;
this test keeps a real socket (uvicorn + the Redis channel layer) idle for 20 s, then pushes."""

import httpx
import pytest
from django.conf import settings as django_settings
from websockets.sync.client import connect

from tests.dashboard.conftest import Team, team  # noqa: F401  (personas)
from tests.factories import make_api_key, make_session
from tests.realtime.test_cross_process import receive_until, signed_in_cookie
from tests.servers import asgi_server

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.requires_redis("websockets idle on the Redis channel layer"),
]

IDLE_SECONDS = 20  # four of channels-redis' 5 s blocking pops


def test_a_websocket_idle_for_20_seconds_still_receives_a_push(team: Team):
    session = make_session(team.project, title="Left open")
    _, raw_key = make_api_key(team.project)
    with asgi_server() as server:
        cookie = signed_in_cookie(server, team.viewer.username)
        headers = {"Cookie": f"{django_settings.SESSION_COOKIE_NAME}={cookie}"}
        ws_url = server.replace("http://", "ws://") + f"/ws/sessions/{session.pk}/?rows=1"
        with connect(
            ws_url, origin=server, additional_headers=headers, proxy=None, open_timeout=10
        ) as ws:
            # Idle: nothing is pushed; a socket the server dropped meanwhile ends this wait
            # early with ConnectionClosed.
            with pytest.raises(TimeoutError):
                ws.recv(timeout=IDLE_SECONDS)

            response = httpx.post(
                f"{server}/api/v1/sessions/{session.pk}/events",
                json={"events": [{"kind": "message", "content": {"text": "after the quiet"}}]},
                headers={"Authorization": f"Bearer {raw_key}"},
                timeout=10,
            )
            assert response.status_code == 201, response.text
            frame = receive_until(ws, 'id="event-1"')
            assert "after the quiet" in frame
