"""A query parameter an operation does not declare is refused (422 naming it, nothing changed),
never ignored (DESIGN "Errors"; ninja reads only the names it declares, so `limt=5` was a page
of the default size). The refusal comes after authentication: a bad key is a 401 that says
nothing about the parameters (config.api.refuse_unknown_query_parameters).

The operations are read from the OpenAPI document, so a new one is covered without a line here:
each gets the unknown parameter on a request that succeeds without it (a valid body from
tests/api/test_unknown_fields.py, real ids of the caller's project), and each parameter the
document declares (its own, and a query-string credential) is taken.
"""

import uuid
from typing import Any

import pytest

from core.actors import Actor
from core.models import KeyScope
from retention_app.services.holds import place_hold
from sessions_app.models import Session
from tasks_app.models import Task
from tasks_app.services.links import link_sessions
from tests.api.test_unknown_fields import OPENAPI, PREFIX, VALID_BODIES, _fill, _state, _world
from tests.conftest import ApiClient
from tests.factories import make_api_key, make_project

TESTER = Actor.system("tests")
UNKNOWN = "unexpected_param"
METHODS = {"get", "put", "post", "delete", "patch"}


def _operations() -> list[tuple[str, str, dict]]:
    return [
        (method.upper(), path.removeprefix(PREFIX), operation)
        for path, item in OPENAPI["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


OPERATIONS = _operations()
IDS = [f"{m} {p}" for m, p, _ in OPERATIONS]


def test_it_knows_every_operation():
    assert len(OPERATIONS) >= 35
    assert ("POST", "/sessions/{session_id}/events") in {(m, p) for m, p, _ in OPERATIONS}


def _ready(project, method: str, path: str) -> dict[str, str]:
    """Real ids for `path`, with what its request needs to succeed."""
    ids = _world(project)
    if path.endswith("/resume"):
        ids["session_id"] = ids["paused_session_id"]
    if path.startswith("/workflows/"):
        ids["name"] = "document_approval"
    session = Session.objects.get(pk=ids["session_id"])
    if method == "DELETE" and path.endswith("/hold"):
        place_hold(project, session=session, reason="tests", actor=TESTER)
    if method == "DELETE" and path == "/tasks/{task_id}/sessions/{session_id}":
        link_sessions(Task.objects.get(pk=ids["task_id"]), [session.pk], actor=TESTER)
    return ids


def _body(method: str, path: str, operation: dict, ids: dict[str, str]) -> Any:
    if "requestBody" not in operation:
        return None
    return _fill(VALID_BODIES.get((method, path), {}), ids)


@pytest.mark.parametrize(("method", "path", "operation"), OPERATIONS, ids=IDS)
def test_it_refuses_an_unknown_parameter_and_changes_nothing(db, method, path, operation):
    project = make_project()
    ids = _ready(project, method, path)
    client = ApiClient(make_api_key(project, scope=KeyScope.ADMIN)[1])
    url, body = _fill(path, ids), _body(method, path, operation, ids)
    before = _state()

    response = client.send(method, f"{url}?{UNKNOWN}=1&{UNKNOWN}=2&also_unknown=", body)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert set(error) == {"code", "message", "detail"} and error["code"] == "invalid_input"
    assert error["detail"] == [
        {"type": "extra_forbidden", "loc": ["query", name], "msg": "Extra inputs are not permitted"}
        for name in (UNKNOWN, "also_unknown")
    ]
    assert _state() == before

    # Without it, the same request succeeds: the refusal was the parameter's.
    response = client.send(method, url, body)
    assert 200 <= response.status_code < 300, response.content


@pytest.mark.parametrize(("method", "path", "operation"), OPERATIONS, ids=IDS)
@pytest.mark.parametrize("key", ["none", "unknown"])
def test_a_bad_key_is_refused_before_the_parameters_are_read(db, method, path, operation, key):
    client = ApiClient(None if key == "none" else "sb_live_nope_0123456789abcdef")
    ids = {
        "session_id": uuid.uuid4(),
        "task_id": uuid.uuid4(),
        "handoff_id": uuid.uuid4(),
        "erasure_id": uuid.uuid4(),
    }
    names = {"key": "review", "name": "review_decision", "sha256": "0" * 64}
    url = path.format_map({**ids, **names, "key_id": 1, "endpoint_id": 1})
    body = {} if "requestBody" in operation else None
    response = client.send(method, f"{url}?{UNKNOWN}=1", body)
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == "unauthorized"
    assert UNKNOWN not in response.content.decode()


def test_a_key_below_the_scope_is_a_403_not_a_422(project):
    client = ApiClient(make_api_key(project, scope=KeyScope.AGENT)[1])
    response = client.get(f"/retention/policy?{UNKNOWN}=1")
    assert response.status_code == 403, response.content


# --- What the document declares is taken -----------------------------------------------------


def _valid(schema: dict) -> Any:
    """A value for a query parameter of this schema."""
    schema = next((o for o in schema.get("anyOf", []) if o.get("type") != "null"), schema)
    if "$ref" in schema:
        schema = OPENAPI["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    if "default" in schema and schema["default"] is not None:
        return schema["default"]
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if schema.get("type") == "boolean":
        return "true"
    if schema.get("type") == "array":
        return _valid(schema["items"])
    if schema.get("type") == "integer":
        return schema.get("minimum", 1)
    formats = {"date-time": "2026-01-01T00:00:00Z", "uuid": str(uuid.uuid4())}
    return formats.get(schema.get("format"), "x")


def _query_schemes() -> set[str]:
    schemes = OPENAPI["components"].get("securitySchemes", {})
    return {name for name, scheme in schemes.items() if scheme.get("in") == "query"}


WITH_QUERY = [
    (method, path, operation)
    for method, path, operation in OPERATIONS
    if any(p["in"] == "query" for p in operation.get("parameters", []))
    or any(set(r) & _query_schemes() for r in operation.get("security", []))
]


def test_it_knows_the_operations_with_query_parameters():
    labels = {f"{m} {p}" for m, p, _ in WITH_QUERY}
    assert {"GET /sessions", "GET /handoffs/{handoff_id}"} <= labels
    assert "POST /tasks/{task_id}/signals/{name}" in labels  # signal_token


@pytest.mark.parametrize(
    ("method", "path", "operation"), WITH_QUERY, ids=[f"{m} {p}" for m, p, _ in WITH_QUERY]
)
def test_it_takes_every_parameter_the_document_declares(db, method, path, operation):
    project = make_project()
    ids = _ready(project, method, path)
    client = ApiClient(make_api_key(project, scope=KeyScope.ADMIN)[1])
    declared = {
        p["name"]: _valid(p.get("schema", {}))
        for p in operation.get("parameters", [])
        if p["in"] == "query"
    }
    query_schemes = _query_schemes()
    for requirement in operation.get("security", []):
        for scheme in set(requirement) & query_schemes:
            declared[OPENAPI["components"]["securitySchemes"][scheme]["name"]] = "x"
    assert declared
    query = "?" + "&".join(f"{name}={value}" for name, value in declared.items())
    url, body = _fill(path, ids), _body(method, path, operation, ids)

    response = client.send(method, f"{url}{query}", body)
    # Past validation: a success or a domain refusal (a cursor never issued, a version that
    # does not exist), not a list of schema problems.
    if response.status_code in (400, 422):
        assert not isinstance(response.json()["error"]["detail"], list), response.content
