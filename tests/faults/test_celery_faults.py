"""kill -9 of a Celery worker in the middle of expire_step_deadlines loses nothing.

The job fails due waits in committed batches; the worker (its batches slowed down by
tests/faults/slow_celery.py so the kill lands between them) is SIGKILLed once some batches are
done, and a new worker's run finishes the rest: every due wait expired exactly once (one timeout
in its history, attempts 1), and the waits not yet due untouched.
"""

import os
import signal
import uuid
from datetime import timedelta

import psutil
import pytest
from django.utils import timezone

from tasks_app.models import Step, TaskHistory
from tests.servers import celery_processes, wait_until
from tests.tasks_app.test_deadline_jobs_celery import waiting_review

pytestmark = [pytest.mark.requires_redis("Celery under faults"), pytest.mark.slow]

DUE = 60
BATCH = 5


def expired(tasks) -> int:
    return Step.objects.filter(task__in=tasks, key="review").exclude(status="waiting").count()


def test_a_worker_killed_mid_job_loses_nothing_and_the_next_run_finishes(
    transactional_db, project, tmp_path
):
    from config.celery import app

    due = [waiting_review(project, timezone.now() - timedelta(seconds=1)) for _ in range(DUE)]
    later = waiting_review(project, timezone.now() + timedelta(hours=1))
    queue = f"sb-faults-{uuid.uuid4().hex[:12]}"
    send = {"kwargs": {"limit": BATCH, "max_batches": 100}, "queue": queue}

    with celery_processes(queue, tmp_path, app="tests.faults.slow_celery") as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task("tasks_app.expire_step_deadlines", **send)
        wait_until(lambda: expired(due) >= 2 * BATCH, log)
        (worker,) = [
            p
            for p in psutil.Process().children(recursive=True)
            if queue in " ".join(p.cmdline()) and "worker" in p.cmdline()
        ]
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
    done_before = expired(due)
    print(f"\nexpired when the worker was killed: {done_before} of {DUE}")
    assert done_before < DUE, "the job finished before the kill: slow it down further"

    (tmp_path / "next").mkdir()
    with celery_processes(queue, tmp_path / "next") as log:
        wait_until(lambda: "ready." in log.read_text(), log)
        app.send_task("tasks_app.expire_step_deadlines", **send)
        wait_until(lambda: expired(due) == DUE, log)

    steps = Step.objects.filter(task__in=due, key="review")
    assert {(s.status, s.attempts, s.last_error["type"]) for s in steps} == {
        ("pending", 1, "timeout")
    }
    timeouts = TaskHistory.objects.filter(task__in=due, error__type="timeout")
    assert timeouts.count() == DUE
    assert set(timeouts.values_list("task_id", flat=True)) == {t.pk for t in due}
    assert Step.objects.get(task=later, key="review").status == "waiting"
