"""Revoking a key takes effect on the next request on every server process: two real uvicorn
servers (two processes, as behind a load balancer) both serve the key, it is revoked, and the
very next request to each answers 401. Each process keeps the keys it has read (core.keycache),
warmed here by the second pair of requests, and confirms them per request against the keys'
epoch in Redis, which the revocation renews when it commits."""

import urllib.error
import urllib.request

import pytest

from core.actors import Actor
from core.services.projects import revoke_api_key
from tests.factories import make_api_key, make_project
from tests.servers import asgi_server

pytestmark = pytest.mark.django_db(transaction=True)


def status(base_url: str, raw_key: str) -> int:
    request = urllib.request.Request(
        f"{base_url}/api/v1/project", headers={"Authorization": f"Bearer {raw_key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_revoked_key_is_refused_by_every_server_at_its_next_request():
    project = make_project()
    api_key, raw = make_api_key(project)
    with asgi_server() as first, asgi_server() as second:
        assert [status(first, raw), status(second, raw)] == [200, 200]
        assert [status(first, raw), status(second, raw)] == [200, 200]  # warm, if anything cached
        revoke_api_key(api_key, actor=Actor.system("tests"))
        assert [status(first, raw), status(second, raw)] == [401, 401]


def test_a_key_revoked_through_the_api_is_refused_by_every_server_at_its_next_request():
    project = make_project()
    api_key, raw = make_api_key(project)
    _, admin_raw = make_api_key(project, name="admin", scope="admin")
    with asgi_server() as first, asgi_server() as second:
        for _ in range(2):  # the second pair is served from each process's cache
            assert [status(first, raw), status(second, raw)] == [200, 200]
        request = urllib.request.Request(
            f"{first}/api/v1/api-keys/{api_key.pk}",
            method="DELETE",
            headers={"Authorization": f"Bearer {admin_raw}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        assert [status(first, raw), status(second, raw)] == [401, 401]
