"""The LangGraph adapter's tests share one live server (the client's tests start one per
module): four modules, one start."""

import pytest

from tests.servers import asgi_server


@pytest.fixture(scope="package")
def server_url(django_db_setup, django_db_blocker):
    with asgi_server() as base:
        yield base
