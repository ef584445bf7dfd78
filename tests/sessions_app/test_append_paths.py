"""The append's write paths, committed for real (`transactional_db`).

Outside a transaction an API append to a session without a budget is one statement
(UPDATE … RETURNING and INSERT in one WITH, services.events._append_in_one_statement: a VALUES
list for a few events, a larger batch's rows as one JSON array); a budgeted session or a
refusal takes the transactional path (UPDATE, then an INSERT or, for a larger batch, a COPY). Tests under the usual `db` fixture run inside a transaction and so only see
the latter: these run the same promises through each path.
"""

from decimal import Decimal

import pytest

from core.models import AuditEntry
from sessions_app.models import Event, Session, Snapshot
from sessions_app.services import events as events_service
from sessions_app.services.snapshots import drain
from tests.factories import make_session


@pytest.fixture
def session(transactional_db, project):
    return make_session(project)


@pytest.fixture
def statements(monkeypatch):
    """Which path each append took: "one" (one statement) or "tx" (transactional)."""
    taken: list[str] = []
    one, tx = events_service._append_in_one_statement, events_service._append_locked

    def spy_one(*args, **kwargs):
        written = one(*args, **kwargs)
        taken.append("one" if written is not None else "one-declined")
        return written

    def spy_tx(*args, **kwargs):
        taken.append("tx")
        return tx(*args, **kwargs)

    monkeypatch.setattr(events_service, "_append_in_one_statement", spy_one)
    monkeypatch.setattr(events_service, "_append_locked", spy_tx)
    return taken


def _rows(session: Session) -> list[tuple]:
    return list(
        Event.objects.filter(session=session)
        .order_by("seq")
        .values_list(
            "seq", "kind", "tier", "role", "content", "text", "tokens", "cost", "idempotency_key"
        )
    )


def test_it_writes_a_small_append_in_one_statement(api, session, statements):
    first = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {
                    "kind": "message",
                    "role": "user",
                    "content": {"text": "héllo 'x' \\ y"},
                    "tokens": 5,
                    "cost": "0.25",
                },
                {"kind": "fact", "content": {"key": "lang", "value": "en"}},
            ]
        },
    )
    assert first.status_code == 201, first.content
    assert first.json()["head_seq"] == 2 and first.json()["status"] == "open"
    second = api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}]})
    assert [e["seq"] for e in second.json()["events"]] == [3]
    assert statements == ["one", "one"]
    assert _rows(session) == [
        (
            1,
            "message",
            "transient",
            "user",
            {"text": "héllo 'x' \\ y"},
            "héllo 'x' \\ y",
            5,
            Decimal("0.25"),
            None,
        ),
        (2, "fact", "durable", "", {"key": "lang", "value": "en"}, "lang: en", 0, Decimal(0), None),
        (3, "note", "transient", "", {}, "", 0, Decimal(0), None),
    ]
    session.refresh_from_db()
    assert (session.head_seq, session.tokens_used, session.cost_used) == (3, 5, Decimal("0.25"))


def test_it_replays_idempotency_keys_on_the_one_statement_path(api, session, statements):
    api.post(
        f"/sessions/{session.pk}/events",
        {"events": [{"kind": "note", "content": {"n": 1}, "idempotency_key": "a"}]},
    )
    again = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {"kind": "note", "content": {"n": 2}, "idempotency_key": "b"},
                {"kind": "note", "content": {"n": 1}, "idempotency_key": "a"},
            ]
        },
    )
    assert again.status_code == 201
    assert [(e["seq"], e["replayed"]) for e in again.json()["events"]] == [(2, False), (1, True)]
    assert statements == ["one", "one"]
    assert [r[0] for r in _rows(session)] == [1, 2]


def test_it_leaves_refusals_to_the_transactional_path_and_writes_nothing(
    api, session, other_api, statements
):
    api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}]})
    before = _rows(session)
    stale = api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}], "expected_head_seq": 0}
    )
    assert stale.status_code == 409
    assert stale.json()["error"]["detail"] == {"expected_head_seq": 0, "head_seq": 1}
    # Another project's session, through its own key: 404, as if it did not exist.
    foreign = other_api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}]})
    assert foreign.status_code == 404
    assert foreign.json()["error"]["detail"] == {"session_id": str(session.pk)}
    # An unknown session is a 404 before the events are checked, as it always was.
    unknown = api.post(
        "/sessions/00000000-0000-4000-8000-000000000000/events", {"events": [{"kind": "telepathy"}]}
    )
    assert unknown.status_code == 404
    closed = api.post(f"/sessions/{session.pk}/close", {"reason": "done"})
    assert closed.status_code == 200
    late = api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}]})
    assert late.status_code == 409 and late.json()["error"]["code"] == "session_not_writable"
    assert [r[:2] for r in _rows(session)] == [*[r[:2] for r in before], (2, "lifecycle")]
    assert statements.count("one") == 1 and "tx" in statements


def test_it_pauses_an_over_budget_session_in_the_same_transaction(
    transactional_db, api, project, statements
):
    opened = api.post("/sessions", {"agent": "spender", "budget": {"max_tokens": 10}})
    session = Session.objects.get(pk=opened.json()["id"])
    over = api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "message", "tokens": 11}]}
    )
    assert over.status_code == 201 and over.json()["status"] == "paused"
    assert statements[:2] == ["one-declined", "tx"]
    # ... and opened its `budget` handoff (handoffs_app) in that transaction too.
    assert [r[1] for r in _rows(session)] == ["message", "lifecycle", "handoff"]
    assert AuditEntry.objects.filter(target_id=str(session.pk), action="session.paused").exists()


def test_it_writes_a_larger_batch_in_one_statement_and_snapshots_each_boundary(
    api, session, statements, settings
):
    settings.SWITCHBOARD_SNAPSHOT_EVERY = 10
    batch = [{"kind": "state", "content": {"n": i}} for i in range(25)]
    response = api.post(f"/sessions/{session.pk}/events", {"events": batch})
    assert response.status_code == 201
    assert statements == ["one"]
    assert [r[0] for r in _rows(session)] == list(range(1, 26))
    assert drain()  # the snapshots are taken by this process's background thread
    assert list(
        Snapshot.objects.filter(session=session).order_by("seq").values_list("seq", "state")
    ) == [(10, {"n": 9}), (20, {"n": 19})]
    small = api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note"}] * 5})
    assert small.json()["head_seq"] == 30 and statements == ["one", "one"]
    assert drain()
    assert Snapshot.objects.filter(session=session, seq=30).exists()


def test_it_refuses_a_duplicate_key_written_meanwhile_on_either_path(session, statements):
    """The unique constraint backs the look-up: a key written between look-up and write."""
    from core.actors import Actor
    from sessions_app.services.events import EventDraft, append_events

    actor = Actor.system("test")
    append_events(session, [EventDraft(kind="note", idempotency_key="k")], actor=actor)
    for size in (1, 12):  # one statement: a VALUES list, then rows as JSON
        drafts = [EventDraft(kind="note") for _ in range(size - 1)]
        drafts.append(EventDraft(kind="note", idempotency_key="k"))
        # Hide the earlier row from the look-up, as a concurrent writer's would be.
        original = events_service._originals_by_key
        events_service._originals_by_key = lambda s, keys: {}
        try:
            with pytest.raises(Exception) as raised:
                append_events(session, drafts, actor=actor)
        finally:
            events_service._originals_by_key = original
        assert "IntegrityError" in type(raised.value).__name__
    session.refresh_from_db()
    assert session.head_seq == 1 and [r[0] for r in _rows(session)] == [1]


def test_a_larger_batch_writes_the_same_rows_in_one_statement_as_by_copy(
    transactional_db, project, statements
):
    """The rows-as-JSON statement and the transactional path's COPY store the same values:
    text with quotes, backslashes, non-ASCII and astral characters, decimals, keys, roles,
    tiers, nested content, nulls."""
    from django.db import transaction

    from core.actors import Actor
    from sessions_app import storage
    from sessions_app.services.events import EventDraft, append_events

    def drafts(tag: str) -> list[EventDraft]:
        return [
            EventDraft(
                kind=["message", "fact", "state", "tool_call"][n % 4],
                role="user" if n % 4 == 0 else "",
                content=(
                    {"key": f"k{n}", "value": None if n % 3 else [1.5, {"x": "é"}]}
                    if n % 4 == 1
                    else {
                        "text": f"{tag} 'q' \\ \"d\" héllo 🎉 \n{n}",
                        "n": n,
                        "deep": {"a": [True]},
                    }
                ),
                tier="durable" if n == 2 else None,
                tokens=n,
                cost=Decimal(f"0.00{n % 10}"),
                idempotency_key=f"{tag}-{n}" if n % 5 == 0 else None,
            )
            for n in range(storage.COPY_FROM_ROWS + 4)
        ]

    actor = Actor.system("paths")
    by_copy, by_json = make_session(project), make_session(project)
    with transaction.atomic():  # an enclosing transaction: the transactional path (COPY)
        append_events(by_copy, drafts("t"), actor=actor)
    append_events(by_json, drafts("t"), actor=actor)
    assert statements == ["tx", "one"]
    assert _rows(by_json) == _rows(by_copy)
    assert len(_rows(by_json)) == storage.COPY_FROM_ROWS + 4
    assert (
        list(
            Event.objects.filter(session=by_json).order_by("seq").values_list("actor", "created_at")
        )[0][0]
        == "paths"
    )
    by_copy.refresh_from_db()
    by_json.refresh_from_db()
    assert (by_json.head_seq, by_json.tokens_used, by_json.cost_used) == (
        by_copy.head_seq,
        by_copy.tokens_used,
        by_copy.cost_used,
    )
