"""The session lifecycle of DESIGN.md: every allowed move, every refused one, and budgets."""

from decimal import Decimal

import pytest

from core.actors import Actor
from core.errors import InvalidTransition
from core.models import AuditEntry
from sessions_app.models import Event, Session
from sessions_app.services.lifecycle import (
    archive_session,
    close_session,
    pause_session,
    resume_session,
)
from tests.factories import make_session

STATUSES = ["open", "paused", "resumed", "closed", "archived"]
TARGETS = ["paused", "resumed", "closed", "archived"]
# The diagram, transcribed here independently of models.ALLOWED_TRANSITIONS.
DIAGRAM = {
    ("open", "paused"),
    ("open", "closed"),
    ("paused", "resumed"),
    ("paused", "closed"),
    ("resumed", "paused"),
    ("resumed", "closed"),
    ("closed", "archived"),
}
# How to reach each status from open, through the services.
PATHS = {
    "open": [],
    "paused": [pause_session],
    "resumed": [pause_session, resume_session],
    "closed": [close_session],
    "archived": [close_session, archive_session],
}
ENDPOINTS = {"paused": "pause", "resumed": "resume", "closed": "close"}  # archive: no endpoint
SERVICES = {
    "paused": pause_session,
    "resumed": resume_session,
    "closed": close_session,
    "archived": archive_session,
}


def _session_in(project, status: str) -> Session:
    session = make_session(project)
    for step in PATHS[status]:
        step(session, actor=Actor.system("setup"), reason="setup")
    session.refresh_from_db()
    assert session.status == status
    return session


def _move(api, session: Session, to: str, reason: str):
    """Through the API where there is an endpoint, else (archive) through the service."""
    if to in ENDPOINTS:
        return api.post(f"/sessions/{session.pk}/{ENDPOINTS[to]}", {"reason": reason})
    try:
        SERVICES[to](session, actor=Actor.system("admin"), reason=reason)
    except InvalidTransition as exc:
        return exc
    return None


def _snapshot(session: Session) -> tuple:
    session.refresh_from_db()
    return (
        session.status,
        session.head_seq,
        session.closed_at,
        session.archived_at,
        Event.objects.filter(session=session).count(),
        AuditEntry.objects.filter(target_id=str(session.pk)).count(),
    )


@pytest.mark.parametrize(
    ("start", "to"), [(s, t) for s in STATUSES for t in TARGETS if (s, t) in DIAGRAM]
)
def test_it_makes_every_allowed_transition_with_a_lifecycle_event_and_audit(
    api, api_key, project, start, to
):
    session = _session_in(project, start)
    head = session.head_seq
    outcome = _move(api, session, to, reason=f"because {to}")
    if to in ENDPOINTS:
        assert outcome.status_code == 200, outcome.content
        assert outcome.json()["status"] == to and outcome.json()["head_seq"] == head + 1
        actor = f"key:{api_key[0].prefix}"
    else:
        assert outcome is None
        actor = "admin"

    session.refresh_from_db()
    assert session.status == to
    assert session.head_seq == head + 1
    event = Event.objects.get(session=session, seq=head + 1)
    assert (event.kind, event.tier, event.actor) == ("lifecycle", "durable", actor)
    assert event.content == {"from": start, "to": to, "reason": f"because {to}", "actor": actor}
    audit = AuditEntry.objects.filter(target_id=str(session.pk)).latest("pk")
    assert (audit.action, audit.actor, audit.target_type) == (f"session.{to}", actor, "session")
    assert audit.detail == {"from": start, "to": to, "reason": f"because {to}"}
    assert (session.closed_at is not None) == (to == "closed" or start == "closed")
    assert (session.archived_at is not None) == (to == "archived")


@pytest.mark.parametrize(
    ("start", "to"), [(s, t) for s in STATUSES for t in TARGETS if (s, t) not in DIAGRAM]
)
def test_it_refuses_every_other_transition_with_409_and_changes_nothing(api, project, start, to):
    session = _session_in(project, start)
    before = _snapshot(session)
    outcome = _move(api, session, to, reason="nope")
    if to in ENDPOINTS:
        assert outcome.status_code == 409, outcome.content
        error = outcome.json()["error"]
        assert set(error) == {"code", "message", "detail"}
        assert error["code"] == "invalid_transition"
        assert error["detail"]["status"] == start and error["detail"]["to"] == to
    else:
        assert isinstance(outcome, InvalidTransition)
    assert _snapshot(session) == before


def test_it_pauses_and_resumes_without_a_body(api, project):
    session = make_session(project)
    assert (
        api.client.post(
            f"/api/v1/sessions/{session.pk}/pause",
            headers=api.headers,
            content_type="application/json",
        ).status_code
        == 200
    )
    session.refresh_from_db()
    assert session.status == "paused"
    assert Event.objects.get(session=session, seq=1).content["reason"] == ""


@pytest.mark.parametrize("status", ["closed", "archived"])
def test_it_refuses_appends_to_a_closed_or_archived_session(api, project, status):
    session = _session_in(project, status)
    before = _snapshot(session)
    response = api.post(
        f"/sessions/{session.pk}/events",
        {"events": [{"kind": "message", "content": {"text": "late"}}]},
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "session_not_writable"
    assert response.json()["error"]["detail"] == {"status": status}
    assert _snapshot(session) == before


def test_it_pauses_a_session_whose_token_budget_is_exceeded(api, project):
    opened = api.post("/sessions", {"agent": "spender", "budget": {"max_tokens": 100}})
    session = Session.objects.get(pk=opened.json()["id"])
    at_limit = api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "message", "tokens": 100}]}
    )
    assert at_limit.json()["status"] == "open"  # reaching the budget is not exceeding it

    over = api.post(
        f"/sessions/{session.pk}/events", {"events": [{"kind": "message", "tokens": 1}]}
    )
    assert over.status_code == 201
    assert over.json()["status"] == "paused"
    session.refresh_from_db()
    # seq 4 is the record of the `budget` handoff the overrun opened (handoffs_app).
    assert (session.status, session.tokens_used, session.head_seq) == ("paused", 101, 4)
    assert Event.objects.get(session=session, seq=4).kind == "handoff"
    event = Event.objects.get(session=session, seq=3)
    assert event.kind == "lifecycle" and event.actor == "budget"
    assert (event.content["from"], event.content["to"]) == ("open", "paused")
    assert "budget exceeded" in event.content["reason"] and "tokens" in event.content["reason"]
    assert (
        AuditEntry.objects.filter(
            target_id=str(session.pk), action="session.paused", actor="budget"
        ).count()
        == 1
    )

    # Already paused: further spending is recorded, and pauses nothing again.
    again = api.post(f"/sessions/{session.pk}/events", {"events": [{"kind": "note", "tokens": 5}]})
    assert again.json()["status"] == "paused"
    assert Event.objects.filter(session=session, kind="lifecycle").count() == 1


def test_it_pauses_a_resumed_session_whose_cost_budget_is_exceeded(api, project):
    session = make_session(project, budget_max_cost=Decimal("1.00"))
    pause_session(session, actor=Actor.system(), reason="first")
    resume_session(session, actor=Actor.system(), reason="go on")
    response = api.post(
        f"/sessions/{session.pk}/events",
        {
            "events": [
                {"kind": "tool_call", "cost": "0.60"},
                {"kind": "tool_result", "cost": "0.60"},
            ]
        },
    )
    assert response.json()["status"] == "paused"
    session.refresh_from_db()
    assert session.status == "paused" and session.cost_used == Decimal("1.2")
    # The latest lifecycle event (a `handoff` record of the budget handoff follows it).
    last = Event.objects.filter(session=session, kind="lifecycle").latest("seq")
    assert last.content["from"] == "resumed"
    assert "budget exceeded: cost" in last.content["reason"]
