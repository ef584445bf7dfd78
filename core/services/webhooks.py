"""Webhook endpoints and deliveries: managing endpoints, fanning events out to deliveries in
the change's transaction, sending due deliveries in batches, redelivering.

How a delivery travels: `core.domain_events.publish` calls its `enqueue_deliveries` for an
outboxed event with a webhook name, which inserts one pending row per subscribed endpoint in
the change's own transaction (no delivery for a change that rolled back) and, after commit,
kicks the `core.deliver_webhooks` job (beat also runs it every few seconds). The job leases due
rows (`claim_due_deliveries`, SKIP LOCKED, a short transaction), POSTs them outside any
transaction, then records each attempt; a failure is rescheduled with exponential backoff and
jitter until SWITCHBOARD_WEBHOOK_MAX_ATTEMPTS. A worker that dies mid-send leaves its lease to
run out, and the row is sent again: delivery is at least once, and receivers de-duplicate by
the delivery id.
"""

import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from core.actors import Actor
from core.errors import Conflict, InvalidInput, NotFound
from core.models import (
    DeliveryStatus,
    Project,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
)
from core.services.audit import record_audit
from core.storage import (
    ClaimedDelivery,
    claim_delivery,
    claim_due_deliveries,
)
from core.webhooks import (
    EVENTS,
    AttemptResult,
    TargetRefused,
    backoff_seconds,
    check_target,
    envelope,
)
from core.webhooks import new_secret as _new_secret
from core.webhooks import send as _send

BATCH = 50
# POSTs of one batch run side by side, so one slow receiver does not hold up the others.
SENDERS = 8
# Keep finished deliveries (and their attempt logs) this long for the dashboard.
DELIVERY_KEEP = timedelta(days=30)


def _lease() -> timedelta:
    # Longer than any POST can take (the timeout bounds connect and read each), with room for
    # recording it; a shorter setting would let a second sender start while the first waits.
    floor = settings.SWITCHBOARD_WEBHOOK_TIMEOUT * 2 + 5
    return timedelta(seconds=max(settings.SWITCHBOARD_WEBHOOK_LEASE_SECONDS, floor))


# --- Endpoints ----------------------------------------------------------------------------


def create_endpoint(
    project: Project, *, url: str, events: list[str], actor: Actor
) -> tuple[WebhookEndpoint, str]:
    """Create an active endpoint; returns it and its signing secret (shown once). Raises
    InvalidInput (422) for a URL Switchboard will not POST to or an unknown event name."""
    try:
        allow_private = settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS
        url = check_target(url, allow_private=allow_private).url
    except TargetRefused as refused:
        raise InvalidInput(str(refused), detail={"field": "url"}) from None
    if len(url) > 2000:
        raise InvalidInput(
            "The URL is too long (2,000 characters at most).", detail={"field": "url"}
        )
    unknown = sorted(set(events) - set(EVENTS))
    if unknown or not events:
        message = "Choose at least one event." if not events else "Unknown event names."
        raise InvalidInput(message, detail={"field": "events", "unknown": unknown})
    secret = _new_secret()
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.create(
            project=project,
            url=url,
            secret=secret,
            events=sorted(set(events)),
            created_by=actor.user,
        )
        record_audit(
            project,
            actor=actor,
            action="webhook.created",
            target_type="webhook",
            target_id=endpoint.pk,
            detail={"url": url, "events": endpoint.events},
        )
    return endpoint, secret


def set_endpoint_active(endpoint: WebhookEndpoint, active: bool, *, actor: Actor) -> None:
    """Enable or disable. A disabled endpoint gets no new deliveries; its pending ones wait and
    are sent when it is enabled again."""
    with transaction.atomic():
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(active=active)
        endpoint.active = active
        record_audit(
            endpoint.project_id,
            actor=actor,
            action="webhook.enabled" if active else "webhook.disabled",
            target_type="webhook",
            target_id=endpoint.pk,
            detail={"url": endpoint.url},
        )


def delete_endpoint(endpoint: WebhookEndpoint, *, actor: Actor) -> None:
    """Delete the endpoint with its deliveries and their attempt logs."""
    with transaction.atomic():
        record_audit(
            endpoint.project_id,
            actor=actor,
            action="webhook.deleted",
            target_type="webhook",
            target_id=endpoint.pk,
            detail={"url": endpoint.url},
        )
        endpoint.delete()


# --- Reads (the dashboard's) ----------------------------------------------------------------


def project_endpoints(project: Project) -> QuerySet[WebhookEndpoint]:
    return WebhookEndpoint.objects.filter(project=project).order_by("created_at", "id")


def recent_deliveries(project: Project, *, limit: int = 50) -> list[WebhookDelivery]:
    return list(
        WebhookDelivery.objects.filter(project=project)
        .select_related("endpoint")
        .prefetch_related("attempt_log")
        .order_by("-created_at", "id")[:limit]
    )


def endpoint_in(project: Project, endpoint_id: int) -> WebhookEndpoint:
    """The project's endpoint; another project's (or none) is NotFound (404)."""
    endpoint = WebhookEndpoint.objects.filter(project=project, pk=endpoint_id).first()
    if endpoint is None:
        raise NotFound("Webhook endpoint not found.")
    return endpoint


def delivery_in(project: Project, delivery_id: uuid.UUID) -> WebhookDelivery:
    delivery = WebhookDelivery.objects.filter(project=project, pk=delivery_id).first()
    if delivery is None:
        raise NotFound("Webhook delivery not found.")
    return delivery


# --- Fan-out (inside the change's transaction) ---------------------------------------------


# --- Sending --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchSummary:
    claimed: int
    succeeded: int
    retrying: int
    failed: int


_clients: dict[int, httpx.Client] = {}
_clients_lock = threading.Lock()


def _client() -> httpx.Client:
    """This process's HTTP client, made on first use. Building one costs 20-35 ms here (its TLS
    context), more than a delivery itself, so it is kept; per process (by pid), because a
    forked worker must not share its parent's connections. Thread-safe: a batch shares it.

    No redirects: a 3xx is a failed attempt (a receiver that moved must be edited, and a
    redirect could lead a signed request somewhere the admin never chose)."""
    pid = os.getpid()
    with _clients_lock:
        client = _clients.get(pid)
        if client is None:
            client = _clients[pid] = httpx.Client(
                follow_redirects=False,
                limits=httpx.Limits(max_connections=SENDERS * 2, max_keepalive_connections=SENDERS),
            )
    return client


def _attempt(client: httpx.Client, claimed: ClaimedDelivery) -> AttemptResult:
    body = envelope(str(claimed.id), claimed.event, claimed.created_at, claimed.payload)
    return _send(
        client,
        claimed.url,
        secret=claimed.secret,
        delivery_id=str(claimed.id),
        body=body,
        allow_private=settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS,
        timeout=settings.SWITCHBOARD_WEBHOOK_TIMEOUT,
    )


def _record(
    claimed: ClaimedDelivery,
    result: AttemptResult,
    *,
    started_at: datetime,
    redelivery: bool = False,
) -> str:
    """Write the attempt and the delivery's new state; returns the new status. Fenced by the
    attempt number: a sender whose lease ran out (and whose row another sender took) writes
    nothing."""
    now = timezone.now()
    max_attempts = settings.SWITCHBOARD_WEBHOOK_MAX_ATTEMPTS
    next_attempt_at: datetime | None = None
    status: str
    if result.succeeded:
        status = DeliveryStatus.SUCCEEDED
    elif claimed.status != DeliveryStatus.PENDING:
        status = claimed.status  # a redelivery of a finished delivery: the outcome stands
    elif not result.retryable or claimed.attempt >= max_attempts:
        status = DeliveryStatus.FAILED
    else:
        status = DeliveryStatus.PENDING
        delay = backoff_seconds(
            claimed.attempt,
            base_ms=settings.SWITCHBOARD_WEBHOOK_BACKOFF_MS,
            max_ms=settings.SWITCHBOARD_WEBHOOK_BACKOFF_MAX_MS,
        )
        if result.retry_after is not None:  # the receiver asked for longer: honour it
            ceiling = settings.SWITCHBOARD_WEBHOOK_BACKOFF_MAX_MS / 1000
            delay = max(delay, min(result.retry_after, ceiling))
        next_attempt_at = now + timedelta(seconds=delay)
    error = result.error
    if status == DeliveryStatus.FAILED and result.retryable:
        error = f"{error} Gave up after {claimed.attempt} attempts."
    with transaction.atomic():
        updated = WebhookDelivery.objects.filter(pk=claimed.id, attempts=claimed.attempt).update(
            status=status,
            next_attempt_at=next_attempt_at,
            leased_until=None,
            last_attempt_at=started_at,
            last_response_code=result.response_code,
            last_error=error[:200],
        )
        if updated:
            WebhookAttempt.objects.create(
                delivery_id=claimed.id,
                number=claimed.attempt,
                started_at=started_at,
                duration_ms=result.duration_ms,
                response_code=result.response_code,
                error=result.error[:200],
                succeeded=result.succeeded,
                redelivery=redelivery,
            )
    return status


def deliver_due(*, limit: int = BATCH) -> BatchSummary:
    """Lease up to `limit` due deliveries, POST them (side by side, outside any transaction),
    record every attempt. Safe with several workers: each leases different rows."""
    now = timezone.now()
    with transaction.atomic():
        claimed = claim_due_deliveries(now=now, lease_until=now + _lease(), limit=limit)
    if not claimed:
        return BatchSummary(0, 0, 0, 0)
    client = _client()

    def attempt(item: ClaimedDelivery) -> tuple[datetime, AttemptResult]:
        return timezone.now(), _attempt(client, item)

    with ThreadPoolExecutor(max_workers=min(SENDERS, len(claimed))) as pool:
        results = list(pool.map(attempt, claimed))
    counts = {DeliveryStatus.SUCCEEDED: 0, DeliveryStatus.PENDING: 0, DeliveryStatus.FAILED: 0}
    for item, (started, result) in zip(claimed, results, strict=True):
        counts[DeliveryStatus(_record(item, result, started_at=started))] += 1
    return BatchSummary(
        len(claimed),
        counts[DeliveryStatus.SUCCEEDED],
        counts[DeliveryStatus.PENDING],
        counts[DeliveryStatus.FAILED],
    )


def redeliver(delivery: WebhookDelivery, *, actor: Actor) -> WebhookAttempt:
    """Send `delivery` again now, with the same delivery id and body (the receiver
    de-duplicates), and record the attempt. Works for any status: a success marks it
    succeeded; a failure of a pending one is rescheduled as usual, of a finished one leaves its
    status. Raises Conflict (409) while a worker is sending it."""
    now = timezone.now()
    with transaction.atomic():
        claimed = claim_delivery(delivery.pk, now=now, lease_until=now + _lease())
        if claimed is None:
            raise Conflict(
                "This delivery is being sent right now. Try again in a moment.",
                detail={"delivery": str(delivery.pk)},
            )
        record_audit(
            delivery.project_id,
            actor=actor,
            action="webhook.redelivered",
            target_type="webhook_delivery",
            target_id=delivery.pk,
            detail={"event": delivery.event, "attempt": claimed.attempt},
        )
    result = _attempt(_client(), claimed)
    _record(claimed, result, started_at=now, redelivery=True)
    delivery.refresh_from_db()
    return WebhookAttempt.objects.filter(delivery=delivery, number=claimed.attempt).get()


def drop_finished(*, now: datetime | None = None, batch: int = 5000) -> int:
    """Delete finished deliveries older than DELIVERY_KEEP, one bounded batch."""
    now = now or timezone.now()
    old = WebhookDelivery.objects.filter(
        created_at__lt=now - DELIVERY_KEEP,
        status__in=[DeliveryStatus.SUCCEEDED, DeliveryStatus.FAILED],
    ).values_list("pk", flat=True)[:batch]
    deleted, _ = WebhookDelivery.objects.filter(pk__in=list(old)).delete()
    return deleted
