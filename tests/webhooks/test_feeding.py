"""Lifecycle changes feed webhook deliveries in the change's own transaction."""

import pytest
from django.db import transaction

from core.actors import Actor
from core.domain_events import DomainEvent, publish
from core.models import OutboxMessage, WebhookDelivery
from core.services.webhooks import set_endpoint_active
from sessions_app.services.lifecycle import close_session, pause_session, resume_session
from tests.factories import make_project, make_session

from .conftest import endpoint_for

pytestmark = pytest.mark.django_db
ACTOR = Actor.system("tests")
ALL = ("session.paused", "session.resumed", "session.closed")


def test_pause_resume_close_each_produce_one_delivery_per_subscribed_endpoint(project):
    everything, _ = endpoint_for(project, "https://a.example.com/h", ALL)
    closes_only, _ = endpoint_for(project, "https://b.example.com/h", ["session.closed"])
    disabled, _ = endpoint_for(project, "https://c.example.com/h", ALL)
    set_endpoint_active(disabled, False, actor=ACTOR)
    elsewhere, _ = endpoint_for(make_project(), "https://d.example.com/h", ALL)
    session = make_session(project)  # opening is not a webhook event

    pause_session(session, actor=ACTOR)
    resume_session(session, actor=ACTOR)
    close_session(session, actor=ACTOR, reason="done")

    rows = sorted(
        WebhookDelivery.objects.values_list("endpoint_id", "event"), key=lambda r: (r[1], r[0])
    )
    assert rows == [
        (everything.pk, "session.closed"),
        (closes_only.pk, "session.closed"),
        (everything.pk, "session.paused"),
        (everything.pk, "session.resumed"),
    ]
    closed = WebhookDelivery.objects.filter(event="session.closed").first()
    assert closed.payload == {
        "session_id": str(session.pk),
        "from": "resumed",
        "to": "closed",
        "reason": "done",
        "actor": "tests",
    }
    assert closed.status == "pending" and closed.attempts == 0
    assert closed.next_attempt_at is not None and closed.project_id == project.pk


def test_a_rolled_back_change_leaves_no_delivery(project):
    endpoint_for(project, "https://a.example.com/h")
    session = make_session(project)
    with pytest.raises(RuntimeError), transaction.atomic():
        pause_session(session, actor=ACTOR)
        assert WebhookDelivery.objects.count() == 1  # inside: the row is there
        raise RuntimeError("the caller's transaction fails after the change")
    assert WebhookDelivery.objects.count() == 0
    session.refresh_from_db()
    assert session.status == "open"


def test_the_delivery_job_is_kicked_only_after_commit_and_only_with_deliveries(
    project, django_capture_on_commit_callbacks
):
    from core.domain_events import kick_delivery_job

    session = make_session(project)
    with django_capture_on_commit_callbacks() as callbacks:
        pause_session(session, actor=ACTOR)
    assert kick_delivery_job not in callbacks  # no endpoint: no kick

    endpoint_for(project, "https://a.example.com/h", ["session.resumed"])
    with django_capture_on_commit_callbacks() as callbacks:
        resume_session(session, actor=ACTOR)
    assert callbacks.count(kick_delivery_job) == 1


def test_the_no_endpoint_case_costs_one_query(project, django_assert_num_queries):
    """The lifecycle hot path pays one INSERT … SELECT that finds no endpoint, nothing more."""
    session = make_session(project)
    pause_session(session, actor=ACTOR)  # warm up
    resume_session(session, actor=ACTOR)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        pause_session(session, actor=ACTOR)
    webhook_sql = [q["sql"] for q in queries if "webhookdelivery" in q["sql"]]
    assert len(webhook_sql) == 1 and webhook_sql[0].startswith("INSERT INTO")
    assert WebhookDelivery.objects.count() == 0


def test_a_live_only_event_cannot_carry_a_webhook_name(project):
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Loud(DomainEvent):
        type = "test.loud"

        def groups(self):
            return []

        def webhook_event(self):
            return "session.paused"

    with pytest.raises(RuntimeError, match="not outboxed"), transaction.atomic():
        publish(Loud(project_id=project.pk))
    assert OutboxMessage.objects.count() == 0


def test_an_outboxed_event_with_a_webhook_name_is_delivered_with_its_data(project):
    """The hook the handoff events use: any outboxed DomainEvent naming a webhook event."""
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class HandoffCreated(DomainEvent):
        type = "handoff.created"
        outboxed = True
        handoff_id: str = ""

        def groups(self):
            return []

        def webhook_event(self):
            return "handoff.created"

    endpoint_for(project, "https://a.example.com/h", ["handoff.created"])
    with transaction.atomic():
        publish(HandoffCreated(project_id=project.pk, handoff_id="h-1"))
    delivery = WebhookDelivery.objects.get()
    assert (delivery.event, delivery.payload) == ("handoff.created", {"handoff_id": "h-1"})
