"""Invariant 3 across a fork's lineage, and a key reused for another event.

A fork inherits its parent's events up to the fork point, and their idempotency keys with
them: a retry in the fork of an append the parent took is answered with the parent's event
and writes nothing. A key sent with an event other than the one written with it is not a
retry: 409 idempotency_key_reused naming the original's seq, and nothing of the batch written.
"""

from decimal import Decimal

import pytest

from core.actors import Actor
from sessions_app.errors import IdempotencyKeyReused
from sessions_app.models import Event, Session
from sessions_app.services.events import EventDraft, append_events
from tests.factories import make_session


def _post(api, session_id, *events, **extra):
    return api.post(f"/sessions/{session_id}/events", {"events": list(events), **extra})


def _fork(api, session_id, at_seq) -> Session:
    response = api.post(f"/sessions/{session_id}/fork", {"at_seq": at_seq})
    assert response.status_code == 201, response.content
    return Session.objects.get(pk=response.json()["id"])


def _written(*sessions) -> list[tuple]:
    return list(
        Event.objects.filter(session__in=sessions)
        .order_by("session_id", "seq")
        .values_list("session_id", "seq", "idempotency_key")
    )


def _reused(response) -> dict:
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "idempotency_key_reused"
    return error["detail"]


NOTE = {"kind": "note", "content": {"text": "hello", "n": [1, 2.5, True, None]}}


@pytest.fixture
def parent(api, project):
    session = make_session(project)
    response = _post(
        api,
        session.pk,
        {**NOTE, "idempotency_key": "p1"},
        {"kind": "message", "role": "user", "content": {"text": "hi"}, "idempotency_key": "p2"},
        {"kind": "fact", "content": {"key": "a", "value": 1}, "idempotency_key": "p3"},
    )
    assert response.status_code == 201
    return session


# --- (a) keys inherited by a fork -----------------------------------------------------------


def test_a_fork_replays_a_key_its_parent_used_before_the_fork_point(api, parent):
    fork = _fork(api, parent.pk, at_seq=2)
    before = _written(parent, fork)

    retry = _post(api, fork.pk, {**NOTE, "idempotency_key": "p1"})

    assert retry.status_code == 200, retry.content
    assert retry.json()["head_seq"] == 2
    assert [(e["seq"], e["replayed"]) for e in retry.json()["events"]] == [(1, True)]
    assert _written(parent, fork) == before
    fork.refresh_from_db()
    assert fork.head_seq == 2


def test_a_fork_of_a_fork_replays_its_grandparents_keys_and_writes_the_new_ones(api, parent):
    child = _fork(api, parent.pk, at_seq=3)
    assert _post(api, child.pk, {"kind": "note", "idempotency_key": "c4"}).status_code == 201
    grandchild = _fork(api, child.pk, at_seq=4)

    response = _post(
        api,
        grandchild.pk,
        {"kind": "note", "idempotency_key": "c4"},
        {"kind": "note", "content": {"new": True}, "idempotency_key": "g5"},
        {"kind": "message", "role": "user", "content": {"text": "hi"}, "idempotency_key": "p2"},
    )

    assert response.status_code == 201
    assert [(e["seq"], e["replayed"]) for e in response.json()["events"]] == [
        (4, True),
        (5, False),
        (2, True),
    ]
    assert _written(grandchild) == [(grandchild.pk, 5, "g5")]


def test_a_parents_key_used_after_the_fork_point_is_not_the_forks(api, parent):
    fork = _fork(api, parent.pk, at_seq=1)  # takes p1 only

    response = _post(
        api, fork.pk, {"kind": "fact", "content": {"key": "b", "value": 2}, "idempotency_key": "p3"}
    )

    assert response.status_code == 201  # p3 is the parent's seq 3, past the fork point
    assert [(e["seq"], e["replayed"]) for e in response.json()["events"]] == [(2, False)]
    assert _written(fork) == [(fork.pk, 2, "p3")]
    # And the fork's own keys are not the parent's.
    assert _post(api, parent.pk, {"kind": "note", "idempotency_key": "f-only"}).status_code == 201
    assert _post(api, fork.pk, {"kind": "note", "idempotency_key": "f-only"}).status_code == 201


def test_the_service_replays_inherited_keys_for_any_caller(api, parent):
    fork = _fork(api, parent.pk, at_seq=3)

    result = append_events(
        fork,
        [EventDraft(kind="fact", content={"key": "a", "value": 1}, idempotency_key="p3")],
        actor=Actor.system("t"),
    )

    assert [(e.session_id, e.seq) for e in result.events] == [(parent.pk, 3)]
    assert result.replayed == {0} and result.head_seq == 3
    assert _written(fork) == []


# --- (d) a key reused for another event -----------------------------------------------------


@pytest.mark.parametrize(
    ("changed", "event"),
    [
        (["content"], {**NOTE, "content": {"text": "hello", "n": [1, 2.5, True]}}),
        (["content"], {**NOTE, "content": {"text": "hello", "n": [1, 2.5, 1, None]}}),  # true≠1
        (["content"], {**NOTE, "content": {"text": "hello", "n": [1, "2.5", True, None]}}),
        (["kind", "content"], {"kind": "error", "content": {}}),
        (["kind"], {**NOTE, "kind": "tool_call"}),
        (["role"], {**NOTE, "role": "assistant"}),
        (["tier"], {**NOTE, "tier": "durable"}),
        (["tokens"], {**NOTE, "tokens": 1}),
        (["cost"], {**NOTE, "cost": "0.000001"}),
    ],
)
def test_a_key_sent_with_another_event_is_409_and_writes_nothing(api, parent, changed, event):
    before = _written(parent)

    response = _post(
        api,
        parent.pk,
        {"kind": "note", "idempotency_key": "fresh"},
        {**event, "idempotency_key": "p1"},
    )

    assert _reused(response) == {
        "index": 1,
        "idempotency_key": "p1",
        "seq": 1,
        "session_id": str(parent.pk),
        "changed": changed,
    }
    assert "seq 1" in response.json()["error"]["message"]
    assert _written(parent) == before  # not even the batch's new event


@pytest.mark.parametrize(
    "event",
    [
        NOTE,
        {**NOTE, "tier": "transient", "role": "", "tokens": 0, "cost": "0"},  # the defaults
        {**NOTE, "content": {"n": [1.0, 2.50, True, None], "text": "hello"}},  # JSON-equal
        {**NOTE, "cost": 0.0},
    ],
)
def test_a_retry_that_repeats_the_event_is_answered_with_the_original(api, parent, event):
    before = _written(parent)

    response = _post(api, parent.pk, {**event, "idempotency_key": "p1"})

    assert response.status_code == 200, response.content
    assert [(e["seq"], e["replayed"]) for e in response.json()["events"]] == [(1, True)]
    assert _written(parent) == before


def test_costs_and_tokens_compare_as_written(api, project):
    session = make_session(project)
    event = {"kind": "note", "tokens": 7, "cost": "0.25", "idempotency_key": "c"}
    assert _post(api, session.pk, event).status_code == 201

    assert _post(api, session.pk, {**event, "cost": "0.250000"}).status_code == 200
    assert _post(api, session.pk, {**event, "cost": 0.25}).status_code == 200
    assert _reused(_post(api, session.pk, {**event, "cost": "0.26"}))["changed"] == ["cost"]
    assert _reused(_post(api, session.pk, {**event, "tokens": 8}))["changed"] == ["tokens"]


def test_an_inherited_key_sent_with_another_event_names_the_ancestors_event(api, parent):
    fork = _fork(api, parent.pk, at_seq=2)

    response = _post(
        api, fork.pk, {"kind": "message", "content": {"text": "hi"}, "idempotency_key": "p2"}
    )

    assert _reused(response) == {
        "index": 0,
        "idempotency_key": "p2",
        "seq": 2,
        "session_id": str(parent.pk),
        "changed": ["role"],
    }
    assert _written(fork) == []


def test_the_service_refuses_a_reused_key_for_any_caller(parent):
    with pytest.raises(IdempotencyKeyReused) as raised:
        append_events(
            parent,
            [EventDraft(kind="note", content={"other": 1}, idempotency_key="p1")],
            actor=Actor.system("t"),
        )
    assert raised.value.detail["seq"] == 1
    # A Python caller's tuples and numbers as JSON has them are the same event.
    result = append_events(
        parent,
        [
            EventDraft(
                kind="note",
                content={"text": "hello", "n": (1, 2.5, True, None)},
                cost=Decimal("0.000000"),
                idempotency_key="p1",
            )
        ],
        actor=Actor.system("t"),
    )
    assert result.replayed == {0}
