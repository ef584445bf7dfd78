"""Delivering to a real HTTP receiver on the loopback: signed, retried with backoff, given up
after the limit, every attempt recorded, redelivered under the same id.

`deliver_due` runs in this process (the Celery job is a thin loop around it; test_worker.py
runs it in a real worker). "Time passes" by moving a delivery's next_attempt_at to now.
"""

import json
import uuid
from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from core.actors import Actor
from core.errors import Conflict
from core.models import (
    AuditEntry,
    DeliveryStatus,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from core.services.webhooks import deliver_due, redeliver
from core.storage import claim_due_deliveries
from core.webhooks import TargetRefused, check_target, verify_signature
from tests.servers import free_port

from .conftest import endpoint_for, paused_session, resolving
from .receiver import receiver

pytestmark = pytest.mark.django_db

BACKOFF = override_settings(
    SWITCHBOARD_WEBHOOK_BACKOFF_MS=1000,
    SWITCHBOARD_WEBHOOK_BACKOFF_MAX_MS=60_000,
    SWITCHBOARD_WEBHOOK_MAX_ATTEMPTS=4,
)


def make_due(delivery):
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())


def test_it_posts_a_signed_envelope_the_receiver_can_verify(project, recv):
    endpoint, secret = endpoint_for(project, recv.url)
    session = paused_session(project)
    delivery = WebhookDelivery.objects.get()

    summary = deliver_due()

    assert summary.claimed == summary.succeeded == 1
    (request,) = recv.requests
    assert request.path == "/hooks"
    assert request.headers["content-type"] == "application/json"
    assert verify_signature(secret, request.headers["switchboard-signature"], request.body)
    assert not verify_signature(
        "whsec_wrong", request.headers["switchboard-signature"], request.body
    )
    body = request.json
    assert body["id"] == request.headers["switchboard-delivery"] == str(delivery.pk)
    assert body["type"] == "session.paused"
    assert body["data"]["session_id"] == str(session.pk)
    assert body["data"]["from"] == "open" and body["data"]["to"] == "paused"
    assert body["data"]["reason"] == "ask a human"
    assert "project_id" not in body["data"]
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED
    assert delivery.attempts == 1 and delivery.last_response_code == 200
    assert delivery.next_attempt_at is None and delivery.leased_until is None
    (attempt,) = WebhookAttempt.objects.filter(delivery=delivery)
    assert (attempt.number, attempt.response_code, attempt.succeeded) == (1, 200, True)
    # Nothing is left to send.
    assert deliver_due().claimed == 0


@BACKOFF
def test_a_500_is_retried_with_growing_jittered_backoff_then_given_up_after_the_limit(project):
    with receiver(default=500) as recv:
        endpoint_for(project, recv.url)
        paused_session(project)
        delivery = WebhookDelivery.objects.get()
        delays = []
        for attempt in range(1, 5):
            summary = deliver_due()
            assert summary.claimed == 1, attempt
            delivery.refresh_from_db()
            assert delivery.attempts == attempt
            assert delivery.last_response_code == 500
            if attempt < 4:
                assert delivery.status == DeliveryStatus.PENDING
                delay = (delivery.next_attempt_at - delivery.last_attempt_at).total_seconds()
                step = 2 ** (attempt - 1)  # 1 s, 2 s, 4 s
                # Equal jitter: within the upper half of the step (plus the POST's own time).
                assert step / 2 <= delay <= step + 0.5, (attempt, delay)
                delays.append(delay)
                assert deliver_due().claimed == 0  # not due yet
                make_due(delivery)
        assert delays == sorted(delays)
        assert delivery.status == DeliveryStatus.FAILED
        assert delivery.next_attempt_at is None
        assert "Gave up after 4 attempts" in delivery.last_error
        make_due(delivery)
        assert deliver_due().claimed == 0  # failed for good: never taken again
        # Every attempt reached the receiver under the same id, and every one is recorded.
        assert len(recv.requests) == 4
        assert {r.headers["switchboard-delivery"] for r in recv.requests} == {str(delivery.pk)}
        log = list(WebhookAttempt.objects.filter(delivery=delivery))
        assert [a.number for a in log] == [1, 2, 3, 4]
        assert all(a.response_code == 500 and not a.succeeded for a in log)


@BACKOFF
def test_a_retry_that_succeeds_ends_the_series(project):
    with receiver([503, 500]) as recv:
        endpoint_for(project, recv.url)
        paused_session(project)
        delivery = WebhookDelivery.objects.get()
        for _ in range(3):
            deliver_due()
            make_due(delivery)
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.SUCCEEDED
        assert [a.response_code for a in WebhookAttempt.objects.filter(delivery=delivery)] == [
            503,
            500,
            200,
        ]
        assert len(recv.processed) == 1


@pytest.mark.parametrize("code", [400, 401, 404, 410, 422])
def test_a_4xx_fails_at_once_without_retry(project, code):
    with receiver(default=code) as recv:
        endpoint_for(project, recv.url)
        paused_session(project)
        deliver_due()
        delivery = WebhookDelivery.objects.get()
        assert delivery.status == DeliveryStatus.FAILED
        assert delivery.attempts == 1
        assert delivery.last_error == f"The receiver refused it with {code}; not retried."
        make_due(delivery)
        assert deliver_due().claimed == 0
        assert len(recv.requests) == 1


@pytest.mark.parametrize("code", [408, 429])
def test_408_and_429_are_retried(project, code):
    with receiver([code]) as recv:
        endpoint_for(project, recv.url)
        paused_session(project)
        deliver_due()
        delivery = WebhookDelivery.objects.get()
        assert delivery.status == DeliveryStatus.PENDING
        assert delivery.next_attempt_at > timezone.now()
        make_due(delivery)
        deliver_due()
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.SUCCEEDED and len(recv.requests) == 2


@BACKOFF
def test_a_refused_connection_is_retried(project):
    endpoint_for(project, f"http://127.0.0.1:{free_port()}/nobody-listens")
    paused_session(project)
    deliver_due()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.PENDING
    assert delivery.last_error == "Could not connect to the receiver."
    assert delivery.last_response_code is None
    assert WebhookAttempt.objects.get(delivery=delivery).error == delivery.last_error


@BACKOFF
@override_settings(SWITCHBOARD_WEBHOOK_TIMEOUT=0.5)
def test_a_receiver_too_slow_to_answer_times_out_and_is_retried(project):
    with receiver(delay=1.5) as recv:
        endpoint_for(project, recv.url)
        paused_session(project)
        deliver_due()
        delivery = WebhookDelivery.objects.get()
        assert delivery.status == DeliveryStatus.PENDING
        assert delivery.last_error == "The receiver did not answer in time."
        attempt = WebhookAttempt.objects.get(delivery=delivery)
        assert 400 <= attempt.duration_ms < 1400


def test_a_redelivery_keeps_the_delivery_id_so_the_receiver_deduplicates(project, recv):
    endpoint, secret = endpoint_for(project, recv.url)
    paused_session(project)
    deliver_due()
    delivery = WebhookDelivery.objects.get()

    attempt = redeliver(delivery, actor=Actor.system("tests"))

    assert attempt.number == 2 and attempt.redelivery and attempt.succeeded
    first, second = recv.wait_for(2)
    assert first.headers["switchboard-delivery"] == second.headers["switchboard-delivery"]
    assert first.body == second.body  # the same envelope, id and created time included
    assert verify_signature(secret, second.headers["switchboard-signature"], second.body)
    assert list(recv.processed) == [str(delivery.pk)]  # the receiver processed it once
    delivery.refresh_from_db()
    assert delivery.status == DeliveryStatus.SUCCEEDED and delivery.attempts == 2
    audit = AuditEntry.objects.get(action="webhook.redelivered")
    assert audit.target_id == str(delivery.pk) and audit.detail["attempt"] == 2


def test_a_redelivery_of_a_failed_delivery_that_succeeds_marks_it_succeeded(project):
    with receiver([400]) as recv:
        endpoint_for(project, recv.url)
        paused_session(project)
        deliver_due()
        delivery = WebhookDelivery.objects.get()
        assert delivery.status == DeliveryStatus.FAILED
        redeliver(delivery, actor=Actor.system("tests"))
        delivery.refresh_from_db()
        assert delivery.status == DeliveryStatus.SUCCEEDED
        assert [(a.response_code, a.redelivery) for a in delivery.attempt_log.all()] == [
            (400, False),
            (200, True),
        ]
        assert len({r.headers["switchboard-delivery"] for r in recv.requests}) == 1


def test_a_redelivery_while_a_worker_sends_it_is_refused(project, recv):
    endpoint_for(project, recv.url)
    paused_session(project)
    now = timezone.now()
    (claimed,) = claim_due_deliveries(now=now, lease_until=now + timedelta(minutes=1), limit=10)
    delivery = WebhookDelivery.objects.get()
    with pytest.raises(Conflict, match="being sent right now"):
        redeliver(delivery, actor=Actor.system("tests"))
    assert recv.requests == []


def test_a_sender_whose_lease_ran_out_records_nothing(project, recv):
    """A worker that stalled past its lease, while another took the row, cannot overwrite it."""
    from core.services.webhooks import _record
    from core.webhooks import AttemptResult

    endpoint_for(project, recv.url)
    paused_session(project)
    past = timezone.now() - timedelta(minutes=5)
    (stale,) = claim_due_deliveries(now=timezone.now(), lease_until=past, limit=10)
    assert deliver_due().claimed == 1  # the lease ran out: another sender takes it, succeeds
    _record(stale, AttemptResult(False, True, 500, "late", 10), started_at=past)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.SUCCEEDED and delivery.attempts == 2
    assert [a.number for a in delivery.attempt_log.all()] == [2]


def test_a_disabled_endpoint_keeps_its_deliveries_until_enabled(project, recv):
    from core.services.webhooks import set_endpoint_active

    endpoint, _ = endpoint_for(project, recv.url)
    paused_session(project)
    set_endpoint_active(endpoint, False, actor=Actor.system("tests"))
    assert deliver_due().claimed == 0
    paused_session(project)  # no new delivery while disabled
    assert WebhookDelivery.objects.count() == 1
    set_endpoint_active(endpoint, True, actor=Actor.system("tests"))
    assert deliver_due().succeeded == 1


@override_settings(SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS=False)
def test_a_name_resolving_to_a_private_address_is_refused_at_delivery(project, monkeypatch):
    resolving(monkeypatch, {"hooks.example.com": "93.184.216.34"})
    endpoint_for(project, "https://hooks.example.com/in")
    # As if the name had been pointed at the loopback after the endpoint was created.
    resolving(monkeypatch, {"hooks.example.com": "127.0.0.1"})
    paused_session(project)
    deliver_due()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.FAILED
    assert delivery.last_error == "The host name points to a private or reserved address."


@pytest.mark.parametrize(
    "address", ["http://0x7f000001:9/in", "http://localhost.:9/in", "http://%31%32%37.0.0.1:9/in"]
)
@override_settings(SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS=False)
def test_an_endpoint_saved_before_the_check_is_refused_at_delivery_by_the_same_check(
    project, address
):
    endpoint, _ = endpoint_for(project, "https://93.184.216.34/in")
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(url=address)
    paused_session(project)
    deliver_due()
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == 1
    with pytest.raises(TargetRefused) as refused:
        check_target(address, allow_private=False)
    assert delivery.last_error == str(refused.value)


def test_deliveries_of_many_endpoints_go_out_side_by_side(project):
    with receiver(delay=0.3) as recv:
        for _ in range(8):
            endpoint_for(project, recv.url)
        paused_session(project)
        started = timezone.now()
        summary = deliver_due()
        took = (timezone.now() - started).total_seconds()
        assert summary.succeeded == 8
        assert took < 8 * 0.3  # not one after the other
        assert len({r.json["id"] for r in recv.requests}) == 8
        assert all(uuid.UUID(r.json["id"]) for r in recv.requests)
        assert json.loads(recv.requests[0].body)["type"] == "session.paused"
