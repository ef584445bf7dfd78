"""The OpenAI Agents adapter's tests share one live server and one project for the whole
package (not one per module and one per test, as the client's own tests do): the SDK's suite
is some 400 tests, and a flush of the test database after each would cost more than all of
them. Tests keep apart by namespace (a fresh one per test), as the adapter's users do; the
database is flushed once, after the package, as transactional_db does after a test."""

import uuid
from pathlib import Path

import pytest
from django.core.management import call_command
from switchboard_client import AsyncClient, Client, RetryPolicy

from tests.factories import make_api_key, make_project
from tests.servers import asgi_server

# As the client tests: no long waits between retries (nothing is retried on purpose).
FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)


HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items):
    """Each test of the package is marked django_db (a transaction rolled back, nothing in
    it: the server commits what the tests make), so that pytest-django sets the test database
    up even when only this package runs."""
    for item in items:
        if Path(str(item.path)).is_relative_to(HERE):
            item.add_marker(pytest.mark.django_db)


@pytest.fixture(scope="package")
def server_url(django_db_setup, django_db_blocker):
    """One server for the package (overrides the client tests' per-module one)."""
    with asgi_server() as base:
        yield base


@pytest.fixture(scope="package")
def oa_project(server_url, django_db_blocker):
    """The package's project, committed; the database is flushed after the package."""
    with django_db_blocker.unblock():
        project = make_project()
    yield project
    with django_db_blocker.unblock():
        call_command("flush", interactive=False, verbosity=0)


@pytest.fixture(scope="package")
def oa_key(oa_project, django_db_blocker):
    with django_db_blocker.unblock():
        return make_api_key(oa_project, name="openai-agents")[1]


@pytest.fixture
def namespace():
    """A namespace of the test's own: no other test sees its sessions."""
    return f"oa-test/{uuid.uuid4().hex[:12]}/"


@pytest.fixture
def sb(server_url, oa_key):
    with Client(server_url, oa_key, retry=FAST) as client:
        yield client


@pytest.fixture
def asb(server_url, oa_key):
    """An AsyncClient for tests that run their own event loop (asyncio.run)."""
    return AsyncClient(server_url, oa_key, retry=FAST)
