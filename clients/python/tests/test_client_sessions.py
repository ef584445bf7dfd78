"""Sessions, events, state, snapshots, forks, lifecycle and export through the sync Client
against a live server."""

import uuid
from decimal import Decimal

import pytest
from switchboard_client import Client, Conflict, InvalidInput, NotFound, Unauthorized
from switchboard_client.models import SessionWithTasks

from sessions_app.models import Event


def test_it_opens_reads_and_lists_sessions(sb):
    first = sb.open_session(
        "support-bot",
        external_id="ticket-42",
        title="Refund",
        metadata={"tier": "gold", "priority": 3},
        budget={"max_tokens": 50_000, "max_cost": Decimal("1.50")},
    )
    assert isinstance(first, SessionWithTasks)
    assert (first.agent, first.title, first.status, first.head_seq) == (
        "support-bot",
        "Refund",
        "open",
        0,
    )
    assert first.budget.max_tokens == 50_000 and first.budget.max_cost == Decimal("1.5")
    assert first.usage.cost == Decimal("0") and first.tasks == []
    # The same external_id again: the same session, nothing opened.
    assert sb.open_session("support-bot", external_id="ticket-42").id == first.id
    other = sb.open_session("support-bot", metadata={"tier": "silver"})

    read = sb.get_session(first.id)
    assert read.id == first.id and read.metadata == {"tier": "gold", "priority": 3}

    listed = sb.list_sessions(agent="support-bot")
    assert [s.id for s in listed.sessions] == [other.id, first.id]  # newest first
    assert listed.next_cursor is None and listed.sessions[0].state is None
    assert sb.list_sessions(agent="nobody").sessions == []
    assert [s.id for s in sb.list_sessions(status=["open"]).sessions] == [other.id, first.id]
    # Paging: iter_sessions follows next_cursor.
    page = sb.list_sessions(limit=1)
    assert len(page.sessions) == 1 and page.next_cursor is not None
    assert [s.id for s in sb.iter_sessions(limit=1)] == [other.id, first.id]


def test_it_looks_sessions_up_by_external_id_and_metadata(sb):
    first = sb.open_session(
        "support-bot", external_id="ticket-42", metadata={"tier": "gold", "priority": 3}
    )
    sb.open_session("support-bot", metadata={"tier": "silver"})
    # Look-up by external_id (never opens), metadata filters, include=state.
    assert [s.id for s in sb.list_sessions(external_id="ticket-42").sessions] == [first.id]
    assert sb.list_sessions(external_id="no-such-ticket").sessions == []
    assert sb.find_session("no-such-ticket") is None
    assert sb.list_sessions(agent="support-bot").sessions[1].id == first.id
    assert [s.id for s in sb.list_sessions(metadata={"tier": "gold"}).sessions] == [first.id]
    assert [s.id for s in sb.list_sessions(metadata={"priority": 3}).sessions] == [first.id]
    assert sb.list_sessions(metadata={"tier": "gold", "priority": 4}).sessions == []
    sb.append(first.id, [{"kind": "state", "content": {"stage": "triage"}}])
    sb.append(first.id, [{"kind": "fact", "content": {"key": "tier", "value": "gold"}}])
    with_state = sb.find_session("ticket-42", include_state=True)
    assert with_state is not None and with_state.state == {"stage": "triage"}
    assert with_state.facts is not None and with_state.facts["tier"].value == "gold"
    assert with_state.state_error is None
    assert sb.find_session("ticket-42").state is None


def test_it_deletes_a_session(sb):
    session = sb.open_session("support-bot", external_id="ticket-7")
    sb.append(session.id, [{"kind": "note", "content": {"n": 1}}])
    fork = sb.fork(session.id, 1)
    with pytest.raises(Conflict) as refused:
        sb.delete_session(session.id)
    assert refused.value.code == "session_has_forks"
    deleted = sb.delete_session(session.id, with_forks=True)
    assert deleted.id == session.id and set(deleted.deleted) == {session.id, fork.id}
    assert deleted.events_deleted >= 1
    with pytest.raises(NotFound):
        sb.get_session(session.id)
    # Its external_id is free again.
    assert sb.open_session("support-bot", external_id="ticket-7").id != session.id


def test_it_appends_with_idempotency_keys_it_makes(sb):
    session = sb.open_session("writer")
    batch = [
        {"kind": "message", "role": "user", "content": {"text": "Where is my refund?"}},
        {"kind": "state", "content": {"ticket": {"stage": "triage"}}},
        {"kind": "fact", "content": {"key": "tier", "value": "gold"}, "idempotency_key": "tier-1"},
    ]
    result = sb.append(session.id, batch, expected_head_seq=0)
    assert [e.seq for e in result.events] == [1, 2, 3]
    assert result.head_seq == 3 and not any(e.replayed for e in result.events)
    assert batch[0] == {
        "kind": "message",
        "role": "user",
        "content": {"text": "Where is my refund?"},
    }
    keys = list(
        Event.objects.filter(session_id=session.id)
        .order_by("seq")
        .values_list("idempotency_key", flat=True)
    )
    assert keys[2] == "tier-1"
    assert all(len(k) == 32 and int(k, 16) >= 0 for k in keys[:2]) and keys[0] != keys[1]

    # The same batch with its keys again (a retry): the originals, nothing written.
    replay = [dict(event, idempotency_key=key) for event, key in zip(batch, keys, strict=True)]
    again = sb.append(session.id, replay)
    assert [e.seq for e in again.events] == [1, 2, 3]
    assert all(e.replayed for e in again.events) and again.head_seq == 3

    with pytest.raises(Conflict) as refused:
        sb.append(session.id, [{"kind": "note", "content": {}}], expected_head_seq=1)
    assert refused.value.code == "head_seq_mismatch" and refused.value.status == 409
    assert refused.value.detail
    with pytest.raises(InvalidInput) as invalid:
        sb.append(session.id, [{"kind": "lifecycle", "content": {}}])  # type: ignore[typeddict-item]
    assert invalid.value.code == "invalid_input" and invalid.value.status == 422
    assert sb.get_session(session.id).head_seq == 3


def test_it_reads_events_by_idempotency_key(sb):
    session = sb.open_session("writer")
    appended = sb.append(
        session.id,
        [
            {"kind": "note", "content": {"n": 1}},
            {"kind": "note", "content": {"n": 2}, "idempotency_key": "step-1:a"},
            {"kind": "note", "content": {"n": 3}, "idempotency_key": "step-1:b"},
        ],
    )
    assert appended.head_seq == 3
    made = sb.events(session.id, limit=1).events[0].idempotency_key
    assert made is not None and len(made) == 32
    assert [e.seq for e in sb.events(session.id, key=[made, "step-1:b"]).events] == [1, 3]
    assert [e.seq for e in sb.events(session.id, key_prefix="step-1:").events] == [2, 3]
    assert sb.events(session.id, key=["nothing"]).events == []


def test_it_reads_slices_state_snapshots_forks_and_exports(sb):
    session = sb.open_session("reader", title="Original")
    sb.append(
        session.id,
        [
            {
                "kind": "message",
                "role": "user",
                "content": {"text": "hello"},
                "tokens": 5,
                "cost": "0.25",
            },
            {"kind": "state", "content": {"stage": "triage"}},
            {"kind": "fact", "content": {"key": "tier", "value": "gold"}},
            {"kind": "state", "content": {"stage": "done"}},
        ],
    )
    page = sb.events(session.id, after_seq=1, limit=2)
    assert [e.seq for e in page.events] == [2, 3] and page.has_more and page.head_seq == 4
    first = sb.events(session.id, limit=1).events[0]
    assert (first.kind, first.role, first.tokens, first.cost) == (
        "message",
        "user",
        5,
        Decimal("0.25"),
    )
    assert first.content == {"text": "hello"} and first.session_id == session.id
    assert [e.seq for e in sb.events(session.id, kind=["state"], order="desc").events] == [4, 2]
    assert [e.seq for e in sb.iter_events(session.id, page_size=3)] == [1, 2, 3, 4]

    state = sb.state(session.id, at_seq=2)
    assert state.seq == 2 and state.state == {"stage": "triage"} and state.facts == {}
    head = sb.state(session.id)
    assert head.state == {"stage": "done"} and head.facts["tier"].value == "gold"
    assert head.facts["tier"].seq == 3

    snapshot = sb.snapshot(session.id)
    assert snapshot.seq == 4 and snapshot.content_hash == head.content_hash

    fork = sb.fork(session.id, 2, title="Retry")
    assert fork.lineage.parent_id == session.id and fork.lineage.fork_seq == 2
    assert fork.title == "Retry" and fork.head_seq == 2
    assert sb.state(fork.id).state == {"stage": "triage"}
    assert [e.seq for e in sb.events(fork.id).events] == [1, 2]

    with sb.export(session.id) as export:
        assert export.session.id == session.id and export.session.head_seq == 4
        assert export.session.usage.tokens == 5
        events = list(export)
    assert [e.seq for e in events] == [1, 2, 3, 4] and events[2].content["key"] == "tier"
    with pytest.raises(NotFound), sb.export(str(uuid.uuid4())):
        pass


def test_it_moves_a_session_through_its_lifecycle(sb):
    session = sb.open_session("lifecycle")
    assert sb.pause_session(session.id, "ask a human").status == "paused"
    assert sb.resume_session(session.id).status == "resumed"
    with pytest.raises(Conflict) as refused:
        sb.resume_session(session.id)
    assert refused.value.code == "invalid_transition"
    closed = sb.close_session(session.id, "done")
    assert closed.status == "closed" and closed.closed_at is not None
    with pytest.raises(Conflict) as closed_refusal:
        sb.append(session.id, [{"kind": "note", "content": {}}])
    assert closed_refusal.value.code == "session_not_writable"
    kinds = [e.kind for e in sb.events(session.id).events]
    assert kinds == ["lifecycle", "lifecycle", "lifecycle"]


def test_it_raises_typed_errors(server_url, sb):
    with pytest.raises(NotFound) as missing:
        sb.get_session(str(uuid.uuid4()))
    assert missing.value.code == "not_found" and missing.value.message
    with Client(server_url, "not-a-key") as stranger, pytest.raises(Unauthorized) as refused:
        stranger.list_sessions()
    assert refused.value.status == 401 and refused.value.code == "unauthorized"
    # A parameter the operation does not declare is refused before anything is sent.
    from switchboard_client import operations
    from switchboard_client._core import build

    with pytest.raises(TypeError, match="bogus"):
        build(operations.SESSION_LIST, query={"bogus": 1})


def test_it_forks_with_an_identity(sb):
    session = sb.open_session("forker", metadata={"attempt": 1})
    sb.append(session.id, [{"kind": "note", "content": {"n": 1}}, {"kind": "note", "content": {}}])
    fork = sb.fork(session.id, 1, external_id="retry-1", title="Retry", metadata={"attempt": 2})
    assert (fork.title, fork.external_id, fork.metadata) == ("Retry", "retry-1", {"attempt": 2})
    # Asked for again (a retry): the fork made first.
    assert sb.fork(session.id, 1, external_id="retry-1").id == fork.id
    assert sb.fork(session.id, 2).metadata == {"attempt": 1}  # omitted: the parent's
    with pytest.raises(Conflict) as taken:
        sb.fork(session.id, 2, external_id="retry-1")
    assert taken.value.code == "external_id_taken"
