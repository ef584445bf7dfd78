"""Reads of retention shared by the API and the page: runs, events freed per day, holds."""

from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet, Sum
from django.db.models.functions import TruncDate

from sessions_app.models import Session

from .models import LegalHold, RetentionRun, RunStatus


def recent_runs(project_id: int, *, limit: int = 50) -> list[RetentionRun]:
    return list(RetentionRun.objects.filter(project_id=project_id).order_by("-started_at")[:limit])


def unclaimed_runs(runs: list[RetentionRun], *, now: datetime) -> set[int]:
    """Ids of the queued runs no worker has taken within SWITCHBOARD_RETENTION_UNCLAIMED_SECONDS
    (a queued run's started_at is the time it was queued)."""
    since = now - timedelta(seconds=settings.SWITCHBOARD_RETENTION_UNCLAIMED_SECONDS)
    return {run.pk for run in runs if run.status == RunStatus.QUEUED and run.started_at < since}


def run_dict(run: RetentionRun) -> dict[str, Any]:
    return {
        "id": run.pk,
        "job": run.job,
        "status": run.status,
        "trigger": run.trigger,
        "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "examined": run.examined,
        "closed": run.closed,
        "archived": run.archived,
        "compacted": run.compacted,
        "deleted": run.deleted,
        "events_freed": run.events_freed,
        "bytes_freed": run.bytes_freed,
        "errors": run.errors,
    }


def events_freed_per_day(
    project_id: int, *, now: datetime, days: int = 14
) -> list[tuple[date, int]]:
    """Events freed per day (compaction and deletion) over the last `days`, oldest first."""
    start = (now - timedelta(days=days - 1)).date()
    rows = dict(
        RetentionRun.objects.filter(project_id=project_id, started_at__date__gte=start)
        .annotate(day=TruncDate("started_at"))
        .values("day")
        .annotate(freed=Sum("events_freed"))
        .values_list("day", "freed")
    )
    return [
        (start + timedelta(days=i), int(rows.get(start + timedelta(days=i)) or 0))
        for i in range(days)
    ]


def standing_holds(project_id: int) -> QuerySet[LegalHold]:
    return (
        LegalHold.objects.filter(project_id=project_id, released_at__isnull=True)
        .select_related("session", "agent")
        .order_by("-created_at")
    )


def held_session_ids(project_id: int, sessions: list[Session]) -> set[str]:
    """Which of `sessions` stand under a hold (their own, their agent's, their project's)."""
    holds = list(standing_holds(project_id).values_list("scope", "session_id", "agent_id"))
    if any(scope == "project" for scope, _, _ in holds):
        return {str(s.pk) for s in sessions}
    held_sessions = {sid for scope, sid, _ in holds if scope == "session"}
    held_agents = {aid for scope, _, aid in holds if scope == "agent"}
    return {str(s.pk) for s in sessions if s.pk in held_sessions or s.agent_id in held_agents}
