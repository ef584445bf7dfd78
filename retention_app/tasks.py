"""Celery jobs of retention: thin wrappers over services.jobs, safe to run twice."""

import logging
from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from .models import RunJob
from .services.jobs import run_job

logger = logging.getLogger(__name__)


def _summary(runs: list[Any]) -> dict[str, Any]:
    return {
        "runs": [r.pk for r in runs],
        "examined": sum(r.examined for r in runs),
        "errors": sum(len(r.errors) for r in runs),
    }


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
) -> dict[str, Any]:
    """Close idle and long-paused sessions, archive closed ones, delete expired archived ones."""
    runs = run_job(
        RunJob.ENFORCE,
        limit=limit,
        max_batches=max_batches,
        project_ids=project_ids,
        trigger=trigger,
    )
    return _summary(runs)


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
) -> dict[str, Any]:
    """Compact the transient events of closed and archived sessions past compact_after."""
    runs = run_job(
        RunJob.COMPACT,
        limit=limit,
        max_batches=max_batches,
        project_ids=project_ids,
        trigger=trigger,
    )
    return _summary(runs)
