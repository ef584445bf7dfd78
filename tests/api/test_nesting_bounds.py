"""Nesting depth and integer size are bounded for everything stored (issue 23, defects 1 and 2).

A value nested about a thousand levels deep was accepted and then broke every reader that walks
it, for good (a stored denial of service); an integer of 5,000 digits broke Python's parser.
Each writer (the API, the services called from Python) refuses both with a 422 naming the field
and writes nothing; the bounds are exact (64 levels pass, 65 do not; 100 digits pass, 101 do
not), and shallow documents with many brackets, or brackets and digits inside text, pass.
"""

import json

import pytest

from core.actors import Actor
from core.errors import InvalidInput
from core.text import MAX_INTEGER_DIGITS, MAX_JSON_DEPTH, TOO_DEEP, TOO_LONG_INTEGER
from handoffs_app.models import Handoff
from handoffs_app.services.handoffs import request_handoff
from sessions_app.models import Event, Session
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.sessions import open_session
from tasks_app.models import Step, Task, TaskSignal
from tasks_app.services.signals import deliver_signal
from tasks_app.services.steps import update_step
from tasks_app.services.tasks import create_task
from tests.factories import make_session, make_task

SYSTEM = Actor.system("tests")


def nested(depth: int) -> dict:
    """An object `depth` levels deep: {"a": {"a": … 1}}."""
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value  # type: ignore[return-value]


def nested_text(depth: int) -> str:
    """The same as JSON text, built without json.dumps (which cannot write the deepest)."""
    return '{"a":' * depth + "1" + "}" * depth


TOO_LONG = 10**MAX_INTEGER_DIGITS  # 101 digits
LONGEST = TOO_LONG - 1  # 100 digits


def _assert_refused(response, field_prefix: str, problem: str):
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert error["detail"]["problem"] == problem
    assert error["detail"]["field"].startswith(field_prefix), error["detail"]


# --- Through the API ---------------------------------------------------------------------------


@pytest.mark.parametrize("events", [1, 3], ids=["one", "batch"])
def test_an_event_nested_to_the_bound_is_stored_and_one_level_more_is_refused(api, project, events):
    session = make_session(project)
    fits = [{"kind": "state", "content": nested(MAX_JSON_DEPTH)}] * events
    assert api.post(f"/sessions/{session.pk}/events", {"events": fits}).status_code == 201
    deeper = [{"kind": "note", "content": {"i": i}} for i in range(events - 1)]
    deeper.append({"kind": "state", "content": nested(MAX_JSON_DEPTH + 1)})
    response = api.post(f"/sessions/{session.pk}/events", {"events": deeper})
    _assert_refused(response, f"events[{events - 1}].content.a.a", TOO_DEEP)
    assert Event.objects.filter(session=session).count() == events


@pytest.mark.parametrize("depth", [950, 1100, 100_000])
def test_a_body_nested_past_what_the_parser_takes_is_a_422_not_a_500(api, project, depth):
    # 950: the depth that was accepted and then broke every read; past ~1,000 json.loads itself
    # fails (a RecursionError that ninja answered as "Cannot parse request body").
    session = make_session(project)
    body = '{"events":[{"kind":"state","content":' + nested_text(depth) + "}]}"
    response = api.post(f"/sessions/{session.pk}/events", body)
    assert response.status_code == 422, response.content
    assert response.json()["error"]["detail"]["problem"] == TOO_DEEP
    assert not Event.objects.filter(session=session).exists()
    assert api.get(f"/sessions/{session.pk}/state").status_code == 200


def test_integers_are_bounded_in_digits(api, project):
    session = make_session(project)
    url = f"/sessions/{session.pk}/events"
    longest = {"kind": "note", "content": {"n": LONGEST, "m": -LONGEST}}
    assert api.post(url, {"events": [longest]}).status_code == 201
    too_long = {"kind": "note", "content": {"n": -TOO_LONG}}
    _assert_refused(api.post(url, {"events": [too_long]}), "events[0].content.n", TOO_LONG_INTEGER)
    # 5,000 digits: past Python's own conversion limit, which raised a ValueError.
    body = '{"events":[{"kind":"note","content":{"n":' + "7" * 5000 + "}}]}"
    response = api.post(url, body)
    assert response.status_code == 422, response.content
    assert response.json()["error"]["detail"] == {"field": "body", "problem": TOO_LONG_INTEGER}
    assert Event.objects.filter(session=session).count() == 1


def test_many_brackets_or_long_digits_inside_text_are_not_mistaken_for_either(api, project):
    session = make_session(project)
    wide = {"rows": [{"cells": [[i, {"v": [i]}]]} for i in range(300)]}  # 6 levels, 1,500 brackets
    texty = {"t": "[{" * 500 + "}]" * 500, "digits": "9" * 5000, "quote": 'a "[[[" b \\ ['}
    events = [{"kind": "note", "content": wide}, {"kind": "note", "content": texty}]
    assert api.post(f"/sessions/{session.pk}/events", {"events": events}).status_code == 201
    stored = list(Event.objects.filter(session=session).values_list("content", flat=True))
    assert stored == [wide, texty]


def _step(task, depth):
    return {"status": "succeeded", "attempt": 1, "outputs": nested(depth)}


@pytest.mark.parametrize(
    ("what", "send", "field"),
    [
        (
            "session metadata",
            lambda api, project, d: api.post(
                "/sessions", {"agent": "a", "metadata": nested(d), "external_id": f"x{d}"}
            ),
            "metadata",
        ),
        (
            "task params",
            lambda api, project, d: api.post(
                "/tasks", {"workflow": "document_approval", "params": nested(d)}
            ),
            "params",
        ),
        (
            "step outputs",
            lambda api, project, d: api.put(
                f"/tasks/{make_task(project).pk}/steps/draft",
                {"status": "running", "inputs": nested(d)},
            ),
            "inputs",
        ),
        (
            "signal payload",
            lambda api, project, d: api.post(
                f"/tasks/{make_task(project).pk}/signals/review_decision", {"payload": nested(d)}
            ),
            "payload",
        ),
        (
            "handoff payload",
            lambda api, project, d: api.post(
                f"/sessions/{make_session(project).pk}/handoffs",
                {"reason": "r", "kind": "question", "payload": {"question": "q", "x": nested(d)}},
            ),
            "payload.x",
        ),
    ],
)
def test_every_free_json_field_of_the_api_is_bounded(api, project, what, send, field):
    counts = _row_counts()
    response = send(api, project, MAX_JSON_DEPTH + 1 + (1 if "." in field else 0))
    _assert_refused(response, field, TOO_DEEP)
    assert _row_counts() == {**counts, "tasks": _row_counts()["tasks"]}  # helpers may make one
    fits = send(api, project, MAX_JSON_DEPTH - (1 if "." in field else 0))
    assert fits.status_code in (200, 201, 202), (what, fits.content)


def _row_counts():
    return {
        "sessions_with_metadata": Session.objects.exclude(metadata={}).count(),
        "tasks": Task.objects.count(),
        "tasks_with_params": Task.objects.exclude(params={}).count(),
        "steps_with_inputs": Step.objects.exclude(inputs={}).count(),
        "signals": TaskSignal.objects.count(),
        "handoffs": Handoff.objects.count(),
    }


@pytest.mark.parametrize("depth", [500, 1999])
def test_a_handoff_payload_nested_hundreds_deep_is_a_422(api, project, depth):
    # It answered 500: dataclasses.asdict recursed through it while publishing the domain event.
    session = make_session(project)
    body = (
        '{"reason":"r","kind":"question","payload":{"question":"q","x":' + nested_text(depth) + "}}"
    )
    response = api.post(f"/sessions/{session.pk}/handoffs", body)
    assert response.status_code == 422, response.content
    assert response.json()["error"]["detail"]["problem"] == TOO_DEEP
    assert not Handoff.objects.exists()
    session.refresh_from_db()
    assert session.status == "open"


# --- Through the services, as any Python caller ------------------------------------------------


def _refused_by(call, field_prefix: str, problem: str = TOO_DEEP):
    with pytest.raises(InvalidInput) as refused:
        call()
    assert refused.value.detail["problem"] == problem
    assert refused.value.detail["field"].startswith(field_prefix), refused.value.detail


def test_the_services_refuse_what_the_api_refuses(project):
    deep = nested(MAX_JSON_DEPTH + 1)
    session = make_session(project)
    _refused_by(
        lambda: append_events(session, [EventDraft(kind="state", content=deep)], actor=SYSTEM),
        "content.a",
    )
    _refused_by(
        lambda: append_events(
            session, [EventDraft(kind="note", content={"n": TOO_LONG})], actor=SYSTEM
        ),
        "content.n",
        TOO_LONG_INTEGER,
    )
    _refused_by(
        lambda: open_session(project, agent_name="a", actor=SYSTEM, metadata=deep), "metadata.a"
    )
    _refused_by(
        lambda: create_task(project, workflow="document_approval", actor=SYSTEM, params=deep),
        "params.a",
    )
    task = make_task(project)
    _refused_by(
        lambda: update_step(task, "draft", status="running", actor=SYSTEM, inputs=deep), "inputs"
    )
    _refused_by(
        lambda: deliver_signal(task, "review_decision", actor=SYSTEM, payload=deep), "payload"
    )
    _refused_by(
        lambda: request_handoff(
            session, kind="question", reason="r", payload={"question": "q", "x": deep}, actor=SYSTEM
        ),
        "payload.x",
    )
    assert not Event.objects.filter(session=session).exists()
    assert Session.objects.filter(project=project).count() == 1
    assert Task.objects.filter(project=project).count() == 1
    assert not TaskSignal.objects.exists() and not Handoff.objects.exists()
    assert (
        Step.objects.filter(task=task, inputs={}).count() == Step.objects.filter(task=task).count()
    )


def test_the_refusal_names_a_short_path_whatever_the_keys(project):
    # The path to the 65th level is shortened, so a long key is not echoed 65 times.
    key = "k" * 10_000
    value: object = 1
    for _ in range(MAX_JSON_DEPTH + 1):
        value = {key: value}
    session = make_session(project)
    with pytest.raises(InvalidInput) as refused:
        append_events(session, [EventDraft(kind="state", content=value)], actor=SYSTEM)
    assert len(json.dumps(refused.value.detail)) < 9 * len(key)
    assert refused.value.detail["field"].endswith("…")
