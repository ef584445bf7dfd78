"""kill -9 of a Celery worker in the middle of a POST loses no delivery (invariant 9): the
lease it took runs out and the next worker sends the delivery again, under the same id, so
the receiver processes it once."""

import os
import signal
import time
import uuid

import psutil
import pytest
from django.test import override_settings

from core.models import DeliveryStatus, WebhookDelivery
from tests.servers import celery_processes, wait_until

from .conftest import endpoint_for, paused_session
from .receiver import receiver

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.requires_redis("webhook delivery under a worker crash"),
]

LEASE = 4  # seconds (the floor: twice the 1 s timeout plus 5 s, so 7 s in effect)


def test_a_worker_killed_mid_post_loses_nothing_and_the_next_one_delivers(project, tmp_path):
    queue = f"sb-webhooks-kill-{uuid.uuid4().hex[:12]}"
    env = {
        "SWITCHBOARD_WEBHOOK_QUEUE": queue,
        "SWITCHBOARD_WEBHOOK_TIMEOUT": "1",
        "SWITCHBOARD_WEBHOOK_LEASE_SECONDS": str(LEASE),
        "SWITCHBOARD_WEBHOOK_POLL_SECONDS": "1",
    }
    # The first request is held: the worker is inside the POST (it would time out after 1 s)
    # when it is killed, a few milliseconds after the request arrived.
    with receiver(delay=3.0) as recv, override_settings(SWITCHBOARD_WEBHOOK_QUEUE=queue):
        endpoint_for(project, recv.url)
        with celery_processes(queue, tmp_path, **env) as log:
            wait_until(lambda: "ready." in log.read_text(), log)
            paused_session(project)  # commits, kicks the job
            recv.wait_for(1)  # the worker's POST has arrived and is held
            (worker,) = [
                p
                for p in psutil.Process().children(recursive=True)
                if queue in " ".join(p.cmdline()) and "worker" in p.cmdline()
            ]
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(10)
        killed_at = time.time()
        delivery = WebhookDelivery.objects.get()
        # Leased, counted as attempt 1, nothing recorded: the worker died before it could.
        assert delivery.status == DeliveryStatus.PENDING and delivery.attempts == 1
        assert delivery.leased_until is not None and delivery.attempt_log.count() == 0

        recv.delay = 0.0
        (tmp_path / "next").mkdir()
        with celery_processes(queue, tmp_path / "next", beat=True, **env) as log:
            wait_until(
                lambda: WebhookDelivery.objects.get().status == DeliveryStatus.SUCCEEDED, log
            )
        took = time.time() - killed_at
    delivery.refresh_from_db()
    ids = [r.headers["switchboard-delivery"] for r in recv.requests]
    assert ids == [str(delivery.pk)] * 2  # sent again, under the same id
    assert list(recv.processed) == [str(delivery.pk)]  # and processed once
    assert delivery.attempts == 2
    assert [(a.number, a.response_code) for a in delivery.attempt_log.all()] == [(2, 200)]
    print(f"\nredelivered {took:.1f} s after the kill (lease {max(LEASE, 7)} s, beat every 1 s)")
