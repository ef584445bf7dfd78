"""Celery jobs of the task store: thin wrappers over services, safe to run twice."""

import logging
from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from .services.signals import expire_deadlines_batch

logger = logging.getLogger(__name__)


@shared_task(
    name="tasks_app.expire_step_deadlines",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def expire_step_deadlines(limit: int = 100, max_batches: int = 20) -> dict[str, Any]:
    """Fail the waits whose deadline has passed (timeout errors), in bounded batches.

    Runs from beat (see migration 0003). Each batch locks its tasks with SKIP LOCKED, so
    overlapping runs and several workers share the work; a crash loses nothing committed and the
    next run picks up whatever is still due.
    """
    tasks = steps = 0
    for _ in range(max_batches):
        batch = expire_deadlines_batch(limit=limit)
        tasks += batch.tasks
        steps += batch.steps
        if batch.locked < limit:
            break
    if steps:
        logger.info("expired %d waiting step(s) on %d task(s)", steps, tasks)
    return {"tasks": tasks, "steps": steps}
