"""Reads that join sessions with their tasks and handoffs (the sessions list's `has_task`,
`has_handoff`, its linked-task column and search snippets)."""

from dataclasses import dataclass

from django.db.models import (
    BooleanField,
    Count,
    Exists,
    JSONField,
    OuterRef,
    QuerySet,
    Subquery,
    Value,
    Window,
)
from django.db.models.functions import Coalesce, JSONObject

from core.models import Project
from handoffs_app.models import ACTIVE_STATUSES, Handoff
from retention_app.queries import held_session_ids
from sessions_app.models import Session
from sessions_app.queries import (
    SessionFilters,
    filter_sessions,
    matching_text,
    pause_annotations,
)
from tasks_app.models import TaskSession


def has_task_expression() -> Exists:
    """EXISTS(a task link for the outer session): index tasksession_session."""
    return Exists(TaskSession.objects.filter(session_id=OuterRef("pk")))


def has_task_flag() -> Coalesce:
    """Whether the outer session has a task link, as a column of the rows shown.

    A scalar subquery probing index tasksession_session once per row returned, where an
    EXISTS in the select list may be planned as a hash of the whole link table, built for
    every page (it grows with the links, not with the page).
    """
    first = TaskSession.objects.filter(session_id=OuterRef("pk")).values(flag=Value(True))[:1]
    return Coalesce(Subquery(first, output_field=BooleanField()), Value(False))


@dataclass
class SessionListFilters(SessionFilters):
    """The dashboard's sessions list filters: the store's, plus whether a task is linked."""

    # True: only sessions linked to a task; False: only sessions without one.
    has_task: bool | None = None
    # True: only sessions with an active handoff (open, claimed, answered, taken over).
    has_handoff: bool | None = None


def pending_handoff_expression() -> Exists:
    """EXISTS(an active handoff of the outer session): the one-active-per-session partial
    unique index answers it with one probe per session."""
    return Exists(
        Handoff.objects.filter(session_id=OuterRef("pk"), status__in=list(ACTIVE_STATUSES))
    )


def first_task_annotation() -> Subquery:
    """The outer session's first linked task (oldest first, as the session page lists them)
    as {"id", "state", "links"} (`links`: how many tasks the session has), or NULL.

    One scalar subquery per row returned, walking index tasksession_session and the task's
    primary key; the count is a window over the same rows, so no second probe.
    """
    links = (
        TaskSession.objects.filter(session_id=OuterRef("pk"))
        .order_by("task__created_at", "task_id")
        .values(first=JSONObject(id="task_id", state="task__state", links=Window(Count("pk"))))[:1]
    )
    return Subquery(links, output_field=JSONField())


def session_rows(project: Project, filters: SessionListFilters) -> QuerySet[Session]:
    """The sessions list's rows, each annotated with `first_task` (first_task_annotation),
    with `search_text` and `search_query` when searching (sessions_app.queries.matching_text:
    the snippet's source), and, when
    paused, with `paused_since` and `pause_reason` (sessions_app.queries.pause_annotations)."""
    qs = filter_sessions(project, filters)
    has_task = filters.has_task
    if has_task is not None:
        if filters.q:
            # With a text search: a per-row check PostgreSQL runs before the costlier text
            # probe. As EXISTS it would become a semi-join above the scan, and every session
            # walked would be text-probed first (bench/dashboard.py: 120 ms against 12 ms).
            qs = qs.alias(_has_task=has_task_flag()).filter(_has_task=has_task)
        else:
            linked = has_task_expression()
            qs = qs.filter(linked if has_task else ~linked)
    if filters.has_handoff is not None:
        pending = pending_handoff_expression()
        qs = qs.filter(pending if filters.has_handoff else ~pending)
    if filters.q:
        # The query rides along, so a row renders its snippet alone (page and live push).
        qs = qs.annotate(search_text=matching_text(filters.q), search_query=Value(filters.q))
    return qs.annotate(first_task=first_task_annotation(), **pause_annotations())


def mark_holds(project_id: int, sessions: list[Session]) -> None:
    """Set `on_hold` on each of `sessions` (the list's rows): whether a legal hold stands over
    it (its own, its agent's or the project's). One query for the page."""
    held = held_session_ids(project_id, sessions)
    for session in sessions:
        session.on_hold = str(session.pk) in held  # type: ignore[attr-defined]


def sessions_linked_to(task_ids: set[str], among: set[str]) -> set[str]:
    """Which of the sessions `among` are linked to one of `task_ids` (the live sessions list:
    the rows whose task column a task's change moves). Index tasksession_unique."""
    if not task_ids or not among:
        return set()
    return {
        str(session_id)
        for session_id in TaskSession.objects.filter(
            task_id__in=list(task_ids), session_id__in=list(among)
        ).values_list("session_id", flat=True)
    }
