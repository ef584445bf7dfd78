"""config.handlers: the agent API's requests go through a stack without the dashboard-only
middleware, and answer exactly as through the whole stack; pages keep the whole stack."""

import io
import json
import sys
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from config.handlers import PathSplitHandler


@pytest.fixture(scope="module")
def application():
    return PathSplitHandler()


@contextmanager
def connection_kept():
    """As Django's test client: the request's start and end do not close the test's connection
    (its transaction holds the test's rows)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def call(handler, method: str, path: str, *, key: str = "", body: bytes = b"", query: str = ""):
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "testserver",
        "REMOTE_ADDR": "127.0.0.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http",
    }
    if key:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    answer = {}

    def start_response(status, headers, exc_info=None):
        answer["status"] = int(status.split()[0])
        answer["headers"] = {name.lower(): value for name, value in headers}

    with connection_kept():
        response = handler(environ, start_response)
        answer["body"] = b"".join(response)
        response.close()
    return answer


def test_api_paths_take_the_short_stack_and_every_other_path_the_whole_one(application):
    for path in ["/api/v1/sessions", "/api/v1/sessions/x/events", "/api/v1/openapi.json"]:
        assert application.handler_for(path) is application.api, path
    for path in ["/api/v1/docs", "/healthz", "/", "/accounts/login/", "/static/x.css", "/apix"]:
        assert application.handler_for(path) is application.whole, path
    dashboard_only = set(settings.SWITCHBOARD_DASHBOARD_ONLY_MIDDLEWARE)
    assert dashboard_only <= set(settings.MIDDLEWARE)  # no stale name that removes nothing
    assert application.api.middleware == [
        path for path in settings.MIDDLEWARE if path not in dashboard_only
    ]


@pytest.mark.parametrize(
    ("method", "path", "body", "query", "with_key", "status"),
    [
        ("GET", "/api/v1/sessions", b"", "limit=5", True, 200),
        ("POST", "/api/v1/sessions", b'{"agent": "a"}', "", True, 201),
        ("POST", "/api/v1/sessions", b'{"agent": ', "", True, 400),
        ("POST", "/api/v1/sessions", b'{"agent": "a", "nope": 1}', "", True, 422),
        ("GET", "/api/v1/sessions", b"", "", False, 401),
        ("GET", "/api/v1/no-such-thing", b"", "", True, 404),
        ("DELETE", "/api/v1/sessions", b"", "", True, 405),
        ("GET", "/api/v1/openapi.json", b"", "", False, 200),
    ],
)
def test_an_api_answer_is_the_same_through_either_stack(
    application, api_key, method, path, body, query, with_key, status
):
    key = api_key[1] if with_key else ""
    short = call(application.api, method, path, key=key, body=body, query=query)
    whole = call(application.whole, method, path, key=key, body=body, query=query)
    assert short["status"] == whole["status"] == status, short["body"][:300]
    # Every header the whole stack sets (the security policies, the request id, the rate
    # limit's, Content-Length), and no other.
    assert set(short["headers"]) == set(whole["headers"])
    for name in ["content-security-policy", "permissions-policy", "x-content-type-options"]:
        assert short["headers"].get(name) == whole["headers"].get(name)
    assert short["headers"]["content-security-policy"]
    if short["headers"]["content-type"].startswith("application/json") and method != "POST":
        assert json.loads(short["body"]) == json.loads(whole["body"])


def test_a_page_keeps_the_whole_stack(application, db):
    """The dashboard's pages still have the visitor's session and sign-in (a signed-out visitor
    is sent to sign in) and CSRF (a form POST without its token is refused)."""
    home = call(application, "GET", "/")
    assert home["status"] == 302 and "/accounts/login/" in home["headers"]["location"]
    refused = call(application, "POST", "/accounts/login/", body=b"username=a&password=b")
    assert refused["status"] == 403
    assert b"CSRF" in refused["body"]
