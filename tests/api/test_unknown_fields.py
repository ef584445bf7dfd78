"""A body field the API does not know is refused (422 naming it, nothing changed), never
ignored, and the OpenAPI document says so (`additionalProperties: false`). Issue 23, defect 5.

The operations that take a body are read from the OpenAPI document, so a new one is covered
without a line here: it gets the unknown field in an empty body. One listed in VALID_BODIES
gets it in a valid body (and in every object nested in that body that the schema closes),
and the same body without it must then succeed, so the refusal is the unknown field's.
"""

from typing import Any

import pytest
from django.apps import apps

from config.api import api
from core.actors import Actor
from core.models import ApiKey, KeyScope, Project
from core.services.webhooks import create_endpoint
from handoffs_app.services.handoffs import request_handoff
from retention_app.models import RetentionPolicy
from sessions_app.services.blobs import store_blobs
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.lifecycle import pause_session
from tests.conftest import ApiClient
from tests.factories import (
    make_api_key,
    make_artifact,
    make_erasure,
    make_project,
    make_session,
    make_task,
)
from tests.retention.helpers import POLICY_BODY as POLICY

TESTER = Actor.system("tests")
UNKNOWN = "unexpected_field"
METHODS = {"get", "put", "post", "delete", "patch"}
# Properties that are free JSON on purpose: what an agent stores or passes through.
FREE_OBJECTS = {"content", "metadata", "payload", "params", "inputs", "outputs", "detail"}

# (method, path) -> a body that succeeds in the world below ("{session_id}" and the like are
# filled in). Each object in it is a place to put the unknown field.
VALID_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("PATCH", "/project"): {"name": "renamed"},
    ("POST", "/erasures"): {"external_id": "nobody", "preview": True},
    ("POST", "/sessions"): {"agent": "a", "metadata": {"m": 1}, "budget": {"max_tokens": 10}},
    ("POST", "/sessions/{session_id}/events"): {
        "events": [{"kind": "note", "content": {"text": "x"}}],
        "expected_head_seq": 2,  # the world's note, then its artifact
    },
    ("POST", "/sessions/{session_id}/fork"): {"at_seq": 1},
    ("POST", "/sessions/{session_id}/pause"): {"reason": "r"},
    ("POST", "/sessions/{session_id}/resume"): {"reason": "r"},
    ("POST", "/sessions/{session_id}/close"): {"reason": "r"},
    ("POST", "/tasks"): {"workflow": "document_approval", "params": {"p": 1}},
    ("POST", "/tasks/{task_id}/transitions"): {"to": "sent_for_review"},
    ("PUT", "/tasks/{task_id}/steps/{key}"): {
        "status": "waiting",
        "waiting_on": {"signal": "review_decision", "timeout_seconds": 60},
    },
    ("POST", "/tasks/{task_id}/signals/{name}"): {"error": {"type": "refused", "detail": {}}},
    ("POST", "/tasks/{task_id}/sessions"): {"session_ids": ["{session_id}"]},
    ("POST", "/workflows"): {
        "name": "flow_x",
        "states": ["new", "done"],
        "initial": "new",
        "terminal": ["done"],
        "transitions": [{"from": "new", "to": "done"}],
        "steps": [{"key": "k"}],
    },
    ("POST", "/sessions/{session_id}/handoffs"): {"kind": "question", "payload": {"question": "?"}},
    ("POST", "/handoffs/{handoff_id}/cancel"): {"reason": "r"},
    ("PUT", "/retention/policy"): {**POLICY, "agents": {"test-agent": {"close_idle_after": 60}}},
    ("POST", "/sessions/{session_id}/hold"): {"reason": "r"},
    ("POST", "/sessions/{session_id}/blobs"): {"blobs": [{"data": "QUJD"}]},
    ("POST", "/sessions/{session_id}/blobs/lookup"): {"sha256": ["{sha256}"], "data": True},
    ("POST", "/api-keys"): {"name": "k", "scope": "agent", "expires_at": None},
    ("POST", "/webhooks"): {"url": "https://hooks.example.com/", "events": ["session.closed"]},
}


OPENAPI = api.get_openapi_schema()  # the document /api/v1/openapi.json serves
COMPONENTS = OPENAPI["components"]["schemas"]
PREFIX = "/api/v1"


def _resolve(schema: dict, value: Any = None) -> dict:
    """The schema itself: $refs followed, and of an anyOf the option for `value`'s type."""
    while True:
        if "$ref" in schema:
            schema = COMPONENTS[schema["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in schema:
            wanted = "array" if isinstance(value, list) else "object"
            options = [o for o in schema["anyOf"] if o.get("type") != "null"]
            schema = next(
                (o for o in options if o.get("type") == wanted or "$ref" in o), options[0]
            )
        else:
            return schema


def _closed_objects(value: Any, schema: dict, where: tuple = ()) -> list[tuple]:
    """Where in `value` an object sits whose schema allows no other properties."""
    schema = _resolve(schema, value)
    found = []
    if isinstance(value, dict):
        if schema.get("additionalProperties") is False:
            found.append(where)
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            sub = schema.get("properties", {}).get(name, extra if isinstance(extra, dict) else None)
            if sub is not None:
                found += _closed_objects(item, sub, (*where, name))
    elif isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            found += _closed_objects(item, schema["items"], (*where, index))
    return found


def _body_operations() -> list[tuple[str, str, dict]]:
    return [
        (method.upper(), path.removeprefix(PREFIX), operation["requestBody"])
        for path, item in OPENAPI["paths"].items()
        for method, operation in item.items()
        # JSON bodies: an artifact's upload is the file itself, not fields.
        if method in METHODS
        and "application/json" in operation.get("requestBody", {}).get("content", {})
    ]


def _cases() -> list[tuple[str, str, tuple]]:
    cases = []
    for method, path, request_body in _body_operations():
        body = VALID_BODIES.get((method, path), {})
        schema = request_body["content"]["application/json"]["schema"]
        # The top level always (whatever the schema says), then each closed object inside.
        nested = [where for where in _closed_objects(body, schema) if where]
        cases += [(method, path, where) for where in [(), *nested]]
    return cases


CASES = _cases()


def test_it_knows_the_operations_that_take_a_body():
    operations = {(method, path) for method, path, _ in _body_operations()}
    assert set(VALID_BODIES) <= operations, "a listed operation no longer takes a body"
    assert len(operations) >= 17
    # Nested objects are covered, not only the top level.
    assert ("POST", "/sessions/{session_id}/events", ("events", 0)) in CASES
    assert ("PUT", "/retention/policy", ("agents", "test-agent")) in CASES
    assert ("POST", "/workflows", ("transitions", 0)) in CASES


# --- The world the requests are made in --------------------------------------------------------


def _world(project: Project) -> dict[str, str]:
    session = make_session(project)  # agent "test-agent"
    append_events(session, [EventDraft(kind="note", content={"n": 1})], actor=TESTER)
    (blob,) = store_blobs(session, [b"a blob"])
    make_artifact(session, "review_decision")  # the {name} of artifacts' routes
    paused = make_session(project)
    pause_session(paused, actor=TESTER, reason="tests")
    handoff = request_handoff(
        make_session(project), kind="question", payload={"question": "?"}, actor=TESTER
    ).handoff
    return {
        "session_id": str(session.pk),
        "paused_session_id": str(paused.pk),
        "task_id": str(make_task(project).pk),
        "handoff_id": str(handoff.pk),
        "key": "review",
        "name": "review_decision",
        "sha256": blob.sha256,
        "erasure_id": str(make_erasure(project).pk),
        # DELETE /api-keys/{key_id} and /webhooks/{endpoint_id}: a spare key, an endpoint.
        "key_id": str(make_api_key(project, name="spare")[0].pk),
        "endpoint_id": str(
            create_endpoint(
                project, url="https://hooks.example.com/", events=["session.closed"], actor=TESTER
            )[0].pk
        ),
    }


def _fill(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, ids) for v in value]
    return value.format(**ids) if isinstance(value, str) else value


def _url(path: str, ids: dict[str, str]) -> str:
    if path.endswith("/resume"):
        ids = {**ids, "session_id": ids["paused_session_id"]}
    return _fill(path, ids)


def _with_unknown(body: Any, where: tuple) -> Any:
    """A copy of `body` with UNKNOWN added to the object at `where`."""
    if not where:
        return {**body, UNKNOWN: 1}
    head, *rest = where
    copy = list(body) if isinstance(body, list) else dict(body)
    copy[head] = _with_unknown(body[head], tuple(rest))
    return copy


def _state() -> dict[str, list]:
    """Every row of the project's apps (an API key's last use aside: it is no change)."""
    state = {}
    for label in ("core", "sessions_app", "tasks_app", "handoffs_app", "retention_app"):
        for model in apps.get_app_config(label).get_models():
            rows = model.objects.order_by("pk").values()
            if model is ApiKey:
                rows = rows.values("pk", "revoked_at", "scope")
            state[model._meta.label] = [repr(row) for row in rows]
    return state


def _assert_names_unknown(response, where: tuple) -> None:
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert set(error) == {"code", "message", "detail"}
    assert error["code"] == "invalid_input"
    named = [p for p in error["detail"] if p["loc"][-1] == UNKNOWN]
    assert len(named) == 1, error["detail"]
    assert named[0]["type"] == "extra_forbidden"
    assert tuple(named[0]["loc"][-1 - len(where) : -1]) == where, named[0]["loc"]


@pytest.mark.parametrize(
    ("method", "path", "where"),
    CASES,
    ids=[f"{m} {p} {'.'.join(map(str, w)) or '(top)'}" for m, p, w in CASES],
)
def test_it_refuses_an_unknown_field_and_changes_nothing(db, method, path, where):
    project = make_project()
    ids = _world(project)
    client = ApiClient(make_api_key(project, scope=KeyScope.ADMIN)[1])
    valid = _fill(VALID_BODIES.get((method, path), {}), ids)
    before = _state()

    _assert_names_unknown(client.send(method, _url(path, ids), _with_unknown(valid, where)), where)
    assert _state() == before

    if (method, path) in VALID_BODIES:  # without the unknown field, the same request succeeds
        response = client.send(method, _url(path, ids), valid)
        assert 200 <= response.status_code < 300, response.content


# --- The retention policy (issue 23, defect 5) -------------------------------------------------


@pytest.fixture
def admin(project):
    return ApiClient(make_api_key(project, scope=KeyScope.ADMIN)[1])


@pytest.fixture
def saved_policy(project, admin):
    make_session(project, agent="bot")
    body = {**POLICY, "agents": {"bot": {"delete_after": 7 * 86400}}}
    response = admin.put("/retention/policy", body)
    assert response.status_code == 200, response.content
    return response.json()


def _policy_rows(project) -> list:
    return list(RetentionPolicy.objects.filter(project=project).order_by("pk").values())


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"retain_forever": True}, ["retain_forever"]),
        ({"agents": {"bot": {"delete_after": 60, "bogus": 1}}}, ["agents", "bot", "bogus"]),
        (
            {"agents": {"bot": {"agents": {"bot": {"close_idle_after": 1}}}}},
            ["agents", "bot", "agents"],
        ),
        ({"close_idle_after": True}, ["close_idle_after"]),  # was saved as 1 second
        ({"close_idle_after": "60"}, ["close_idle_after"]),
        ({"agents": {"bot": {"close_idle_after": False}}}, ["agents", "bot", "close_idle_after"]),
    ],
    ids=["top", "override", "nested-agents", "true", "string", "override-false"],
)
def test_it_refuses_a_policy_with_an_unknown_field_or_a_boolean_duration(
    project, admin, saved_policy, change, where
):
    rows = _policy_rows(project)
    response = admin.put("/retention/policy", {**POLICY, **change})
    assert response.status_code == 422, response.content
    detail = response.json()["error"]["detail"]
    assert any(problem["loc"][-len(where) :] == where for problem in detail), detail
    assert _policy_rows(project) == rows
    assert admin.get("/retention/policy").json() == saved_policy


def test_it_takes_back_the_policy_it_answers(project, admin, saved_policy):
    # GET's document (with its read-only `defaults`) can be sent back as it is.
    response = admin.put("/retention/policy", saved_policy)
    assert response.status_code == 200, response.content
    assert response.json() == saved_policy


# --- The schema says so ----------------------------------------------------------------------


def _objects_in(schema: dict, name: str, seen: set[str]) -> list[tuple[str, dict]]:
    """Every object schema reachable from `schema` (each component once), with the name of
    the property or component it describes."""
    if "$ref" in schema:
        component = schema["$ref"].rsplit("/", 1)[1]
        if component in seen:
            return []
        seen.add(component)
        return _objects_in(COMPONENTS[component], component, seen)
    found = [(name, schema)] if schema.get("type") == "object" or "properties" in schema else []
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key, []):
            found += _objects_in(option, name, seen)
    for prop, sub in schema.get("properties", {}).items():
        found += _objects_in(sub, prop, seen)
    if isinstance(schema.get("additionalProperties"), dict):
        found += _objects_in(schema["additionalProperties"], name, seen)
    if "items" in schema:
        found += _objects_in(schema["items"], name, seen)
    return found


@pytest.mark.parametrize(
    ("method", "path", "request_body"),
    _body_operations(),
    ids=[f"{m} {p}" for m, p, _ in _body_operations()],
)
def test_the_schema_closes_every_request_body(method, path, request_body):
    schema = request_body["content"]["application/json"]["schema"]
    objects = _objects_in(schema, "(body)", set())
    assert objects
    for name, obj in objects:
        extra = obj.get("additionalProperties")
        if "properties" in obj:
            assert extra is False, f"{name} takes properties it does not declare"
        else:  # a map: free JSON on purpose, or names to a closed schema
            assert name in FREE_OBJECTS or isinstance(extra, dict), name
