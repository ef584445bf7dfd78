"""Redis down: the API and every dashboard page keep answering, the rate limit lets requests
through (logging the outage once), and live updates resume when Redis returns.

"Down" is a private redis-server this test stops (tests/private_redis.py) or a port nobody
listens on; the shared Redis other suites use is never touched."""

import logging
import shutil
import socket
import time
from datetime import timedelta

import httpx
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.urls import reverse
from django.utils import timezone

from config.api import ApiKeyRateThrottle
from config.asgi import application
from core.domain_events import relay_pending
from core.models import OutboxMessage
from tests.conftest import ApiClient, skip_unless_ci
from tests.dashboard.conftest import Team, team  # noqa: F401  (the personas fixture)
from tests.factories import make_api_key, make_session, make_task
from tests.private_redis import private_redis
from tests.servers import asgi_server, free_port


@pytest.fixture(autouse=True)
def _redis_server_binary():
    """Skipped without a redis-server binary to run a private Redis; failed under CI, which
    has one."""
    if shutil.which("redis-server") is None:
        skip_unless_ci(
            "no redis-server binary to run a private Redis",
            "CI has redis-server (bash .ci/run starts the shared Redis with it)",
        )


def redis_settings(settings, url: str) -> None:
    """Point this process's cache and channel layer at `url` (Django resets both on change)."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": url,
            "KEY_PREFIX": "outage-test",
        }
    }
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": url, "socket_timeout": 30}], "prefix": "outage"},
        }
    }


class _KeyedRequest:
    """What the throttle reads of a request: the API key auth put on it."""

    def __init__(self, api_key) -> None:
        self.auth = api_key


def test_the_rate_limit_lets_requests_through_and_logs_once_while_its_cache_is_down(
    db, project, settings, tmp_path, caplog
):
    api_key, _ = make_api_key(project)
    request = _KeyedRequest(api_key)
    settings.SWITCHBOARD_API_RATE_PER_MINUTE = 2
    throttle = ApiKeyRateThrottle()
    caplog.set_level(logging.INFO, logger="config.api")
    with private_redis(tmp_path) as redis:
        redis_settings(settings, redis.url)
        redis.stop()
        assert [throttle.allow_request(request) for _ in range(5)] == [True] * 5
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
        assert "rate limit" in warnings[0].getMessage()

        # Redis back: the limit counts again (a fresh count: the old one went with the server).
        redis.start()
        assert [throttle.allow_request(request) for _ in range(3)] == [True, True, False]
        # A second outage is logged again, once.
        redis.stop()
        caplog.clear()
        assert [throttle.allow_request(request) for _ in range(3)] == [True] * 3
        assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) == 1


@pytest.mark.slow
def test_the_api_with_rate_limiting_answers_while_redis_is_unreachable(transactional_db, project):
    session = make_session(project)
    raw = make_api_key(project)[1]
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    with asgi_server(SWITCHBOARD_API_RATE_PER_MINUTE="3", REDIS_URL=dead) as base_url:
        client = httpx.Client(
            base_url=f"{base_url}/api/v1", headers={"Authorization": f"Bearer {raw}"}, timeout=30
        )
        for _ in range(5):  # beyond the limit: a limiter that cannot count lets them through
            response = client.post(
                f"/sessions/{session.pk}/events", json={"events": [{"kind": "note"}]}
            )
            assert response.status_code == 201, response.text[:300]
        assert client.get(f"/sessions/{session.pk}").json()["head_seq"] == 5


def _pages(team: Team, session, task) -> list[str]:
    return [
        reverse("dashboard:overview", args=[team.project.pk]),
        reverse("dashboard:session_list", args=[team.project.pk]),
        reverse("dashboard:session_detail", args=[session.pk]),
        reverse("tasks:list", args=[team.project.pk]),
        reverse("tasks:detail", args=[task.pk]),
    ]


def test_pages_and_appends_work_with_redis_down_and_live_updates_resume_after(
    transactional_db, team: Team, settings, tmp_path, caplog
):
    session = make_session(team.project, title="Through an outage")
    task = make_task(team.project)
    _, raw_key = make_api_key(team.project)
    api = ApiClient(raw_key)
    client = team.client("viewer")
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME].value

    with private_redis(tmp_path) as redis:
        redis_settings(settings, redis.url)
        redis.stop()

        for url in _pages(team, session, task):
            response = client.get(url)
            assert response.status_code == 200, (url, response.content[:300])
        overview = client.get(_pages(team, session, task)[0]).content.decode()
        assert 'id="events-chart"' in overview

        response = api.post(
            f"/sessions/{session.pk}/events",
            {"events": [{"kind": "message", "role": "user", "content": {"text": "in the dark"}}]},
        )
        assert response.status_code == 201, response.content[:300]
        response = api.post(f"/sessions/{session.pk}/pause", {"reason": "while redis was down"})
        assert response.status_code == 200, response.content[:300]
        # The lifecycle change could not be sent: its outbox row waits for the relay.
        assert OutboxMessage.objects.filter(relayed_at__isnull=True).count() == 1
        # Three failed sends (the append, the pause and its outbox relay): one line, no tracebacks.
        layer_records = [r for r in caplog.records if r.name == "core.realtime"]
        assert not [r for r in layer_records if r.exc_info], "a traceback per failed send"
        assert len([r for r in layer_records if r.levelno >= logging.WARNING]) <= 1

        redis.start()

        async def scenario():
            headers = [
                (b"origin", b"http://testserver"),
                (b"host", b"testserver"),
                (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
            ]
            ws = WebsocketCommunicator(
                application, f"/ws/sessions/{session.pk}/?after_seq=2&rows=1", headers=headers
            )
            connected, _ = await ws.connect()
            assert connected
            # The relay job sends what the outage held back (grace period skipped).
            sent = await sync_to_async(relay_pending)(now=timezone.now() + timedelta(minutes=1))
            assert sent == 1
            frames = [await ws.receive_from(timeout=5)]
            while "while redis was down" not in "".join(frames):
                frames.append(await ws.receive_from(timeout=5))
            assert 'class="status status-paused"' in "".join(frames)
            # And new writes are pushed live again.
            response = await sync_to_async(api.post)(
                f"/sessions/{session.pk}/resume", {"reason": "redis is back"}
            )
            assert response.status_code == 200, response.content[:300]
            frames = [await ws.receive_from(timeout=5)]
            while "redis is back" not in "".join(frames):
                frames.append(await ws.receive_from(timeout=5))
            await ws.disconnect()

        async_to_sync(scenario)()
    assert not OutboxMessage.objects.filter(relayed_at__isnull=True).exists()


def test_signing_in_works_while_the_sign_in_throttle_store_is_down(db, settings, tmp_path, caplog):
    from django.contrib.auth import get_user_model
    from django.test import Client

    get_user_model().objects.create_user("ann", password="correct horse battery")
    caplog.set_level(logging.INFO, logger="core.ratelimit")
    with private_redis(tmp_path) as redis:
        redis_settings(settings, redis.url)
        redis.stop()
        client = Client()
        wrong = client.post(reverse("login"), {"username": "ann", "password": "nope"})
        assert wrong.status_code == 200  # the form again, with its error: not a 500
        right = client.post(
            reverse("login"), {"username": "ann", "password": "correct horse battery"}
        )
        assert right.status_code == 302  # the password is still checked, and it is right
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "sign-in throttle" in warnings[0].getMessage()


@pytest.mark.slow
def test_a_hung_redis_does_not_hang_requests(transactional_db, team: Team):
    """A Redis that accepts connections and never answers (hung, SIGSTOPped, black-holed):
    the rate limit, an append's live notice and the overview give up on it within their
    timeouts (the cache's, core.realtime's) and carry on."""
    session = make_session(team.project)
    raw = make_api_key(team.project)[1]
    client = team.client("viewer")
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME].value
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(1)  # the kernel completes a handshake or two; nobody ever reads or answers
        url = f"redis://127.0.0.1:{hung.getsockname()[1]}/0"
        with asgi_server(SWITCHBOARD_API_RATE_PER_MINUTE="3", REDIS_URL=url) as base_url:
            api = httpx.Client(
                base_url=f"{base_url}/api/v1",
                headers={"Authorization": f"Bearer {raw}"},
                timeout=60,
            )
            for _ in range(5):  # beyond the limit: a limiter that cannot count lets them through
                started = time.monotonic()
                response = api.get(f"/sessions/{session.pk}")
                assert response.status_code == 200, response.text[:300]
                assert time.monotonic() - started < 3, "the rate limit waited on the hung Redis"
            # An append commits, and its live notice gives up on the hung channel layer.
            started = time.monotonic()
            response = api.post(
                f"/sessions/{session.pk}/events", json={"events": [{"kind": "note"}]}
            )
            assert response.status_code == 201, response.text[:300]
            assert time.monotonic() - started < 3, "the append waited on the hung Redis"

            dashboard = httpx.Client(
                base_url=base_url,
                cookies={django_settings.SESSION_COOKIE_NAME: cookie},
                timeout=60,
            )
            for _ in range(2):
                started = time.monotonic()
                response = dashboard.get(reverse("dashboard:overview", args=[team.project.pk]))
                assert response.status_code == 200
                assert 'id="events-chart"' in response.text
                assert time.monotonic() - started < 3, "the overview waited on the hung Redis"


def test_a_socket_opened_while_redis_is_down_is_refused_with_one_warning(
    transactional_db, team: Team, settings, tmp_path, caplog
):
    """No traceback (an ERROR per socket in the server's log): the handshake is refused, the
    outage logged once however many pages try, and sockets work again when Redis is back."""
    session = make_session(team.project)
    cookie = team.client("viewer").cookies[django_settings.SESSION_COOKIE_NAME].value
    headers = [
        (b"origin", b"http://testserver"),
        (b"host", b"testserver"),
        (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={cookie}".encode()),
    ]
    paths = [
        f"/ws/sessions/{session.pk}/?after_seq=0&rows=1",
        f"/ws/projects/{team.project.pk}/?view=sessions",
    ]
    caplog.set_level(logging.INFO)

    async def open_socket(path: str) -> tuple[bool, object]:
        ws = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await ws.connect(timeout=10)
        if connected:
            await ws.disconnect()
        else:
            await ws.wait(timeout=10)  # the consumer has finished, whatever it raised
        return connected, code

    with private_redis(tmp_path) as redis:
        redis_settings(settings, redis.url)
        redis.stop()
        for path in paths * 2:
            connected, _ = async_to_sync(open_socket)(path)
            assert not connected
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
        assert not errors, [r.getMessage() for r in errors]
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        assert "live" in warnings[0].getMessage()

        redis.start()
        for path in paths:
            connected, _ = async_to_sync(open_socket)(path)
            assert connected
