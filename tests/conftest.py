import pytest
from django.test import Client

from tests.factories import make_api_key, make_project


class ApiClient:
    """A Django test client that speaks JSON and sends an API key."""

    def __init__(self, raw_key: str | None) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {raw_key}"} if raw_key else {}

    def _call(self, method: str, path: str, data=None, **extra):
        url = path if path.startswith("/api/") else f"/api/v1{path}"
        fn = getattr(self.client, method)
        if method in {"post", "put", "patch"}:
            return fn(url, data=data if data is not None else {}, content_type="application/json",
                      headers=self.headers, **extra)
        return fn(url, data=data, headers=self.headers, **extra)

    def get(self, path, data=None, **extra):
        return self._call("get", path, data, **extra)

    def post(self, path, data=None, **extra):
        return self._call("post", path, data, **extra)

    def put(self, path, data=None, **extra):
        return self._call("put", path, data, **extra)

    def delete(self, path, data=None, **extra):
        return self._call("delete", path, data, **extra)


@pytest.fixture
def project(db):
    return make_project()


@pytest.fixture
def api_key(project):
    return make_api_key(project)


@pytest.fixture
def api(api_key):
    return ApiClient(api_key[1])


@pytest.fixture
def other_project(db):
    return make_project()


@pytest.fixture
def other_api(other_project):
    return ApiClient(make_api_key(other_project)[1])
