import json
import os
import socket
import urllib.parse
from functools import cache
from typing import NoReturn

import pytest
from django.test import Client

from tests.factories import make_api_key, make_project
from tests.multiproc import ProcessPool

# Where `bash scripts/test` looks for Redis when REDIS_URL is unset.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


@cache
def redis_missing() -> str | None:
    """Why this run has no usable Redis (None when it has one). Checked once per run."""
    from django.conf import settings

    url = settings.REDIS_URL
    if not url:
        return f"Redis not available at {DEFAULT_REDIS_URL}"
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:  # a Unix socket: let the tests find out
        return None
    try:
        socket.create_connection((parts.hostname, parts.port or 6379), timeout=3).close()
    except OSError:
        return f"Redis not available at {url} (REDIS_URL set, nothing answers)"
    return None


def pytest_runtest_setup(item):
    """`@pytest.mark.requires_redis("what is not tested")`: skipped without Redis, with the reason.

    Under CI (CI set) a missing Redis fails the test instead: CI always has Redis (.ci/run).
    """
    marker = item.get_closest_marker("requires_redis")
    if marker is None:
        return
    missing = redis_missing()
    if missing is None:
        return
    what = marker.args[0] if marker.args else item.name
    skip_unless_ci(f"{missing}: {what} not tested", "CI always has Redis (bash .ci/run starts it)")


def under_ci() -> bool:
    return os.environ.get("CI", "").lower() not in {"", "0", "false", "no"}


def skip_unless_ci(reason: str, ci_has_it: str) -> NoReturn:
    """Skip the test for something this machine lacks; under CI (CI set) fail it instead, since
    CI has it (`ci_has_it` says how): a missing service or binary must not pass CI unseen."""
    if under_ci():
        pytest.fail(f"{reason}. CI is set, and {ci_has_it}.", pytrace=False)
    pytest.skip(reason)


def pytest_report_header(config):
    from django.conf import settings

    db = settings.DATABASES["default"]
    where = db["HOST"] or db.get("OPTIONS", {}).get("host") or "the default socket"
    port = f":{db['PORT']}" if db["PORT"] else ""
    redis = settings.REDIS_URL or f"none (nothing used at {DEFAULT_REDIS_URL})"
    return [
        f"database: PostgreSQL at {where}{port}, test database {db['TEST']['NAME']}",
        f"redis: {redis}",
    ]


class ApiClient:
    """A Django test client that speaks JSON and sends an API key."""

    def __init__(self, raw_key: str | None) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {raw_key}"} if raw_key else {}

    def _call(self, method: str, path: str, data=None, **extra):
        url = path if path.startswith("/api/") else f"/api/v1{path}"
        fn = getattr(self.client, method)
        if method in {"post", "put", "patch"}:
            return fn(
                url,
                data=data if data is not None else {},
                content_type="application/json",
                headers=self.headers,
                **extra,
            )
        return fn(url, data=data, headers=self.headers, **extra)

    def get(self, path, data=None, **extra):
        return self._call("get", path, data, **extra)

    def post(self, path, data=None, **extra):
        return self._call("post", path, data, **extra)

    def put(self, path, data=None, **extra):
        return self._call("put", path, data, **extra)

    def delete(self, path, data=None, **extra):
        return self._call("delete", path, data, **extra)

    def send(self, method: str, path: str, body=None):
        """Any `method` (upper case), `body` as JSON (None: no body at all, not `null`)."""
        url = path if path.startswith("/api/") else f"/api/v1{path}"
        if body is None:
            return self.client.generic(method, url, headers=self.headers)
        return self.client.generic(
            method,
            url,
            data=json.dumps(body),
            content_type="application/json",
            headers=self.headers,
        )


@pytest.fixture
def project(db):
    return make_project()


@pytest.fixture(scope="module")
def racers(request, django_db_setup):
    """The test module's PROCESSES racing processes (tests.multiproc.ProcessPool), started once
    for all of its tests: each child's start-up costs about two seconds of CPU."""
    with ProcessPool(request.module.PROCESSES) as pool:
        yield pool


@pytest.fixture
def api_key(project):
    return make_api_key(project)


@pytest.fixture
def api(api_key):
    return ApiClient(api_key[1])


@pytest.fixture
def other_project(db):
    return make_project()


@pytest.fixture(params=["agent", "admin"], ids=["agent-key", "admin-key"])
def other_api(request, other_project):
    """Another project's key, of each scope: the cross-project tests run once per scope, as an
    admin-scoped key reaches no more of another project than an agent-scoped one."""
    return ApiClient(make_api_key(other_project, scope=request.param)[1])


@pytest.fixture(autouse=True)
def _background_snapshots_taken():
    """No automatic snapshot is still being taken by the background thread (a connection of
    its own) when a test's database is flushed or dropped."""
    yield
    from sessions_app.services.snapshots import drain

    assert drain(), "background snapshots still waiting after 30 s"
