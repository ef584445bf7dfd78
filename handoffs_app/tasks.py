"""Celery jobs of the handoff app: thin wrappers over services.jobs, safe to run twice."""

import logging
from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from .services.digest import send_due_digests
from .services.jobs import enforce_sla_batch, expire_leases_batch

logger = logging.getLogger(__name__)


@shared_task(
    name="handoffs_app.expire_leases",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def expire_leases(limit: int = 100, max_batches: int = 20) -> dict[str, Any]:
    """Return lapsed claims to the queue, in bounded SKIP LOCKED batches (beat: settings)."""
    handled = 0
    for _ in range(max_batches):
        batch = expire_leases_batch(limit=limit)
        handled += batch
        if batch < limit:
            break
    if handled:
        logger.info("returned %d handoff(s) with a lapsed lease", handled)
    return {"handled": handled}


@shared_task(
    name="handoffs_app.enforce_sla",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def enforce_sla(limit: int = 100, max_batches: int = 20) -> dict[str, Any]:
    """Mark overdue handoffs (priority raised once) and expire those past the limit."""
    overdue = expired = 0
    for _ in range(max_batches):
        batch = enforce_sla_batch(limit=limit)
        overdue += batch.overdue
        expired += batch.expired
        if batch.handled < limit:
            break
    if overdue or expired:
        logger.info("handoff SLA: %d overdue, %d expired", overdue, expired)
    return {"overdue": overdue, "expired": expired}


@shared_task(
    name="handoffs_app.send_digests",
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=True,
    max_retries=3,
)
def send_digests(limit: int = 20, max_batches: int = 10) -> dict[str, Any]:
    """Send the digests of waiting handoffs that are due (services.digest): a failed send is
    logged and retried next interval, never raised; a project is taken by one worker only."""
    looked_at = sent = failed = 0
    for _ in range(max_batches):
        run = send_due_digests(limit=limit)
        looked_at += run.looked_at
        sent += run.sent
        failed += run.failed
        if run.looked_at < limit:
            break
    if sent or failed:
        logger.info("handoff digests: %d sent, %d failed", sent, failed)
    return {"looked_at": looked_at, "sent": sent, "failed": failed}
