"""GET /sessions/{id}/export: the whole visible log as JSON Lines, streamed."""

import json
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync

from core.actors import Actor
from core.models import AuditEntry
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.sessions import fork_session
from tests.factories import make_session

# The export reads through a database connection of its own (the rows must be committed).
pytestmark = pytest.mark.django_db(transaction=True)


def _read(response) -> bytes:
    assert response.status_code == 200
    assert response.streaming  # never built whole in memory
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert response.is_async  # ASGI streams an async iterator chunk by chunk; a sync one whole

    async def collect() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()


def _export(response) -> tuple[dict, list[dict]]:
    """(the header line's session, the event lines)."""
    raw = _read(response).decode()
    assert raw.endswith("\n")
    header, *events = [json.loads(line) for line in raw.splitlines()]
    assert set(header) == {"session"}
    return header["session"], events


def _lines(response) -> list[dict]:
    return _export(response)[1]


def test_it_streams_every_event_once_in_order(api, project):
    session = make_session(project)
    actor = Actor.system()
    # More than one read chunk (1,000 rows), with every kind of content.
    append_events(
        session,
        [
            EventDraft(kind="message", role="user", content={"text": f"m{i}", "n": i}, tokens=1)
            for i in range(1, 2401)
        ],
        actor=actor,
    )
    append_events(
        session, [EventDraft(kind="fact", content={"key": "k", "value": [1, None]})], actor=actor
    )

    lines = _lines(api.get(f"/sessions/{session.pk}/export"))

    assert [line["seq"] for line in lines] == list(range(1, 2402))
    assert lines[0]["content"] == {"text": "m1", "n": 1}
    assert lines[0]["kind"] == "message" and lines[0]["role"] == "user"
    assert lines[-1]["content"] == {"key": "k", "value": [1, None]}
    assert {line["session_id"] for line in lines} == {str(session.pk)}
    audit = AuditEntry.objects.get(action="session.export", target_id=str(session.pk))
    assert audit.actor.startswith("key:") and audit.detail == {"head_seq": 2401}
    assert set(lines[0]) >= {
        "seq",
        "kind",
        "tier",
        "role",
        "content",
        "tokens",
        "cost",
        "actor",
        "idempotency_key",
        "created_at",
        "session_id",
    }


def test_it_exports_a_fork_with_its_parents_prefix(api, project):
    parent = make_session(project)
    actor = Actor.system()
    append_events(
        parent, [EventDraft(kind="note", content={"p": i}) for i in range(1, 8)], actor=actor
    )
    fork = fork_session(parent, at_seq=4, actor=actor)
    append_events(
        fork, [EventDraft(kind="note", content={"f": i}) for i in range(5, 7)], actor=actor
    )

    lines = _lines(api.get(f"/sessions/{fork.pk}/export"))

    assert [(line["seq"], line["content"], line["session_id"]) for line in lines] == (
        [(i, {"p": i}, str(parent.pk)) for i in range(1, 5)]
        + [(i, {"f": i}, str(fork.pk)) for i in range(5, 7)]
    )


def test_it_exports_an_empty_session_as_its_header_alone(api, project):
    session = make_session(project)
    header, events = _export(api.get(f"/sessions/{session.pk}/export"))
    assert events == [] and header["id"] == str(session.pk) and header["head_seq"] == 0


def test_the_first_line_describes_the_session_and_its_lineage(api, project):
    parent = make_session(project, title="Refund ✓")
    actor = Actor.system()
    append_events(
        parent,
        [
            EventDraft(kind="note", content={"p": i}, tokens=10, cost=Decimal("0.5"))
            for i in range(1, 5)
        ],
        actor=actor,
    )
    parent.refresh_from_db()
    fork = fork_session(parent, at_seq=3, actor=actor)
    append_events(fork, [EventDraft(kind="note", content={}, tokens=7)], actor=actor)
    fork.refresh_from_db()

    header, events = _export(api.get(f"/sessions/{parent.pk}/export"))
    assert header == {
        "id": str(parent.pk),
        "title": "Refund ✓",
        "agent": parent.agent.name,
        "parent_id": None,
        "fork_seq": None,
        "status": parent.status,
        "head_seq": 4,
        "usage": {"tokens": 40, "cost": str(parent.cost_used)},
    }
    assert [line["seq"] for line in events] == [1, 2, 3, 4]

    header, events = _export(api.get(f"/sessions/{fork.pk}/export"))
    assert header["id"] == str(fork.pk) and header["agent"] == fork.agent.name
    assert (header["parent_id"], header["fork_seq"]) == (str(parent.pk), 3)
    assert header["head_seq"] == 4 == fork.head_seq
    assert header["usage"] == {"tokens": fork.tokens_used, "cost": str(fork.cost_used)}
    assert [line["seq"] for line in events] == [1, 2, 3, 4]
