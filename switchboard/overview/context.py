"""The data the overview renders, for its first render, its polls and its live pushes alike
(overview.views, overview.consumers): plain values, no HTML."""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from core.models import Project
from core.outage import OutageLog
from handoffs_app.queries import queue_counts
from sessions_app.models import SessionStatus
from sessions_app.queries import (
    events_per_minute,
    recent_session_changes,
    status_counts,
    waiting_sessions,
)
from tasks_app.queries import tasks_needing_attention

logger = logging.getLogger(__name__)


def overview_live_context(project: Project) -> dict[str, Any]:
    """What the overview's live partials show: counts, the waiting queue, recent changes."""
    counts = status_counts(project)
    waiting = waiting_sessions(project)
    return {
        "status_counts": [
            (status, label, counts[status]) for status, label in SessionStatus.choices
        ],
        "total_sessions": sum(counts.values()),
        "paused_count": counts[SessionStatus.PAUSED],
        "waiting": waiting,
        "oldest_wait": waiting[0].paused_since if waiting else None,
        "recent_changes": recent_session_changes(project),
        "handoff_counts": queue_counts(project),
    }


def overview_tasks_context(project: Project) -> dict[str, Any]:
    """The overview's tasks card: tasks waiting on a signal and tasks stuck
    (tasks_app.queries.tasks_needing_attention; stuck after SWITCHBOARD_TASK_STUCK_MINUTES
    without progress)."""
    stuck_minutes = settings.SWITCHBOARD_TASK_STUCK_MINUTES
    return {
        "attention": tasks_needing_attention(
            project, now=timezone.now(), stuck_after=timedelta(minutes=stuck_minutes)
        ),
        "stuck_minutes": stuck_minutes,
    }


@dataclass
class ChartBar:
    x: float
    y: float
    height: float
    count: int
    minute: datetime


@dataclass
class EventsChart:
    bars: list[ChartBar]
    total: int
    peak: int
    start: datetime
    width: int = 600
    height: int = 80
    bar_width: float = 9.0

    @property
    def y_ticks(self) -> list[int]:
        """The y-axis labels, top to bottom: the peak, its half (when a whole number apart), 0."""
        if self.peak <= 1:
            return [self.peak, 0] if self.peak else [0]
        half = self.peak // 2
        return [self.peak, half, 0] if self.peak % 2 == 0 else [self.peak, 0]


CHART_CACHE_SECONDS = 30


def events_chart(project: Project, *, now: datetime | None = None) -> EventsChart:
    """Events per minute over the last hour, as bar geometry for an inline SVG.

    Cached for half a minute per project: however many people watch the overview, the count
    runs at most twice a minute (see queries.events_per_minute for why one run is cheap). With
    the cache down the chart is counted for every request rather than not shown.
    """
    now = now or timezone.now()
    # The database name keeps two databases that share one cache (test suites) apart.
    key = f"dashboard:epm:{connection.settings_dict['NAME']}:{project.pk}"
    counts = _cached_counts(key)
    if counts is None:
        counts = events_per_minute(project, now=now)
        if not _chart_cache_outage.down:  # a cache that just failed (or hung) is not asked twice
            _cache_counts(key, counts)
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=len(counts) - 1)
    chart = EventsChart(bars=[], total=sum(counts), peak=max(counts, default=0), start=start)
    step = chart.width / max(len(counts), 1)
    chart.bar_width = max(step - 1, 1)
    usable = chart.height - 4
    for index, count in enumerate(counts):
        height = 0.0 if not chart.peak else max(round(usable * count / chart.peak, 1), 1.0)
        if not count:
            height = 0.0
        chart.bars.append(
            ChartBar(
                x=round(index * step, 1),
                y=round(chart.height - height, 1),
                height=height,
                count=count,
                minute=start + timedelta(minutes=index),
            )
        )
    return chart


_chart_cache_outage = OutageLog(logger, "overview chart cache")


def _cached_counts(key: str) -> list[int] | None:
    try:
        counts = cache.get(key)
    except Exception as exc:
        _chart_cache_outage.failed(exc)
        return None
    _chart_cache_outage.succeeded()
    return counts  # type: ignore[no-any-return]


def _cache_counts(key: str, counts: list[int]) -> None:
    try:
        cache.set(key, counts, CHART_CACHE_SECONDS)
    except Exception as exc:
        _chart_cache_outage.failed(exc)
