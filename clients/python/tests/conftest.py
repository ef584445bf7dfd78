"""The client's tests run against a live server: uvicorn on config.asgi (tests/servers.py), on
the test database, one per test module. Each test makes its project and keys (committed:
transactional_db) and talks to the server over real HTTP.

The client imports nothing of the server; these tests do, to start it and to act as a person
(answering a handoff) through the server's own services.
"""

import httpx
import pytest
from switchboard_client import Client, RetryPolicy

from tests.conftest import pytest_runtest_setup  # noqa: F401  (requires_redis, as in tests/)
from tests.factories import make_api_key, make_project
from tests.servers import asgi_server

# No long waits between retries in the live tests: nothing there is retried on purpose.
FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)


@pytest.fixture(scope="module")
def server_url(django_db_setup, django_db_blocker):
    """One server per module, started once the test database exists."""
    with asgi_server() as base:
        yield base


@pytest.fixture(scope="module")
def served_schema(server_url):
    """The OpenAPI document the live server serves."""
    response = httpx.get(server_url + "/api/v1/openapi.json", timeout=30)
    response.raise_for_status()
    return response.json()


@pytest.fixture
def project(transactional_db):
    return make_project()


@pytest.fixture
def api_key(project):
    return make_api_key(project)[1]


@pytest.fixture
def admin_key(project):
    return make_api_key(project, name="admin-key", scope="admin")[1]


@pytest.fixture
def sb(server_url, api_key):
    with Client(server_url, api_key, retry=FAST) as client:
        yield client


@pytest.fixture
def sb_admin(server_url, admin_key):
    with Client(server_url, admin_key, retry=FAST) as client:
        yield client
