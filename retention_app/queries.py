"""Reads of retention shared by the API and the page: runs, events freed per day, holds."""

from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet, Sum
from django.db.models.functions import TruncDate

from core.cursors import newest_first_page
from sessions_app.models import Session

from .models import LegalHold, RetentionRun, RunStatus
from .storage import standing_holds_covering


def recent_runs(project_id: int, *, limit: int = 50) -> list[RetentionRun]:
    return list(RetentionRun.objects.filter(project_id=project_id).order_by("-started_at")[:limit])


def page_runs(
    project_id: int, *, cursor: str | None, limit: int
) -> tuple[list[RetentionRun], str | None]:
    """The API's run history: newest first (as recent_runs), a page at a time."""
    return newest_first_page(
        RetentionRun.objects.filter(project_id=project_id),
        field="started_at",
        cursor=cursor,
        limit=limit,
        order="runs",
    )


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
        "artifacts_deleted": run.artifacts_deleted,
        "artifact_bytes_freed": run.artifact_bytes_freed,
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
    return {sid for sid, holds in holds_covering(project_id, sessions).items() if holds}


def page_holds(
    project_id: int, *, include_released: bool, cursor: str | None, limit: int
) -> tuple[list[LegalHold], str | None]:
    """The API's holds: the standing ones (or all, `include_released`), newest first."""
    qs = LegalHold.objects.filter(project_id=project_id).select_related("agent")
    if not include_released:
        qs = qs.filter(released_at__isnull=True)
    return newest_first_page(qs, field="created_at", cursor=cursor, limit=limit, order="holds")


def holds_covering(project_id: int, sessions: list[Session]) -> dict[str, list[LegalHold]]:
    """Session id -> the standing holds covering it (its own, its agent's, the project's), in
    that order: one query for a page of sessions."""
    if not sessions:
        return {}
    holds = standing_holds_covering(
        project_id, list({s.agent_id for s in sessions}), [s.pk for s in sessions]
    )
    order = {"session": 0, "agent": 1, "project": 2}
    holds.sort(key=lambda h: order[h.scope])
    return {
        str(s.pk): [
            h
            for h in holds
            if h.scope == "project"
            or (h.scope == "agent" and h.agent_id == s.agent_id)
            or h.session_id == s.pk
        ]
        for s in sessions
    }


def hold_dict(hold: LegalHold) -> dict[str, Any]:
    """A hold as the API shows it (HoldOut)."""
    return {
        "id": hold.pk,
        "scope": hold.scope,
        "session_id": str(hold.session_id) if hold.session_id else None,
        "agent": hold.agent.name if hold.agent_id and hold.agent else None,
        "reason": hold.reason,
        "created_by": hold.created_by,
        "created_at": hold.created_at.isoformat(),
        "released_at": hold.released_at.isoformat() if hold.released_at else None,
        "released_by": hold.released_by,
    }
