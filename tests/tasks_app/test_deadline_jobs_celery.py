"""expire_step_deadlines on a real Celery worker, and fired by a real beat (DatabaseScheduler).

Each test gets its own queue name so a worker started here never takes (or is given) jobs of
other suites sharing this Redis.
"""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from tasks_app.models import Step
from tasks_app.services.steps import update_step
from tests.factories import make_task
from tests.servers import celery_processes, wait_until

from .helpers import TESTER

pytestmark = [pytest.mark.slow]


def waiting_review(project, deadline):
    task = make_task(project)
    update_step(
        task,
        "review",
        status="waiting",
        attempt=1,
        actor=TESTER,
        waiting_on="review_decision",
        wait_deadline=deadline,
    )
    return task


def review_of(task) -> Step:
    return Step.objects.get(task=task, key="review")


def test_it_expires_due_waits_on_a_real_worker(transactional_db, project, tmp_path):
    from config.celery import app

    queue = f"sb-tasks-test-{uuid.uuid4().hex[:12]}"
    due = waiting_review(project, timezone.now() - timedelta(seconds=1))
    later = waiting_review(project, timezone.now() + timedelta(hours=1))
    with celery_processes(queue, tmp_path, beat=False) as log:
        # Send once the worker has declared its queue: the Redis transport drops a message
        # published to an exchange nothing is bound to yet.
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task("tasks_app.expire_step_deadlines", kwargs={"limit": 10}, queue=queue)
        wait_until(lambda: review_of(due).status != "waiting", log)
    step = review_of(due)
    assert (step.status, step.attempts, step.last_error["type"]) == ("pending", 1, "timeout")
    assert review_of(later).status == "waiting"


def test_it_expires_a_wait_when_beat_fires_after_the_deadline(transactional_db, project, tmp_path):
    queue = f"sb-tasks-test-{uuid.uuid4().hex[:12]}"
    # Only this test's schedule runs, every second, on this test's queue.
    PeriodicTask.objects.update(enabled=False)
    every_second, _ = IntervalSchedule.objects.get_or_create(every=1, period="seconds")
    PeriodicTask.objects.create(
        name=f"expire for {queue}",
        task="tasks_app.expire_step_deadlines",
        interval=every_second,
        queue=queue,
        kwargs="{}",
    )
    deadline = timezone.now() + timedelta(seconds=3)
    soon = waiting_review(project, deadline)
    later = waiting_review(project, timezone.now() + timedelta(hours=1))
    with celery_processes(queue, tmp_path, beat=True) as log:
        wait_until(lambda: review_of(soon).status != "waiting", log)
    step = review_of(soon)
    assert step.last_error["type"] == "timeout"
    assert step.last_error["detail"]["deadline"] == deadline.isoformat()
    assert step.updated_at >= deadline  # not a moment before the deadline
    assert review_of(later).status == "waiting"
