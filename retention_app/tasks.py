"""Celery jobs of retention: thin wrappers over services.jobs, safe to run twice."""

import logging
from typing import Any
from uuid import UUID

from celery import shared_task
from django.db import InterfaceError, OperationalError

from .models import ErasureStatus, RunJob
from .services.erasure import BATCH_EVENTS, run_erasure
from .services.jobs import run_job, run_job_for_project

logger = logging.getLogger(__name__)
# Seconds of batches per run of erase_subject, well inside CELERY_TASK_SOFT_TIME_LIMIT.
ERASURE_TIME_BUDGET = 240.0


def _summary(runs: list[Any]) -> dict[str, Any]:
    return {
        "runs": [r.pk for r in runs],
        "examined": sum(r.examined for r in runs),
        "errors": sum(len(r.errors) for r in runs),
    }


def _queued(
    job: str,
    project_ids: list[int] | None,
    trigger: str,
    run_id: int,
    limit: int | None,
    max_batches: int | None,
) -> dict[str, Any]:
    """A run the page queued (services.jobs.request_runs): one project, under that run."""
    if not project_ids or len(project_ids) != 1:
        raise ValueError("a queued run names exactly one project")
    run = run_job_for_project(
        job, project_ids[0], trigger=trigger, run_id=run_id, limit=limit, max_batches=max_batches
    )
    return _summary([run] if run is not None else [])


@shared_task(
    name="retention_app.enforce_retention",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def enforce_retention(
    limit: int | None = None,
    max_batches: int | None = None,
    project_ids: list[int] | None = None,
    trigger: str = "beat",
    run_id: int | None = None,
) -> dict[str, Any]:
    """Close idle and long-paused sessions, archive closed ones, delete expired archived ones."""
    return _run_or_take_queued(RunJob.ENFORCE, limit, max_batches, project_ids, trigger, run_id)


@shared_task(
    name="retention_app.compact_sessions",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def compact_sessions(
    limit: int | None = None,
    max_batches: int | None = None,
    project_ids: list[int] | None = None,
    trigger: str = "beat",
    run_id: int | None = None,
) -> dict[str, Any]:
    """Compact the transient events of closed and archived sessions past compact_after."""
    return _run_or_take_queued(RunJob.COMPACT, limit, max_batches, project_ids, trigger, run_id)


def _run_or_take_queued(
    job: RunJob,
    limit: int | None,
    max_batches: int | None,
    project_ids: list[int] | None,
    trigger: str,
    run_id: int | None,
) -> dict[str, Any]:
    """The body both jobs share: take up a run queued from the page, or run beat's own."""
    if run_id is not None:
        return _queued(job, project_ids, trigger, run_id, limit, max_batches)
    runs = run_job(
        job, limit=limit, max_batches=max_batches, project_ids=project_ids, trigger=trigger
    )
    return _summary(runs)


@shared_task(
    name="retention_app.erase_subject",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
    bind=True,
)
def erase_subject(
    self: Any, erasure_id: str, batch_events: int | None = None, max_batches: int | None = None
) -> dict[str, Any]:
    """Erase a data subject's sessions in batches, then seal the receipt (services.erasure).
    A large subject is done over several runs of this task, each within the time limit: one
    that stops with work left queues the next (a killed one is redelivered: acks_late)."""
    erasure = run_erasure(
        UUID(erasure_id),
        batch_events=batch_events or BATCH_EVENTS,
        max_batches=max_batches,
        time_budget=None if max_batches else ERASURE_TIME_BUDGET,
    )
    if erasure is None:
        return {"erasure": erasure_id, "status": "missing"}
    if erasure.status == ErasureStatus.RUNNING and not max_batches:
        # The rest on the queue this run came from (a worker of that queue takes it).
        queue = (self.request.delivery_info or {}).get("routing_key")
        self.apply_async(kwargs={"erasure_id": erasure_id}, queue=queue or None)
    return {"erasure": erasure_id, "status": erasure.status, "counts": erasure.counts}
