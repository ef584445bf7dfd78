"""Two deployments on one Redis, each on its own Redis database, do not hear each other's live
notices (issue 23, defect 8). Redis pub/sub ignores the database number, and the group names
are the same in both (`session-<uuid>`, `project-1-sessions`): the channel layer's prefix,
derived from the Redis database number unless CHANNEL_LAYER_PREFIX is set
(config.settings.channel_layer_prefix), keeps their channel names apart.

Deployment B's database is a copy of A's (the test database as the test left it), so B holds the
very session, project and users A does: the worst case, every group name the same.
"""

import time
import urllib.parse
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import httpx
import psycopg
import pytest
from django.conf import settings as django_settings
from django.db import connection
from websockets.sync.client import connect

from config.settings import channel_layer_prefix
from tests.dashboard.conftest import Team, append, message, team  # noqa: F401  (personas)
from tests.factories import make_api_key, make_session
from tests.realtime.test_cross_process import receive_until, signed_in_cookie
from tests.servers import asgi_server

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.requires_redis("channel names of two deployments on one Redis"),
]

QUIET = 1.5  # seconds B's page is given to hear what it must not


def with_redis_db(url: str, db: int) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path=f"/{db}"))


@contextmanager
def copy_of_the_test_database() -> Iterator[str]:
    """A second database holding what the test database holds now (CREATE DATABASE … TEMPLATE:
    nothing may be connected to it meanwhile, so this process's pool is closed first); its
    name. Dropped on exit."""
    source = connection.settings_dict["NAME"]
    copy = f"{source}_deployment_b"
    connection.close()
    connection.close_pool()
    params = connection.get_connection_params()
    server = {key: params[key] for key in ("host", "port", "user", "password") if params.get(key)}
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')
        # A connection of something that ended (a server child, a thread of this process that
        # kept its own) can stay on the source: CREATE … TEMPLATE refuses while any is there
        # (ObjectInUse, seen in CI even after 15 s of waiting). They all belong to this test
        # run's database, so after a short wait they are ended, and named in the output.
        give_up, deadline = time.monotonic() + 20, time.monotonic() + 3
        while True:
            try:
                admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{source}"')
                break
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > give_up:
                    raise
                if time.monotonic() > deadline:
                    lingering = admin.execute(
                        "SELECT pid, application_name, state, left(query, 80),"
                        " pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE datname = %s AND pid <> pg_backend_pid()",
                        [source],
                    ).fetchall()
                    print(f"ended connections lingering on {source}: {lingering}")
                    deadline = time.monotonic() + 3
                time.sleep(0.2)
    try:
        yield copy
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **server) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')


def test_the_default_prefix_differs_by_redis_database_and_the_setting_wins():
    assert channel_layer_prefix("", "redis://127.0.0.1:6379/0") == "switchboard.db0."
    assert channel_layer_prefix("", "redis://127.0.0.1:6379") == "switchboard.db0."
    assert channel_layer_prefix("", "redis://:pw@redis.internal:6380/3") == "switchboard.db3."
    assert channel_layer_prefix("", "unix:///run/redis.sock?db=5") == "switchboard.db5."
    assert channel_layer_prefix("staging", "redis://127.0.0.1:6379/3") == "staging"


def test_a_prefix_that_would_make_invalid_channel_names_is_refused():
    from django.core.exceptions import ImproperlyConfigured

    for wrong in ("two words", "ünïcode", "x" * 51):
        with pytest.raises(ImproperlyConfigured, match="CHANNEL_LAYER_PREFIX"):
            channel_layer_prefix(wrong, "redis://127.0.0.1:6379/0")


def test_a_notice_in_one_deployment_reaches_its_pages_and_not_the_other_deployments(team: Team):
    session = make_session(team.project, title="Two deployments")
    append(session, message("before the pages opened"))
    _, raw_key = make_api_key(team.project)
    redis_a = django_settings.REDIS_URL
    db_a = int(urllib.parse.urlsplit(redis_a).path.strip("/") or 0)
    with copy_of_the_test_database() as database_b:
        # Each deployment with the prefix it derives (the test settings give every child one
        # of the run's), on its own Redis database. B's Celery jobs, if any, queue where A's
        # do: nothing but the channel layer and the cache is on B's database.
        deployment_a = {"CHANNEL_LAYER_PREFIX": "", "REDIS_URL": redis_a}
        deployment_b = {
            "CHANNEL_LAYER_PREFIX": "",
            "REDIS_URL": with_redis_db(redis_a, (db_a + 1) % 16),
            "CELERY_BROKER_URL": redis_a,
            "SWITCHBOARD_TEST_DB_NAME": database_b,
        }
        with (
            asgi_server(**deployment_a) as server_a,
            asgi_server(**deployment_b) as server_b,
            ExitStack() as pages,
        ):
            page_a, page_b = (
                pages.enter_context(session_page(server, session.pk, team.viewer.username))
                for server in (server_a, server_b)
            )
            response = httpx.post(
                f"{server_a}/api/v1/sessions/{session.pk}/pause",
                json={"reason": "over to a human"},
                headers={"Authorization": f"Bearer {raw_key}"},
                timeout=10,
            )
            assert response.status_code == 200, response.text
            # A's page hears it (core.realtime's publisher wrote to A's prefixed channel)…
            assert "over to a human" in receive_until(page_a, 'id="timeline"')
            # …and B's, joined to the same group name on the same Redis, hears nothing (it
            # would re-render its header from B's copy, where the session is still open).
            with pytest.raises(TimeoutError):
                frame = page_b.recv(timeout=QUIET)
                pytest.fail(f"deployment B heard A's notice: {frame[:300]}")


def session_page(server: str, session_id: object, username: str):
    """A signed-in websocket of the session's page on `server` (a context manager)."""
    cookie = signed_in_cookie(server, username)
    return connect(
        server.replace("http://", "ws://") + f"/ws/sessions/{session_id}/?rows=1",
        origin=server,
        additional_headers={"Cookie": f"{django_settings.SESSION_COOKIE_NAME}={cookie}"},
        proxy=None,
        open_timeout=10,
    )
