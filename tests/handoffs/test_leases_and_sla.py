"""Leases lapse back to the queue; the SLA job marks overdue, raises priority once, expires."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from core.models import OutboxMessage
from handoffs_app.errors import HandoffAlreadyClaimed, NotLeaseHolder
from handoffs_app.models import HandoffSettings
from handoffs_app.services import handoffs as svc
from handoffs_app.services.jobs import enforce_sla_batch, expire_leases_batch
from sessions_app.services.events import EventDraft, append_events
from tests.factories import make_session

from .helpers import AGENT, ask, operator, steps


@pytest.fixture
def session(project):
    return make_session(project)


def test_an_expired_lease_returns_the_handoff_to_the_queue(project, session):
    alice, bob = operator(project), operator(project)
    with time_machine.travel(timezone.now(), tick=False) as clock:
        handoff = ask(session)
        svc.claim_handoff(handoff, user=alice)
        clock.shift(timedelta(minutes=14))
        svc.renew_lease(handoff, user=alice)  # the workspace is open: 15 more minutes
        clock.shift(timedelta(minutes=14))
        assert expire_leases_batch() == 0
        handoff.refresh_from_db()
        assert handoff.status == "claimed"
        clock.shift(timedelta(minutes=2))
        with pytest.raises(NotLeaseHolder):
            svc.accept(handoff, user=alice)  # lapsed: not even the holder may act
        assert expire_leases_batch() == 1
        handoff.refresh_from_db()
        assert (handoff.status, handoff.lease_holder_id) == ("open", None)
        assert steps(session) == ["requested", "claimed", "lease_expired"]
        assert OutboxMessage.objects.filter(type="handoff.released", payload__lapsed=True).exists()
        svc.claim_handoff(handoff, user=bob)
        svc.accept(handoff, user=bob)
    assert expire_leases_batch() == 0


def test_a_lapsed_take_over_lets_the_agent_back_in(project, session):
    alice = operator(project)
    with time_machine.travel(timezone.now(), tick=False) as clock:
        handoff = ask(session, kind="takeover")
        svc.claim_handoff(handoff, user=alice)
        svc.take_over(handoff, user=alice)
        clock.shift(timedelta(minutes=16))
        assert expire_leases_batch() == 1
    session.refresh_from_db()
    assert session.taken_over_by == ""
    append_events(session, [EventDraft(kind="note", content={"n": 1})], actor=AGENT)


def test_a_lapsed_answered_handoff_is_handed_back(project, session):
    alice = operator(project)
    with time_machine.travel(timezone.now(), tick=False) as clock:
        handoff = ask(session)
        svc.claim_handoff(handoff, user=alice)
        svc.accept(handoff, user=alice)
        clock.shift(timedelta(minutes=16))
        assert expire_leases_batch() == 1
    handoff.refresh_from_db()
    session.refresh_from_db()
    assert (handoff.status, session.status) == ("handed_back", "resumed")
    assert steps(session)[-2:] == ["lease_expired", "handed_back"]


def test_overdue_raises_priority_once_then_expires(project, session):
    HandoffSettings.objects.create(
        project=project, question_due_seconds=60, expire_after_overdue_seconds=600
    )
    with time_machine.travel(timezone.now(), tick=False) as clock:
        handoff = ask(session, kind="question")
        other = ask(make_session(project), kind="question", priority="urgent")
        assert enforce_sla_batch().handled == 0
        clock.shift(timedelta(seconds=61))
        result = enforce_sla_batch()
        assert (result.overdue, result.expired) == (2, 0)
        handoff.refresh_from_db()
        other.refresh_from_db()
        assert (handoff.overdue, handoff.priority_name) == (True, "high")
        assert other.priority_name == "urgent"  # already the highest
        clock.shift(timedelta(seconds=120))
        assert enforce_sla_batch().handled == 0  # raised once only
        handoff.refresh_from_db()
        assert handoff.priority_name == "high"
        overdue = OutboxMessage.objects.filter(type="handoff.overdue")
        assert overdue.count() == 2
        clock.shift(timedelta(seconds=600))
        assert enforce_sla_batch().expired == 2
    handoff.refresh_from_db()
    assert handoff.status == "expired"
    assert steps(session) == ["requested", "overdue", "expired"]
    assert OutboxMessage.objects.filter(type="handoff.expired").count() == 2


def test_due_in_overrides_the_project_sla(project, session):
    now = timezone.now()
    handoff = ask(session, kind="question", due_in=90)
    assert timedelta(seconds=89) < handoff.due_at - now < timedelta(seconds=91)
    default = ask(make_session(project), kind="approval")
    assert timedelta(minutes=29) < default.due_at - now < timedelta(minutes=31)


def test_an_answered_handoff_is_never_overdue_or_expired(project, session):
    alice = operator(project)
    with time_machine.travel(timezone.now(), tick=False) as clock:
        handoff = ask(session)
        svc.claim_handoff(handoff, user=alice)
        svc.accept(handoff, user=alice)
        svc.hand_back(handoff, user=alice)
        clock.shift(timedelta(days=3))
        assert enforce_sla_batch().handled == 0


def test_admins_change_the_sla_and_new_requests_follow_it(project, session):
    from core.errors import PermissionDeniedError
    from core.models import AuditEntry, Role
    from handoffs_app.services.sla import update_handoff_settings
    from tests.factories import make_member

    admin = make_member(project, Role.ADMIN)
    with pytest.raises(PermissionDeniedError):
        update_handoff_settings(project.pk, user=operator(project), question_due_seconds=120)
    with pytest.raises(Exception) as bad:
        update_handoff_settings(project.pk, user=admin, lease_seconds=5)
    assert bad.value.status == 422
    update_handoff_settings(project.pk, user=admin, question_due_seconds=120)
    assert AuditEntry.objects.filter(action="handoff.settings").count() == 1
    now = timezone.now()
    handoff = ask(session, kind="question")
    assert timedelta(seconds=119) < handoff.due_at - now < timedelta(seconds=121)


def test_outbox_rows_name_their_webhook(project, session):
    from handoffs_app.domain_events import webhook_event_for

    alice = operator(project)
    handoff = ask(session)
    svc.claim_handoff(handoff, user=alice)
    svc.accept(handoff, user=alice)
    svc.hand_back(handoff, user=alice)
    named = [
        (m.type, webhook_event_for(m.type, m.payload))
        for m in OutboxMessage.objects.filter(type__startswith="handoff.").order_by("id")
    ]
    assert named == [
        ("handoff.created", "handoff.created"),
        ("handoff.claimed", "handoff.claimed"),
        ("handoff.answered", "handoff.answered"),
        ("handoff.handed_back", None),
    ]


def test_a_lapsed_claim_is_claimed_at_once_before_the_job_sweeps_it(project, session):
    alice, bob = operator(project), operator(project)
    with time_machine.travel(timezone.now(), tick=False) as clock:
        handoff = ask(session, kind="takeover")
        svc.claim_handoff(handoff, user=alice)
        svc.take_over(handoff, user=alice)
        with pytest.raises(HandoffAlreadyClaimed):
            svc.claim_handoff(handoff, user=bob)  # alice's lease is live
        clock.shift(timedelta(minutes=16))
        svc.claim_handoff(handoff, user=bob)  # lapsed: lapsed first, as the job would
        assert expire_leases_batch() == 0
    handoff.refresh_from_db()
    session.refresh_from_db()
    assert (handoff.status, handoff.lease_holder_id) == ("claimed", bob.pk)
    assert session.taken_over_by == ""  # the lapse ended alice's take-over
    assert steps(session)[-3:] == ["taken_over", "lease_expired", "claimed"]
