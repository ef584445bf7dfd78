"""Handoffs through the Client against a live server: asking, listing, cancelling, and waiting
for a person's answer by long-poll (GET /handoffs/{id}?wait=S, looped). The person answers
through the server's own services, in this process."""

import threading
import time

import pytest
from switchboard_client import Conflict, NotFound

from handoffs_app.models import Handoff
from handoffs_app.services import handoffs as svc
from tests.handoffs.helpers import APPROVAL, QUESTION, operator
from tests.handoffs.readiness import eventually, group_members


def test_it_asks_lists_and_cancels(sb):
    session = sb.open_session("asker")
    handoff = sb.request_handoff(
        session.id, "question", reason="need a person", payload=QUESTION, priority="high"
    )
    assert (handoff.kind, handoff.status, handoff.priority) == ("question", "open", "high")
    assert handoff.session_id == session.id and not handoff.resolved
    assert handoff.idempotency_key and len(handoff.idempotency_key) == 32
    assert sb.get_session(session.id).status == "paused"
    # Its key again (a retried request): the original, nothing new.
    again = sb.request_handoff(
        session.id,
        "question",
        reason="need a person",
        payload=QUESTION,
        priority="high",
        idempotency_key=handoff.idempotency_key,
    )
    assert again.id == handoff.id
    with pytest.raises(Conflict) as second:
        sb.request_handoff(session.id, "question", payload=QUESTION)
    assert second.value.code == "handoff_already_open"

    assert [h.id for h in sb.list_handoffs(status=["open"]).handoffs] == [handoff.id]
    assert [h.id for h in sb.list_handoffs(session_id=session.id).handoffs] == [handoff.id]
    assert sb.list_handoffs(status=["answered"]).handoffs == []
    assert sb.get_handoff(handoff.id).status == "open"

    cancelled = sb.cancel_handoff(handoff.id, "solved it myself")
    assert cancelled.status == "cancelled" and cancelled.resolved
    # Already resolved: the wait answers at once.
    assert sb.wait_handoff(handoff.id, timeout=30).status == "cancelled"
    with pytest.raises(NotFound):
        sb.get_handoff("00000000-0000-0000-0000-000000000000")


@pytest.mark.requires_redis("the long-poll's wake-up across polls")
def test_it_waits_across_polls_for_the_answer(sb, project):
    session = sb.open_session("waiter")
    handoff = sb.request_handoff(session.id, "approval", payload=APPROVAL)
    person = operator(project)
    got = {}

    def wait() -> None:
        got["handoff"] = sb.wait_handoff(handoff.id, poll=1)
        got["at"] = time.monotonic()

    waiter = threading.Thread(target=wait)
    started = time.monotonic()
    waiter.start()
    # Let two polls of a second go by unanswered, then answer during the next one.
    eventually(lambda: group_members([handoff.id]) == 1, timeout=10, what="the poll waiting")
    time.sleep(2.2)
    assert waiter.is_alive()
    row = Handoff.objects.get(pk=handoff.id)
    svc.claim_handoff(row, user=person)
    svc.accept(row, user=person)
    waiter.join(timeout=20)
    answered = got["handoff"]
    assert answered.status == "answered" and answered.resolved
    assert answered.answer is not None and answered.answer["type"] == "accept"
    assert got["at"] - started >= 2.2


def test_a_wait_with_a_timeout_returns_the_handoff_unresolved(sb):
    session = sb.open_session("impatient")
    handoff = sb.request_handoff(session.id, "takeover")
    started = time.monotonic()
    still = sb.wait_handoff(handoff.id, timeout=1.5, poll=1)
    assert still.status == "open" and not still.resolved
    assert 1.0 <= time.monotonic() - started < 6


def test_a_handoff_answered_then_handed_back_still_has_its_answer(sb, project):
    """A person who answers and hands back at once may do both before the agent's wait sees
    "answered": the run goes on with the answer all the same (the adapters ask has_answer)."""
    person = operator(project)
    outcomes = {}
    for how in ("handed back", "cancelled", "taken over and handed back"):
        session = sb.open_session(f"answers-{how}")
        handoff = sb.request_handoff(session.id, "question", payload=QUESTION)
        row = Handoff.objects.get(pk=handoff.id)
        if how == "cancelled":
            sb.cancel_handoff(handoff.id, "solved it myself")
        else:
            svc.claim_handoff(row, user=person)
            if how == "handed back":
                svc.respond(Handoff.objects.get(pk=row.pk), user=person, text="the new one")
            else:
                svc.take_over(Handoff.objects.get(pk=row.pk), user=person)
            svc.hand_back(Handoff.objects.get(pk=row.pk), user=person)
        done = sb.wait_handoff(handoff.id, timeout=30)
        outcomes[how] = (done.status, done.has_answer)
    assert outcomes == {
        "handed back": ("handed_back", True),
        "cancelled": ("cancelled", False),
        "taken over and handed back": ("handed_back", False),
    }
