"""The Celery app with each batch of expire_step_deadlines slowed down (tests only).

`celery -A tests.faults.slow_celery worker`: every batch sleeps SLOW_BATCH_SECONDS after it
commits, so a test can kill the worker between batches, in the middle of the job.
"""

import os
import time

import django

django.setup()

import tasks_app.tasks as jobs  # noqa: E402
from config.celery import app  # noqa: E402

_batch = jobs.expire_deadlines_batch


def _slow_batch(*, limit: int = 100):  # type: ignore[no-untyped-def]
    result = _batch(limit=limit)
    time.sleep(float(os.environ.get("SLOW_BATCH_SECONDS", "0.3")))
    return result


jobs.expire_deadlines_batch = _slow_batch  # type: ignore[assignment]

__all__ = ["app"]
