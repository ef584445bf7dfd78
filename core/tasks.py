"""Celery jobs of the core app: thin wrappers around core.domain_events and the webhooks."""

import time

from celery import shared_task

from .domain_events import drop_relayed, relay_pending
from .services.webhooks import BATCH, deliver_due, drop_finished

# One run delivers batch after batch while there is work, for at most this long, then leaves
# the rest to the next kick or beat tick (a run never holds a worker for minutes).
DELIVERY_RUN_SECONDS = 20
# Old finished deliveries are dropped at most this often per worker process (a run is kicked
# after every commit that creates deliveries: the clean-up must not ride on each).
DROP_EVERY_SECONDS = 600
_last_drop = 0.0


@shared_task(name="core.relay_outbox")
def relay_outbox() -> dict[str, int]:
    """Send outbox rows left unsent (crash, Redis outage); drop old sent ones."""
    return {"sent": relay_pending(), "dropped": drop_relayed()}


@shared_task(name="core.deliver_webhooks")
def deliver_webhooks() -> dict[str, int]:
    """POST due webhook deliveries in bounded batches; drop old finished ones."""
    totals = {"claimed": 0, "succeeded": 0, "retrying": 0, "failed": 0}
    deadline = time.monotonic() + DELIVERY_RUN_SECONDS
    while time.monotonic() < deadline:
        batch = deliver_due()
        for name in totals:
            totals[name] += getattr(batch, name)
        if batch.claimed < BATCH:
            break
    global _last_drop
    if time.monotonic() - _last_drop > DROP_EVERY_SECONDS:
        _last_drop = time.monotonic()
        totals["dropped"] = drop_finished()
    return totals
