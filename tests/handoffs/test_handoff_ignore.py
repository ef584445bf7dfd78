""" "ignore" as an answer (Agent Inbox's): allowed only by config.allow_ignore; the handoff ends
`ignored`, the session resumes, the log, the audit and the outbox say so; `reject` stays the
refusal with a reason, answered and handed back as before."""

import pytest

from core.models import AuditEntry, OutboxMessage
from handoffs_app.domain_events import webhook_event_for
from handoffs_app.errors import AnswerNotAllowed, HandoffNotActive, NotLeaseHolder
from handoffs_app.models import Handoff
from handoffs_app.services import handoffs as svc
from handoffs_app.services.validation import allowed_answers
from sessions_app.models import Event
from switchboard.sessions.context import handoff_step_text

from .helpers import APPROVAL, ask, handoff_records, make_session, operator, steps

IGNORABLE = {**APPROVAL, "config": {**APPROVAL["config"], "allow_ignore": True}}


@pytest.fixture
def session(project):
    return make_session(project)


def test_allow_ignore_allows_ignore_and_reject(project, session):
    assert allowed_answers("approval", IGNORABLE) == [
        "accept",
        "edit",
        "ignore",
        "reject",
        "respond",
    ]
    assert allowed_answers("approval", APPROVAL) == ["accept", "edit", "respond"]
    assert allowed_answers("question", {"question": "?"}) == ["respond"]


def test_it_ends_the_handoff_ignored_and_resumes_the_session(project, session):
    user = operator(project)
    handoff = ask(session, payload=IGNORABLE)
    svc.claim_handoff(handoff, user=user)
    svc.ignore(handoff, user=user)
    handoff.refresh_from_db()
    session.refresh_from_db()
    assert handoff.status == "ignored" and handoff.is_resolved and not handoff.is_active
    assert handoff.answer["type"] == "ignore" and handoff.answer["args"] is None
    assert handoff.answer["by"] == f"user:{user.username}"
    assert handoff.resolved_at is not None and handoff.lease_expires_at is None
    assert session.status == "resumed"
    assert steps(session) == ["requested", "claimed", "ignored"]
    record = handoff_records(session)[-1]
    assert record["answer"]["type"] == "ignore" and record["status"] == "ignored"
    resumed = Event.objects.filter(session=session, kind="lifecycle").order_by("-seq").first()
    assert resumed.content["to"] == "resumed" and "ignored" in resumed.content["reason"]
    assert AuditEntry.objects.filter(action="handoff.ignored", target_id=str(handoff.pk)).exists()
    outbox = OutboxMessage.objects.get(type="handoff.ignored")
    # Agents learn it as an answer (the webhook they subscribe to), of type "ignore".
    assert webhook_event_for(outbox.type, outbox.payload) == "handoff.answered"
    assert outbox.payload["answer"]["type"] == "ignore"
    # The session timeline says it in words.
    assert handoff_step_text(record) == (
        f"approval: ignored by {user.username}: the agent goes on without the action"
    )
    # A new request may follow at once: the ignored one is no longer active.
    assert ask(session, kind="question").status == "open"


def test_it_is_refused_when_the_request_does_not_allow_it(project, session):
    user = operator(project)
    handoff = ask(session)  # allow_ignore false
    svc.claim_handoff(handoff, user=user)
    head = Handoff.objects.get(pk=handoff.pk).session.head_seq
    with pytest.raises(AnswerNotAllowed) as refused:
        svc.ignore(handoff, user=user)
    assert refused.value.status == 422
    assert refused.value.detail == {"answer": "ignore", "allowed": ["accept", "edit", "respond"]}
    assert "it accepts: accept, edit, respond" in refused.value.message
    handoff.refresh_from_db()
    session.refresh_from_db()
    assert (handoff.status, handoff.answer, session.head_seq) == ("claimed", None, head)
    assert not AuditEntry.objects.filter(action="handoff.ignored").exists()


def test_only_the_holder_of_a_claimed_handoff_ignores(project, session):
    alice, bob = operator(project), operator(project)
    handoff = ask(session, payload=IGNORABLE)
    with pytest.raises(NotLeaseHolder):
        svc.ignore(handoff, user=alice)  # nobody claimed it
    svc.claim_handoff(handoff, user=alice)
    with pytest.raises(NotLeaseHolder):
        svc.ignore(handoff, user=bob)
    svc.reject(handoff, user=alice, reason="no")
    with pytest.raises(HandoffNotActive):
        svc.ignore(handoff, user=alice)  # answered already: a verdict was given
    handoff.refresh_from_db()
    assert (handoff.status, handoff.answer["type"]) == ("answered", "reject")


def test_reject_is_still_a_verdict_that_is_handed_back(project, session):
    user = operator(project)
    handoff = ask(session, payload=IGNORABLE)
    svc.claim_handoff(handoff, user=user)
    svc.reject(handoff, user=user, reason="not eligible")
    assert (handoff.status, handoff.answer["type"]) == ("answered", "reject")
    assert handoff.answer["reason"] == "not eligible"
    svc.hand_back(handoff, user=user)
    assert handoff.status == "handed_back"
