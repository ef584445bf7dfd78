"""One live server for all of the ADK adapter's test modules (the client tests start one per
module): each start costs seconds on a busy machine, and nothing here needs a fresh one."""

import pytest

from tests.servers import asgi_server


@pytest.fixture(scope="package")
def server_url(django_db_setup, django_db_blocker):
    with asgi_server() as base:
        yield base
