"""Hostile input: text PostgreSQL cannot store (a lone surrogate, a NUL character), numbers in
disguise, database error text, a forged Host. Each is refused in the API's error shape, names
the field, and changes nothing (issue 8, defects 1, 5 and 7)."""

import json
import logging

import pytest
from django.db import DataError, connection
from django.test import Client, RequestFactory

from config.api import unexpected
from core.actors import Actor
from core.errors import InvalidInput
from core.text import LONE_SURROGATE, NOT_FINITE, NUL_CHARACTER, dotted
from sessions_app.models import Event, Session
from sessions_app.services.events import EventDraft, append_events
from sessions_app.storage import COPY_FROM_ROWS
from tasks_app.models import Step, Task, WorkflowDefinition
from tasks_app.workflows import load_workflow_file
from tests.factories import make_session, make_task

SURROGATE = "\ud800"
NUL = "\x00"


def _assert_unstorable(response, where: list, bad: str = NUL):
    """422 in the error shape, naming the field that holds `bad` as the client wrote it."""
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert error["detail"] == {
        "field": dotted(tuple(where)),
        "problem": LONE_SURROGATE if bad == SURROGATE else NUL_CHARACTER,
    }


def _assert_refused(response, where: list):
    """422 in the error shape, with a problem whose loc ends with `where`."""
    assert response.status_code == 422, response.content
    body = response.json()
    assert set(body["error"]) == {"code", "message", "detail"}
    detail = body["error"]["detail"]
    assert any(problem["loc"][-len(where) :] == where for problem in detail), detail


# --- Defect 1: text the database cannot store -------------------------------------------------


@pytest.mark.parametrize("bad", [SURROGATE, NUL], ids=["surrogate", "nul"])
@pytest.mark.parametrize(
    ("event", "where"),
    [
        ({"kind": "note", "content": {"text": "{bad}"}}, ["content", "text"]),
        ({"kind": "message", "content": {"message": "{bad}"}}, ["content", "message"]),
        ({"kind": "fact", "content": {"key": "{bad}", "value": 1}}, ["content", "key"]),
        ({"kind": "fact", "content": {"key": "k", "value": "{bad}"}}, ["content", "value"]),
        ({"kind": "decision", "content": {"decision": "{bad}"}}, ["content", "decision"]),
        (
            {"kind": "decision", "content": {"decision": "d", "rationale": "{bad}"}},
            ["content", "rationale"],
        ),
        ({"kind": "state", "content": {"deep": [1, {"x": "{bad}"}]}}, ["content", "deep", 1, "x"]),
        ({"kind": "state", "content": {"{bad}": 1}}, ["content", "{bad}"]),
        ({"kind": "note", "idempotency_key": "{bad}"}, ["idempotency_key"]),
        ({"kind": "note", "role": "{bad}"}, ["role"]),
    ],
)
def test_it_refuses_unstorable_text_in_an_event_and_names_the_field(
    api, project, event, where, bad
):
    session = make_session(project)
    event = _fill(event, bad)
    where = [bad if part == "{bad}" else part for part in where]
    response = api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}, event]})
    _assert_unstorable(response, ["events", 1, *where], bad)
    assert not Event.objects.filter(session=session).exists()


def _fill(value, bad):
    if isinstance(value, dict):
        return {_fill(k, bad): _fill(v, bad) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, bad) for v in value]
    return value.replace("{bad}", bad) if isinstance(value, str) else value


@pytest.mark.parametrize("bad", [SURROGATE, NUL], ids=["surrogate", "nul"])
@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"agent": "{bad}"}, ["agent"]),
        ({"agent": "a", "title": "x{bad}"}, ["title"]),
        ({"agent": "a", "external_id": "{bad}"}, ["external_id"]),
        ({"agent": "a", "metadata": {"k": ["{bad}"]}}, ["metadata", "k", 0]),
    ],
)
def test_it_refuses_unstorable_text_when_opening_a_session(api, project, body, where, bad):
    _assert_unstorable(api.post("/sessions", _fill(body, bad)), where, bad)
    assert not Session.objects.filter(project=project).exists()


@pytest.mark.parametrize("bad", [SURROGATE, NUL], ids=["surrogate", "nul"])
@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"workflow": "document_approval", "params": {"p": "{bad}"}}, ["params", "p"]),
        ({"workflow": "document_approval", "metadata": {"{bad}": 1}}, ["metadata", "{bad}"]),
        ({"workflow": "document_approval", "external_id": "{bad}"}, ["external_id"]),
        ({"workflow": "{bad}"}, ["workflow"]),
    ],
)
def test_it_refuses_unstorable_text_when_creating_a_task(api, project, body, where, bad):
    where = [bad if part == "{bad}" else part for part in where]
    _assert_unstorable(api.post("/tasks", _fill(body, bad)), where, bad)
    assert not Task.objects.filter(project=project).exists()


@pytest.mark.parametrize("bad", [SURROGATE, NUL], ids=["surrogate", "nul"])
@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"status": "running", "inputs": {"a": "{bad}"}}, ["inputs", "a"]),
        ({"status": "succeeded", "outputs": {"a": ["{bad}"]}}, ["outputs", "a", 0]),
        ({"status": "failed", "error": {"type": "E", "message": "{bad}"}}, ["error", "message"]),
        (
            {"status": "failed", "error": {"type": "E", "detail": {"d": "{bad}"}}},
            ["error", "detail", "d"],
        ),
        ({"status": "running", "agent": "{bad}"}, ["agent"]),
        ({"status": "running", "branch": "{bad}"}, ["branch"]),
        ({"status": "running", "reason": "{bad}"}, ["reason"]),
    ],
)
def test_it_refuses_unstorable_text_in_a_step_report(api, project, body, where, bad):
    task = make_task(project)
    before = list(Step.objects.filter(task=task).values())
    _assert_unstorable(api.put(f"/tasks/{task.pk}/steps/draft", _fill(body, bad)), where, bad)
    assert list(Step.objects.filter(task=task).values()) == before


@pytest.mark.parametrize("bad", [SURROGATE, NUL], ids=["surrogate", "nul"])
def test_it_refuses_unstorable_text_in_signals_transitions_and_lifecycle(api, project, bad):
    task = make_task(project)
    session = make_session(project)
    version = task.version
    _assert_unstorable(
        api.post(f"/tasks/{task.pk}/signals/review_decision", {"payload": {"v": bad}}),
        ["payload", "v"],
        bad,
    )
    _assert_unstorable(
        api.post(f"/tasks/{task.pk}/signals/review_decision", {"idempotency_key": bad}),
        ["idempotency_key"],
        bad,
    )
    _assert_unstorable(
        api.post(f"/tasks/{task.pk}/transitions", {"to": "x", "reason": bad}), ["reason"], bad
    )
    task.refresh_from_db()
    assert task.version == version
    _assert_unstorable(api.post(f"/sessions/{session.pk}/pause", {"reason": bad}), ["reason"], bad)
    _assert_unstorable(
        api.post(f"/sessions/{session.pk}/fork", {"at_seq": 0, "title": bad}), ["title"], bad
    )
    session.refresh_from_db()
    assert session.status == "open" and session.head_seq == 0
    assert Session.objects.filter(project=project).count() == 1


@pytest.mark.parametrize("bad", [SURROGATE, NUL], ids=["surrogate", "nul"])
def test_it_refuses_unstorable_text_in_a_workflow_definition(api, project, bad):
    definition = {
        "name": "triage",
        "title": "T",
        "states": ["new", "done"],
        "initial": "new",
        "terminal": ["done"],
        "transitions": [{"from": "new", "to": "done", "name": "finish"}],
        "steps": [{"key": "classify", "title": f"C{bad}"}],
    }
    _assert_unstorable(api.post("/workflows", definition), ["steps", 0, "title"], bad)
    _assert_unstorable(
        api.post("/workflows", {**definition, "steps": [], "description": bad}),
        ["description"],
        bad,
    )
    assert not WorkflowDefinition.objects.filter(project=project, name="triage").exists()


@pytest.mark.parametrize(
    ("path", "params", "where"),
    [
        ("/sessions", {"q": "a\x00b"}, ["q"]),
        ("/sessions", {"agent": "a\x00"}, ["agent"]),
        ("/sessions", {"metadata_key": "\x00"}, ["metadata_key"]),
        ("/sessions", {"cursor": "\x00"}, ["cursor"]),
        ("/tasks", {"workflow": "\x00"}, ["workflow"]),
        ("/tasks", {"external_id": "\x00"}, ["external_id"]),
        ("/tasks", {"state": "\x00"}, ["state", 0]),
        ("/workflows", {"name": "\x00"}, ["name"]),
    ],
)
def test_it_refuses_a_nul_character_in_a_query_parameter(api, project, path, params, where):
    _assert_unstorable(api.get(path, params), where)


def test_it_refuses_a_nul_character_in_a_path_parameter_or_task_query(api, project):
    task = make_task(project)
    _assert_unstorable(api.get(f"/tasks/{task.pk}/steps/dr%00aft"), ["key"])
    _assert_unstorable(api.put(f"/tasks/{task.pk}/steps/dr%00aft", {"status": "running"}), ["key"])
    _assert_unstorable(api.get(f"/tasks/{task.pk}/history", {"step": "\x00"}), ["step"])
    _assert_unstorable(api.get("/workflows/tri%00age"), ["name"])
    assert not Step.objects.filter(task=task, key__contains="aft", status="running").exists()


def test_it_answers_401_for_a_signal_token_with_a_nul_character(api, project):
    task = make_task(project)
    response = Client().post(
        f"/api/v1/tasks/{task.pk}/signals/review_decision?signal_token=sbt_%00",
        data={},
        content_type="application/json",
    )
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == "unauthorized"


def test_it_answers_401_for_an_api_key_with_a_nul_character(db):
    response = Client().get("/api/v1/sessions", headers={"Authorization": "Bearer sb_\x00x_y"})
    assert response.status_code == 401, response.content
    assert response.json()["error"]["code"] == "unauthorized"


def test_it_keeps_valid_non_ascii_text(api, project):
    session = make_session(project)
    text = "caf\u00e9 \U0001f600 \u4e2d"  # an astral character is a surrogate pair in JSON
    response = api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "note", "content": {"text": text}}]}
    )
    assert response.status_code == 201, response.content
    assert Event.objects.get(session=session).content == {"text": text}


def test_the_append_service_refuses_unstorable_text_from_any_caller(project):
    session = make_session(project)
    drafts = [
        EventDraft(kind="note"),
        EventDraft(kind="note", content={"a": [{"text": SURROGATE}]}),
    ]
    with pytest.raises(InvalidInput) as refused:
        append_events(session, drafts, actor=Actor.system("tests"))
    assert refused.value.detail == {
        "index": 1,
        "field": "content.a[0].text",
        "problem": LONE_SURROGATE,
    }
    assert not Event.objects.filter(session=session).exists()


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
@pytest.mark.parametrize("size", [1, COPY_FROM_ROWS + 2], ids=["one", "batch"])
def test_it_refuses_a_number_that_is_not_finite_and_names_the_field(
    api, transactional_db, project, number, size
):
    # transactional_db: outside a transaction, as a request, the append takes its one-statement
    # path (a batch's rows encoded as one JSON array).
    # Python's json reads these (1e400 as infinity); jsonb cannot hold them, and the batch's
    # encoder (orjson) would have written them as null: refused, naming the field, none written.
    session = make_session(project)
    events = ['{"kind": "note", "content": {"n": 1}}'] * size
    events[-1] = '{"kind": "note", "content": {"list": [1, NUMBER]}}'.replace("NUMBER", number)
    response = api.client.post(
        f"/api/v1/sessions/{session.pk}/events",
        f'{{"events": [{", ".join(events)}]}}',
        content_type="application/json",
        headers=api.headers,
    )
    assert response.status_code == 422, response.content
    assert response.json()["error"]["detail"] == {
        "field": f"events[{size - 1}].content.list[1]",
        "problem": NOT_FINITE,
    }
    assert not Event.objects.filter(session=session).exists()
    assert Session.objects.get(pk=session.pk).head_seq == 0


def test_the_append_service_refuses_a_number_that_is_not_finite_from_any_caller(
    transactional_db, project
):
    session = make_session(project)
    drafts = [EventDraft(kind="note") for _ in range(COPY_FROM_ROWS)]
    drafts.append(EventDraft(kind="note", content={"score": float("nan")}))
    with pytest.raises(InvalidInput) as refused:
        append_events(session, drafts, actor=Actor.system("tests"))
    assert refused.value.detail == {
        "index": COPY_FROM_ROWS,
        "field": "content.score",
        "problem": NOT_FINITE,
    }
    assert not Event.objects.filter(session=session).exists()


@pytest.mark.parametrize("size", [1, COPY_FROM_ROWS + 2], ids=["one", "batch"])
def test_it_stores_content_the_fast_encoder_refuses_exactly(api, transactional_db, project, size):
    # An integer beyond 64 bits (jsonb keeps it; orjson refuses it, and the batch falls back to
    # json.dumps), floats and non-ASCII text: stored as sent, whichever encoder wrote them.
    session = make_session(project)
    content = {"big": 123456789012345678901234567890, "f": 0.1, "e": 1e-7, "t": "caf\u00e9 \u4e2d"}
    body = {"events": [{"kind": "note", "content": content} for _ in range(size)]}
    response = api.post(f"/sessions/{session.pk}/events", body)
    assert response.status_code == 201, response.content
    stored = list(Event.objects.filter(session=session).values_list("content", flat=True))
    assert stored == [content] * size


def test_a_workflow_file_with_a_nul_character_is_refused_by_the_parser(tmp_path):
    path = tmp_path / "triage.json"
    definition = {
        "name": "triage",
        "version": 1,
        "description": "new\u0000",
        "states": ["new", "done"],
        "initial": "new",
        "terminal": ["done"],
        "transitions": [{"from": "new", "to": "done"}],
    }
    path.write_text(json.dumps(definition))  # "\u0000" in the JSON text
    with pytest.raises(InvalidInput) as refused:
        load_workflow_file(path)
    assert any("description: holds a NUL" in p for p in refused.value.detail["problems"])


# --- Defect 5: database error text stays in the log --------------------------------------------


def test_a_database_refusal_names_no_sql_and_is_logged(db, caplog):
    with pytest.raises(DataError) as refused, connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb", ['{"a": "\\u0000"}'])
    request = RequestFactory().post("/api/v1/sessions/x/events")
    with caplog.at_level(logging.INFO, logger="config.api"):
        response = unexpected(request, refused.value)
    assert response.status_code == 422
    error = json.loads(response.content)["error"]
    assert error["code"] == "invalid_input"
    text = response.content.decode()
    assert "jsonb" not in text and "\\\\u0000" not in text and "reason" not in error["detail"]
    assert "jsonb" in caplog.text or "Unicode" in caplog.text  # the rest goes to the log


# --- Defect 7: numbers in disguise, a forged Host ----------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "where"),
    [
        ("events", {"events": [{"kind": "note", "tokens": True}]}, ["tokens"]),
        ("events", {"events": [{"kind": "note", "tokens": "3"}]}, ["tokens"]),
        (
            "events",
            {"events": [{"kind": "note"}], "expected_head_seq": True},
            ["expected_head_seq"],
        ),
        ("fork", {"at_seq": True}, ["at_seq"]),
        ("fork", {"at_seq": 0.5}, ["at_seq"]),
    ],
)
def test_it_refuses_a_boolean_or_a_string_for_a_number(api, project, path, body, where):
    session = make_session(project)
    _assert_refused(api.post(f"/sessions/{session.pk}/{path}", body), where)
    assert not Event.objects.filter(session=session).exists()
    assert Session.objects.filter(project=project).count() == 1


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"status": "running", "attempt": True}, ["attempt"]),
        ({"status": "running", "attempt": 2**40}, ["attempt"]),
        ({"status": "running", "expected_version": 2**40}, ["expected_version"]),
    ],
)
def test_it_refuses_a_disguised_or_oversized_step_number(api, project, body, where):
    task = make_task(project)
    before = list(Step.objects.filter(task=task).values())
    _assert_refused(api.put(f"/tasks/{task.pk}/steps/draft", body), where)
    assert list(Step.objects.filter(task=task).values()) == before


def test_it_refuses_an_oversized_workflow_number(api, project):
    definition = {
        "name": "triage",
        "states": ["new", "done"],
        "initial": "new",
        "terminal": ["done"],
        "transitions": [{"from": "new", "to": "done"}],
        "steps": [{"key": "classify"}],
    }
    _assert_refused(api.post("/workflows", {**definition, "version": 2**40}), ["version"])
    _assert_refused(
        api.post("/tasks", {"workflow": "document_approval", "workflow_version": 2**40}),
        ["workflow_version"],
    )
    assert not WorkflowDefinition.objects.filter(project=project, name="triage").exists()


def test_a_disallowed_host_on_the_api_gets_the_json_error_shape(api, project):
    response = api.get("/sessions", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "bad_request"


def test_a_disallowed_host_on_the_dashboard_gets_the_friendly_page(db):
    response = Client().get("/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert b"Check your input" in response.content
