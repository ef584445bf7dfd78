"""The lease job on a real Celery worker fired by a real beat (DatabaseScheduler)."""

import uuid

import pytest
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from handoffs_app.models import Handoff, HandoffSettings
from handoffs_app.services import handoffs as svc
from tests.factories import make_session
from tests.servers import celery_processes, wait_until

from .helpers import ask, operator, steps

pytestmark = [pytest.mark.slow, pytest.mark.requires_redis("Celery broker")]


def test_beat_returns_a_lapsed_claim_to_the_queue(transactional_db, project, tmp_path):
    queue = f"sb-handoffs-test-{uuid.uuid4().hex[:12]}"
    PeriodicTask.objects.update(enabled=False)
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period="seconds")
    PeriodicTask.objects.create(
        name=f"leases for {queue}",
        task="handoffs_app.expire_leases",
        interval=every_second,
        queue=queue,
        kwargs="{}",
    )
    HandoffSettings.objects.create(project=project, lease_seconds=3)
    session = make_session(project)
    handoff = ask(session)
    kept = ask(make_session(project))
    alice = operator(project)
    svc.claim_handoff(handoff, user=alice)
    HandoffSettings.objects.filter(project=project).update(lease_seconds=3600)
    svc.claim_handoff(kept, user=alice)
    with celery_processes(queue, tmp_path, beat=True) as log:
        wait_until(lambda: Handoff.objects.get(pk=handoff.pk).status == "open", log)
    handoff.refresh_from_db()
    assert handoff.lease_holder_id is None
    assert steps(session) == ["requested", "claimed", "lease_expired"]
    kept.refresh_from_db()
    assert kept.status == "claimed"
