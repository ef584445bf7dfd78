"""Scrape-time values of core.metrics that only the session store can compute."""

from django.db.models import Count, Min
from django.utils import timezone

from core import metrics

from .models import Session, SessionStatus


def refresh() -> None:
    """Sessions by status (one GROUP BY over all projects) and the paused stand-ins."""
    counts = dict.fromkeys(SessionStatus.values, 0)
    for row in Session.objects.values("status").annotate(n=Count("pk")).order_by():
        counts[row["status"]] = row["n"]
    for status, n in counts.items():
        metrics.SESSIONS.labels(status).set(n)
    paused = counts[SessionStatus.PAUSED]
    metrics.PAUSED_SESSIONS.set(paused)
    oldest = None
    if paused:
        # A paused session takes no appends, so updated_at is about when it paused.
        oldest = Session.objects.filter(status=SessionStatus.PAUSED).aggregate(
            oldest=Min("updated_at")
        )["oldest"]
    age = (timezone.now() - oldest).total_seconds() if oldest else 0.0
    metrics.PAUSED_OLDEST_SECONDS.set(max(age, 0.0))
