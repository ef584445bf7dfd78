"""GET /sessions/{id}/export: the whole visible log as JSON Lines, streamed."""

import json

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


def _lines(response) -> list[dict]:
    raw = _read(response).decode()
    assert raw.endswith("\n")
    return [json.loads(line) for line in raw.splitlines()]


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


def test_it_exports_an_empty_session_as_an_empty_stream(api, project):
    session = make_session(project)
    assert _read(api.get(f"/sessions/{session.pk}/export")) == b""
