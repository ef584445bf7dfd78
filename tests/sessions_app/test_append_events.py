"""POST /sessions/{id}/events: seqs, idempotency (invariant 3), expected_head_seq (invariant 4)."""

from decimal import Decimal

import pytest

from core.models import AuditEntry
from sessions_app.models import Event, Session, Snapshot
from tests.factories import make_session


def _state(session: Session) -> tuple:
    """Everything an append may change, to prove a refused one changed nothing."""
    session.refresh_from_db()
    return (
        session.head_seq,
        session.tokens_used,
        session.cost_used,
        session.status,
        list(Event.objects.filter(session=session).order_by("seq").values()),
        Snapshot.objects.filter(session=session).count(),
        AuditEntry.objects.filter(project_id=session.project_id).count(),
    )


def _assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "detail"}
    assert body["error"]["code"] == code
    return body["error"]


@pytest.fixture
def session(project):
    return make_session(project)


def test_it_numbers_events_from_one_and_stores_what_was_sent(api, session, api_key):
    response = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {
                    "kind": "message",
                    "role": "user",
                    "content": {"text": "hello there"},
                    "tokens": 5,
                    "cost": "0.25",
                },
                {"kind": "fact", "content": {"key": "lang", "value": "en"}},
                {"kind": "decision", "content": {"decision": "go", "rationale": "why not"}},
            ]
        },
    )
    assert response.status_code == 201
    body = response.json()
    assert body["head_seq"] == 3
    assert [(e["seq"], e["kind"], e["tier"], e["replayed"]) for e in body["events"]] == [
        (1, "message", "transient", False),
        (2, "fact", "durable", False),
        (3, "decision", "durable", False),
    ]
    rows = list(Event.objects.filter(session=session).order_by("seq"))
    assert [(r.seq, r.kind, r.tier) for r in rows] == [
        (1, "message", "transient"),
        (2, "fact", "durable"),
        (3, "decision", "durable"),
    ]
    assert rows[0].content == {"text": "hello there"} and rows[0].role == "user"
    assert rows[0].text == "hello there"
    assert rows[0].tokens == 5 and rows[0].cost == Decimal("0.25")
    assert rows[0].actor == f"key:{api_key[0].prefix}"
    session.refresh_from_db()
    assert (session.head_seq, session.tokens_used, session.cost_used) == (3, 5, Decimal("0.25"))

    more = api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}]})
    assert [e["seq"] for e in more.json()["events"]] == [4]


def test_it_answers_a_repeated_idempotency_key_with_the_original_and_writes_nothing(api, session):
    first = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {
                    "kind": "message",
                    "content": {"text": "once"},
                    "tokens": 3,
                    "idempotency_key": "a",
                },
                {"kind": "note", "content": {"n": 1}, "idempotency_key": "b"},
            ]
        },
    )
    assert first.status_code == 201
    before = _state(session)

    # A retry (the same events) is answered with the originals.
    retry = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {
                    "kind": "message",
                    "content": {"text": "once"},
                    "tokens": 3,
                    "idempotency_key": "a",
                },
                {"kind": "note", "content": {"n": 1}, "idempotency_key": "b"},
            ]
        },
    )
    assert retry.status_code == 200
    assert [(e["seq"], e["replayed"]) for e in retry.json()["events"]] == [(1, True), (2, True)]
    assert retry.json()["head_seq"] == 2
    assert _state(session) == before

    # The same keys with other events are no retry: 409, nothing written
    # (tests/sessions_app/test_idempotent_replays.py).
    changed = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {
                    "kind": "message",
                    "content": {"text": "changed"},
                    "tokens": 100,
                    "idempotency_key": "a",
                },
                {"kind": "note", "content": {"n": 2}, "idempotency_key": "b"},
            ]
        },
    )
    error = _assert_error(changed, 409, "idempotency_key_reused")
    assert (error["detail"]["seq"], error["detail"]["changed"]) == (1, ["content", "tokens"])
    assert _state(session) == before
    assert Event.objects.get(session=session, seq=1).content == {"text": "once"}


def test_it_writes_only_the_new_keys_of_a_partly_replayed_batch(api, session):
    api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "note", "idempotency_key": "a"}]}
    )
    response = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {"kind": "note", "content": {"new": 1}, "idempotency_key": "b"},
                {"kind": "note", "idempotency_key": "a"},
                {"kind": "note", "content": {"new": 2}, "idempotency_key": "c"},
            ]
        },
    )
    assert response.status_code == 201
    assert [(e["seq"], e["replayed"]) for e in response.json()["events"]] == [
        (2, False),
        (1, True),
        (3, False),
    ]
    rows = Event.objects.filter(session=session).order_by("seq")
    assert [(r.seq, r.idempotency_key, r.content) for r in rows] == [
        (1, "a", {}),
        (2, "b", {"new": 1}),
        (3, "c", {"new": 2}),
    ]


def test_it_refuses_a_retry_that_mixes_replayed_and_unkeyed_events(api, session):
    batch = {
        "events": [
            {"kind": "note", "idempotency_key": "k1"},
            {"kind": "note", "content": {"unkeyed": True}},
        ]
    }
    first = api.post(f"/sessions/{session.pk}/events", batch)
    assert first.status_code == 201
    retry = api.post(f"/sessions/{session.pk}/events", batch)
    assert retry.status_code == 409
    assert retry.json()["error"]["code"] == "idempotency_partial_replay"
    assert retry.json()["error"]["detail"] == {"replayed_keys": ["k1"]}
    # The unkeyed event of the first try is not written a second time.
    assert list(
        Event.objects.filter(session=session).order_by("seq").values_list("seq", "idempotency_key")
    ) == [(1, "k1"), (2, None)]


def test_it_scopes_idempotency_keys_to_their_session(api, project, session):
    other = make_session(project)
    for target in (session, other):
        response = api.post(
            f"/sessions/{target.pk}/events",
            {"events": [{"kind": "note", "idempotency_key": "same"}]},
        )
        assert response.status_code == 201
        assert response.json()["events"][0]["replayed"] is False
    assert Event.objects.filter(idempotency_key="same").count() == 2


def test_it_refuses_a_key_twice_in_one_batch(api, session):
    before = _state(session)
    response = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {"kind": "note", "idempotency_key": "x"},
                {"kind": "note", "idempotency_key": "x"},
            ]
        },
    )
    _assert_error(response, 422, "invalid_input")
    assert _state(session) == before


def test_it_refuses_a_stale_expected_head_seq_with_409_and_writes_nothing(api, session):
    api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}] * 2})
    before = _state(session)
    for stale in (0, 1, 3, 50):
        response = api.post(
            f"/sessions/{session.pk}/events",
            {"events": [{"kind": "note", "tokens": 7}], "expected_head_seq": stale},
        )
        error = _assert_error(response, 409, "head_seq_mismatch")
        assert error["detail"] == {"expected_head_seq": stale, "head_seq": 2}
        assert _state(session) == before

    ok = api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}], "expected_head_seq": 2}
    )
    assert ok.status_code == 201 and ok.json()["head_seq"] == 3
    assert Event.objects.filter(session=session).count() == 3


def test_it_checks_expected_head_seq_on_an_empty_session(api, session):
    ok = api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}], "expected_head_seq": 0}
    )
    assert ok.status_code == 201
    again = api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}], "expected_head_seq": 0}
    )
    _assert_error(again, 409, "head_seq_mismatch")
    assert Event.objects.filter(session=session).count() == 1


@pytest.mark.parametrize(
    "events",
    [
        [{"kind": "lifecycle", "content": {"from": "open", "to": "closed"}}],
        [{"kind": "handoff", "content": {}}],
        [{"kind": "telepathy", "content": {}}],
        [{"kind": "fact", "content": {"value": 1}}],
        [{"kind": "fact", "content": {"key": "k"}}],
        [{"kind": "decision", "content": {"rationale": "no decision"}}],
        [{"kind": "note", "tokens": -1}],
        [{"kind": "note", "cost": "-0.5"}],
        [{"kind": "note", "tier": "forever"}],
        [{"kind": "note", "content": ["not", "an", "object"]}],
        # A durable kind stays durable: compaction must never lose a fact (invariant 6).
        [{"kind": "fact", "tier": "transient", "content": {"key": "k", "value": 1}}],
        [{"kind": "decision", "tier": "transient", "content": {"decision": "d"}}],
        # Values no column can hold are the client's mistake (422), not an outage (503).
        [{"kind": "note", "tokens": 2**40}],
        [{"kind": "message", "content": {"text": "nul \u0000 inside"}}],
        [{"kind": "note", "content": {"deep": {"nul": "\u0000"}}}],
        [{"kind": "note"}, {"kind": "note", "idempotency_key": ""}],
        [],
    ],
)
def test_it_refuses_invalid_events_with_422_and_writes_nothing(api, session, events):
    api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}]})
    before = _state(session)
    response = api.post(f"/sessions/{session.pk}/events", {"events": events})
    _assert_error(response, 422, "invalid_input")
    assert _state(session) == before


def test_it_allows_an_agent_to_keep_a_transient_kind_durable(api, session):
    response = api.post(
        f"/sessions/{session.pk}/events",
        {"events": [{"kind": "message", "tier": "durable", "content": {"text": "keep me"}}]},
    )
    assert response.status_code == 201
    assert Event.objects.get(session=session, seq=1).tier == "durable"


@pytest.mark.parametrize(
    ("field", "value", "limit"), [("role", "r" * 17, 16), ("idempotency_key", "k" * 201, 200)]
)
def test_a_python_caller_gets_invalid_input_for_text_longer_than_its_column(
    session, field, value, limit
):
    """The API's schema refuses these first (422); the service refuses them for any other
    caller too, before PostgreSQL would (a DataError), and writes nothing."""
    from core.actors import Actor
    from core.errors import InvalidInput
    from sessions_app.services.events import EventDraft, append_events

    draft = EventDraft(kind="message", content={"text": "hi"}, **{field: value})
    with pytest.raises(InvalidInput) as refused:
        append_events(session, [draft], actor=Actor.system("test"))
    assert refused.value.detail == {"field": field, "limit": limit, "size": len(value)}
    assert not Event.objects.filter(session=session).exists()
    # At the limit it is taken.
    at_limit = EventDraft(kind="message", content={"text": "hi"}, **{field: value[:limit]})
    append_events(session, [at_limit], actor=Actor.system("test"))
    assert getattr(Event.objects.get(session=session), field) == value[:limit]
