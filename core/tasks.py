"""Celery jobs of the core app: thin wrappers around core.domain_events."""

from celery import shared_task

from .domain_events import drop_relayed, relay_pending


@shared_task(name="core.relay_outbox")
def relay_outbox() -> dict[str, int]:
    """Send outbox rows left unsent (crash, Redis outage); drop old sent ones."""
    return {"sent": relay_pending(), "dropped": drop_relayed()}
