"""The loop through the services: request → claim → answer → hand back / take over."""

from decimal import Decimal

import pytest

from core.errors import InvalidInput
from core.models import AuditEntry, OutboxMessage, Role
from handoffs_app.errors import (
    AnswerNotAllowed,
    HandoffAlreadyClaimed,
    HandoffAlreadyOpen,
    HandoffNotActive,
    NotLeaseHolder,
)
from handoffs_app.models import Handoff
from handoffs_app.services import handoffs as svc
from sessions_app.errors import SessionTakenOver
from sessions_app.models import Event
from sessions_app.services.events import EventDraft, append_events
from sessions_app.services.state import state_at
from tests.factories import make_member

from .helpers import AGENT, QUESTION, ask, handoff_records, make_session, operator, steps


@pytest.fixture
def session(project):
    return make_session(project)


def test_it_pauses_the_session_naming_the_handoff(project, session):
    handoff = ask(session)
    session.refresh_from_db()
    assert session.status == "paused"
    lifecycle = Event.objects.get(session=session, kind="lifecycle")
    assert lifecycle.content["handoff_id"] == str(handoff.pk)
    assert lifecycle.content["to"] == "paused"
    assert steps(session) == ["requested"]
    assert handoff.status == "open" and handoff.priority_name == "normal"
    assert AuditEntry.objects.filter(action="handoff.requested", target_id=str(handoff.pk)).exists()
    created = OutboxMessage.objects.get(type="handoff.created")
    assert created.groups == [f"handoff-{handoff.pk}", f"project-{project.pk}-handoffs"]


def test_it_refuses_a_second_open_handoff_and_replays_a_key(session):
    first = ask(session, idempotency_key="k1")
    again = svc.request_handoff(
        session, kind="question", payload=QUESTION, idempotency_key="k1", actor=AGENT
    )
    assert (again.handoff.pk, again.created) == (first.pk, False)
    with pytest.raises(HandoffAlreadyOpen):
        ask(session, kind="question")
    assert Handoff.objects.count() == 1
    assert steps(session) == ["requested"]


def test_approval_accept_and_hand_back_resumes(project, session):
    user = operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=user)
    svc.accept(handoff, user=user)
    assert handoff.status == "answered"
    assert handoff.answer["type"] == "accept"
    assert handoff.answer["args"] == {"order": "A-1001", "amount": "120.00"}
    svc.hand_back(handoff, user=user)
    session.refresh_from_db()
    assert (handoff.status, session.status) == ("handed_back", "resumed")
    assert steps(session) == ["requested", "claimed", "answered", "handed_back"]
    records = handoff_records(session)
    assert all(r["actor"] for r in records)
    assert records[1]["actor"] == f"user:{user.username}"


def test_edit_and_accept_keeps_the_original_args(project, session):
    user = operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=user)
    svc.edit_and_accept(handoff, user=user, args={"order": "A-1001", "amount": "100.00"})
    assert handoff.answer["type"] == "edit"
    assert handoff.answer["args"]["amount"] == "100.00"
    assert handoff.answer["original_args"]["amount"] == "120.00"


def test_answers_not_allowed_by_config_are_refused_and_nothing_written(project, session):
    user = operator(project)
    handoff = ask(session)  # allow_ignore false
    svc.claim_handoff(handoff, user=user)
    before = session_head(session)
    with pytest.raises(AnswerNotAllowed) as refused:
        svc.reject(handoff, user=user)
    assert refused.value.status == 422
    assert refused.value.detail["allowed"] == ["accept", "edit", "respond"]
    handoff.refresh_from_db()
    assert (handoff.status, handoff.answer) == ("claimed", None)
    assert session_head(session) == before


def session_head(session):
    session.refresh_from_db()
    return session.head_seq


def test_question_respond_writes_a_human_message(project, session):
    user = operator(project)
    handoff = ask(session, kind="question")
    svc.claim_handoff(handoff, user=user)
    svc.respond(handoff, user=user, text="yes, ship it", choice="yes")
    message = Event.objects.get(session=session, kind="message")
    assert (message.role, message.content["text"]) == ("human", "yes, ship it")
    assert handoff.answer["choice"] == "yes"


def unchanged(handoff, session):
    """What a refused answer or edit must leave as it was: the handoff, the log, the budget."""
    handoff.refresh_from_db()
    session.refresh_from_db()
    return (
        handoff.status,
        handoff.answer,
        session.head_seq,
        session.budget_max_tokens,
        session.budget_max_cost,
    )


def test_a_choice_not_among_the_questions_is_refused_and_nothing_written(project, session):
    user = operator(project)
    handoff = ask(session, kind="question")
    svc.claim_handoff(handoff, user=user)  # claimed: only the choice can refuse it
    before = unchanged(handoff, session)
    with pytest.raises(InvalidInput) as refused:
        svc.respond(handoff, user=user, text="x", choice="maybe")
    assert refused.value.status == 422
    assert refused.value.detail == {"field": "choice", "allowed": ["yes", "no"]}
    assert unchanged(handoff, session) == before == ("claimed", None, before[2], None, None)


TOO_LONG = "x" * (svc.MAX_TEXT + 1)


@pytest.mark.parametrize(
    ("kind", "act", "message", "field"),
    [
        (
            "question",
            lambda h, u: svc.respond(h, user=u, text="   "),
            "text must be a non-empty string.",
            "text",
        ),
        (
            "question",
            lambda h, u: svc.respond(h, user=u, text=TOO_LONG),
            f"text holds at most {svc.MAX_TEXT} characters.",
            "text",
        ),
        (
            "approval",
            lambda h, u: svc.edit_and_accept(h, user=u, args=["A-1001", "100.00"]),
            "args must be a JSON object.",
            "args",
        ),
        (
            "approval",
            lambda h, u: svc.patch_state(h, user=u, patch={}),
            "patch must be a non-empty JSON object.",
            "patch",
        ),
        (
            "approval",
            lambda h, u: svc.patch_state(h, user=u, patch=[{"a": 1}]),
            "patch must be a non-empty JSON object.",
            "patch",
        ),
        (
            "approval",
            lambda h, u: svc.add_facts(h, user=u, facts={}),
            "facts must be a non-empty JSON object.",
            "facts",
        ),
        (
            "approval",
            lambda h, u: svc.add_facts(h, user=u, facts=[["k", "v"]]),
            "facts must be a non-empty JSON object.",
            "facts",
        ),
    ],
    ids=[
        "blank-text",
        "text-too-long",
        "args-not-an-object",
        "empty-patch",
        "patch-not-an-object",
        "no-facts",
        "facts-not-an-object",
    ],
)
def test_the_holders_bad_input_is_refused_and_nothing_written(
    project, session, kind, act, message, field
):
    user = operator(project)
    handoff = ask(session, kind=kind)
    svc.claim_handoff(handoff, user=user)
    before = unchanged(handoff, session)
    with pytest.raises(InvalidInput) as refused:
        act(handoff, user)
    assert (refused.value.message, refused.value.detail) == (message, {"field": field})
    assert unchanged(handoff, session) == before
    assert not AuditEntry.objects.filter(action__in=["handoff.state", "handoff.facts"]).exists()


@pytest.mark.parametrize(
    ("max_tokens", "max_cost"),
    [(-1, Decimal("2.5")), (1000, Decimal("-0.01"))],
    ids=["negative-tokens", "negative-cost"],
)
def test_a_negative_budget_is_refused_and_the_budget_unchanged(project, max_tokens, max_cost):
    session = make_session(project, budget_max_tokens=100)
    draft = EventDraft(kind="message", role="assistant", content={"text": "long"}, tokens=150)
    append_events(session, [draft], actor=AGENT)
    handoff = Handoff.objects.get(session=session, kind="budget")
    user = operator(project)
    svc.claim_handoff(handoff, user=user)
    before = unchanged(handoff, session)
    with pytest.raises(InvalidInput) as refused:
        svc.approve_budget(handoff, user=user, max_tokens=max_tokens, max_cost=max_cost)
    assert refused.value.message == "A budget cannot be negative."
    assert refused.value.detail == {"field": "budget"}
    assert unchanged(handoff, session) == before == ("claimed", None, before[2], 100, None)


def test_only_the_lease_holder_acts(project, session):
    alice, bob = operator(project), operator(project)
    handoff = ask(session)
    with pytest.raises(NotLeaseHolder):
        svc.accept(handoff, user=alice)  # nobody claimed it yet
    svc.claim_handoff(handoff, user=alice)
    with pytest.raises(HandoffAlreadyClaimed) as second:
        svc.claim_handoff(handoff, user=bob)
    assert second.value.detail["holder"] == f"user:{alice.username}"
    with pytest.raises(NotLeaseHolder):
        svc.accept(handoff, user=bob)
    with pytest.raises(NotLeaseHolder):
        svc.hand_back(handoff, user=bob)
    handoff.refresh_from_db()
    assert handoff.status == "claimed" and handoff.answer is None


def test_a_viewer_cannot_claim(project, session):
    from core.errors import PermissionDeniedError

    viewer = make_member(project, Role.VIEWER)
    with pytest.raises(PermissionDeniedError):
        svc.claim_handoff(ask(session), user=viewer)


def test_take_over_blocks_the_agent_until_handed_back(project, session):
    user = operator(project)
    handoff = ask(session, kind="takeover")
    svc.claim_handoff(handoff, user=user)
    svc.take_over(handoff, user=user)
    draft = EventDraft(kind="message", role="assistant", content={"text": "me again"})
    with pytest.raises(SessionTakenOver) as refused:
        append_events(session, [draft], actor=AGENT)
    assert refused.value.code == "session_taken_over"
    svc.send_human_message(handoff, user=user, text="Hello, a person here.")
    svc.send_human_message(handoff, user=user, text="All sorted.")
    humans = Event.objects.filter(session=session, kind="message", role="human")
    assert humans.count() == 2
    svc.hand_back(handoff, user=user)
    result = append_events(session, [draft], actor=AGENT)
    assert result.events[0].seq == session_head(session)
    assert steps(session) == ["requested", "claimed", "taken_over", "handed_back"]


def test_take_over_then_close_closes_the_session(project, session):
    user = operator(project)
    handoff = ask(session, kind="takeover")
    svc.claim_handoff(handoff, user=user)
    svc.take_over(handoff, user=user)
    svc.close_handoff(handoff, user=user, reason="done")
    session.refresh_from_db()
    assert (handoff.status, session.status, session.taken_over_by) == ("closed", "closed", "")


def test_patch_state_and_facts_go_through_the_log(project, session):
    user = operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=user)
    svc.patch_state(handoff, user=user, patch={"ticket": {"stage": "approved"}})
    svc.add_facts(handoff, user=user, facts={"approved_by": user.username})
    session.refresh_from_db()
    folded = state_at(session)
    assert folded.state == {"ticket": {"stage": "approved"}}
    assert folded.facts["approved_by"]["value"] == user.username


def test_cancel_by_the_agent_resumes_and_then_answers_are_refused(project, session):
    user = operator(project)
    handoff = ask(session)
    svc.cancel_handoff(handoff, actor=AGENT, reason="solved it myself")
    session.refresh_from_db()
    assert (handoff.status, session.status) == ("cancelled", "resumed")
    with pytest.raises(HandoffNotActive):
        svc.claim_handoff(handoff, user=user)
    with pytest.raises(HandoffNotActive):
        svc.cancel_handoff(handoff, actor=AGENT)


def test_release_returns_it_to_the_queue(project, session):
    alice, bob = operator(project), operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=alice)
    svc.release_handoff(handoff, user=alice)
    assert handoff.status == "open" and handoff.lease_holder_id is None
    svc.claim_handoff(handoff, user=bob)
    assert steps(session) == ["requested", "claimed", "released", "claimed"]


def test_an_admin_reassigns(project, session):
    admin = make_member(project, Role.ADMIN)
    alice, bob = operator(project), operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=alice)
    with pytest.raises(Exception) as denied:
        svc.reassign_handoff(handoff, to_user=bob, user=alice)
    assert denied.value.status == 403
    svc.reassign_handoff(handoff, to_user=bob, user=admin)
    assert handoff.lease_holder_id == bob.pk
    svc.accept(handoff, user=bob)


def test_budget_overrun_opens_a_budget_handoff(project):
    session = make_session(project, budget_max_tokens=100)
    draft = EventDraft(kind="message", role="assistant", content={"text": "long"}, tokens=150)
    append_events(session, [draft], actor=AGENT)
    session.refresh_from_db()
    assert session.status == "paused"
    handoff = Handoff.objects.get(session=session)
    assert (handoff.kind, handoff.status, handoff.priority_name) == ("budget", "open", "high")
    assert handoff.payload["usage"]["tokens"] == 150
    user = operator(project)
    svc.claim_handoff(handoff, user=user)
    svc.approve_budget(handoff, user=user, max_tokens=1000, max_cost=Decimal("2.5"))
    svc.hand_back(handoff, user=user)
    session.refresh_from_db()
    assert (session.budget_max_tokens, session.status) == (1000, "resumed")


def test_human_messages_need_a_take_over(project, session):
    user = operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=user)
    with pytest.raises(HandoffNotActive):
        svc.send_human_message(handoff, user=user, text="hi")
    assert not Event.objects.filter(session=session, kind="message").exists()


def test_a_holder_lowered_to_viewer_acts_no_more(project, session):
    from core.errors import PermissionDeniedError
    from core.models import Membership

    user = operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=user)
    Membership.objects.filter(user=user, project=project).update(role=Role.VIEWER)
    with pytest.raises(PermissionDeniedError):
        svc.accept(handoff, user=user)
    handoff.refresh_from_db()
    assert handoff.status == "claimed"


def test_work_at_a_handoff_is_audited(project, session):
    user = operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=user)
    svc.patch_state(handoff, user=user, patch={"a": 1})
    svc.add_facts(handoff, user=user, facts={"k": "v", "j": 2})
    entries = AuditEntry.objects.filter(
        target_id=str(handoff.pk), action__in=["handoff.state", "handoff.facts"]
    )
    assert sorted((e.action, len(e.detail["seqs"])) for e in entries) == [
        ("handoff.facts", 2),
        ("handoff.state", 1),
    ]
