"""Webhooks through a real Celery worker and beat (tests/servers.py) to a real receiver:
a lifecycle change committed here reaches the receiver through the on-commit kick (a worker
with no beat, so nothing else can send it), a failed attempt is retried by the beat-driven job,
and the latency commit → receiver is printed.
"""

import statistics
import time
import uuid

import pytest
from django.db import transaction
from django.test import override_settings

from core.actors import Actor
from core.models import DeliveryStatus, WebhookDelivery
from core.services.webhooks import deliver_due
from core.webhooks import verify_signature
from sessions_app.services.lifecycle import pause_session
from tests.factories import make_session
from tests.servers import celery_processes, wait_until

from .conftest import endpoint_for
from .receiver import receiver

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.requires_redis("webhook delivery through a real worker"),
]
ACTOR = Actor.system("tests")
SAMPLES = 40


def pause_and_time(session) -> float:
    """Pause `session`; returns time.time() right after its transaction committed."""
    committed: list[float] = []
    with transaction.atomic():
        # Registered first, so it runs first after COMMIT (before the delivery job's kick).
        transaction.on_commit(lambda: committed.append(time.time()))
        pause_session(session, actor=ACTOR, reason="latency probe")
    return committed[0]


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def test_a_real_worker_delivers_on_commit(project, tmp_path):
    queue = f"sb-webhooks-test-{uuid.uuid4().hex[:12]}"
    # No beat: the job only runs when the commit kicks it, so a delivery that arrives was
    # kicked (with beat's poll every second, an unkicked one arrived too, a second later).
    with (
        receiver() as recv,
        override_settings(SWITCHBOARD_WEBHOOK_QUEUE=queue),
        celery_processes(queue, tmp_path, SWITCHBOARD_WEBHOOK_QUEUE=queue) as log,
    ):
        _, secret = endpoint_for(project, recv.url)
        wait_until(lambda: "ready." in log.read_text(), log)

        def latency(n: int, *, in_process: bool) -> float:
            """Pause a new session; ms from its commit until the receiver had the request."""
            session = make_session(project)
            committed = pause_and_time(session)
            if in_process:
                deliver_due()
            (request,) = [
                r for r in recv.wait_for(n) if r.json["data"]["session_id"] == str(session.pk)
            ]
            assert verify_signature(secret, request.headers["switchboard-signature"], request.body)
            return (request.at - committed) * 1000

        # 0. Baseline, same run: the batch run in this process right after the commit (no
        # broker, no worker hop; the worker's kicked run finds the row already sent).
        baseline = [latency(n + 1, in_process=True) for n in range(SAMPLES)]
        # 1. Through the worker: one pause at a time, commit → kick → worker → receiver.
        latencies = [latency(SAMPLES + n + 1, in_process=False) for n in range(SAMPLES)]
        worker_p50, base_p50 = statistics.median(latencies), statistics.median(baseline)
        print(
            f"\nwebhook latency commit → receiver through a real worker, {SAMPLES} deliveries:"
            f" p50 {worker_p50:.1f} ms, p95 {pct(latencies, 95):.1f} ms,"
            f" max {max(latencies):.1f} ms; baseline (the batch in this process, no worker):"
            f" p50 {base_p50:.1f} ms, p95 {pct(baseline, 95):.1f} ms;"
            f" p50 ratio ×{worker_p50 / base_p50:.1f}"
        )
        wait_until(
            lambda: (
                WebhookDelivery.objects.filter(status=DeliveryStatus.SUCCEEDED).count()
                == 2 * SAMPLES
            ),
            log,
        )
        assert len(recv.requests) == 2 * SAMPLES  # each once, whichever sender took it
    assert "Task core.deliver_webhooks" in log.read_text()


def test_beat_retries_a_failed_delivery(project, tmp_path):
    queue = f"sb-webhooks-test-{uuid.uuid4().hex[:12]}"
    with (
        receiver([500, 503]) as recv,
        override_settings(SWITCHBOARD_WEBHOOK_QUEUE=queue),
        celery_processes(
            queue,
            tmp_path,
            beat=True,
            SWITCHBOARD_WEBHOOK_QUEUE=queue,
            SWITCHBOARD_WEBHOOK_POLL_SECONDS="1",
            SWITCHBOARD_WEBHOOK_BACKOFF_MS="300",
            SWITCHBOARD_WEBHOOK_MAX_ATTEMPTS="5",
        ) as log,
    ):
        endpoint_for(project, recv.url)
        wait_until(lambda: "ready." in log.read_text(), log)
        # The receiver fails twice; the job (kicked, then beat) tries again.
        session = make_session(project)
        committed = pause_and_time(session)
        wait_until(
            lambda: WebhookDelivery.objects.filter(
                payload__session_id=str(session.pk), status=DeliveryStatus.SUCCEEDED
            ).exists(),
            log,
        )
        delivery = WebhookDelivery.objects.get(payload__session_id=str(session.pk))
        attempts = list(delivery.attempt_log.all())
        assert [a.response_code for a in attempts] == [500, 503, 200]
        mine = [r for r in recv.requests if r.json["data"]["session_id"] == str(session.pk)]
        assert len(mine) == 3 and len({r.headers["switchboard-delivery"] for r in mine}) == 1
        gaps = [(b.at - a.at) for a, b in zip(mine, mine[1:], strict=False)]
        print(
            f"\nretried twice through beat: delivered {(mine[-1].at - committed):.2f} s after"
            f" commit; gaps between attempts {', '.join(f'{g:.2f} s' for g in gaps)}"
        )
        # Backoff: at least half a step (0.15 s, then 0.3 s) between attempts.
        assert gaps[0] >= 0.15 and gaps[1] >= 0.3
