"""Reads shared by the API, the dashboard and the jobs."""

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet

from core.cursors import decode_cursor, encode_cursor
from core.models import Project
from sessions_app.models import Session

from .errors import InvalidInput
from .models import Step, Task, TaskHistory, TaskSession, WorkflowDefinition
from .workflows import BUILTIN_WORKFLOWS, spec_from_stored


@dataclass
class TaskFilters:
    workflow: str | None = None
    state: list[str] | None = None
    step_status: list[str] | None = None
    session: UUID | None = None
    external_id: str | None = None


def filter_tasks(project: Project | int, filters: TaskFilters) -> QuerySet[Task]:
    qs = Task.objects.filter(project=project)
    if filters.workflow:
        qs = qs.filter(workflow__name=filters.workflow)
    if filters.state:
        qs = qs.filter(state__in=filters.state)
    if filters.step_status:
        # EXISTS rather than a join: one row per task however many steps match.
        qs = qs.filter(
            Exists(Step.objects.filter(task=OuterRef("pk"), status__in=filters.step_status))
        )
    if filters.session:
        qs = qs.filter(
            Exists(TaskSession.objects.filter(task=OuterRef("pk"), session_id=filters.session))
        )
    if filters.external_id:
        qs = qs.filter(external_id=filters.external_id)
    return qs


def page_tasks(
    qs: QuerySet[Task], *, cursor: str | None, limit: int
) -> tuple[list[Task], str | None]:
    """Keyset page, newest first on (created_at, id), with steps prefetched (two queries)."""
    if limit < 1 or limit > 200:
        raise InvalidInput("limit must be between 1 and 200.", detail={"limit": limit})
    if cursor:
        created_at, task_id = decode_cursor(cursor)
        qs = qs.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=task_id))
    page = list(
        qs.select_related("workflow")
        .prefetch_related(Prefetch("steps", queryset=Step.objects.select_related("agent")))
        .order_by("-created_at", "-id")[: limit + 1]
    )
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        next_cursor = encode_cursor(page[-1].created_at, page[-1].pk)
    return page, next_cursor


def task_steps(task: Task) -> list[Step]:
    return list(Step.objects.filter(task=task).select_related("agent"))


def recent_history(task: Task, *, limit: int = 50) -> list[TaskHistory]:
    """The task's last `limit` history rows, oldest first (walks taskhistory_task_recent)."""
    rows = list(TaskHistory.objects.filter(task=task).order_by("-id")[:limit])
    rows.reverse()
    return rows


@dataclass
class HistorySlice:
    rows: list[TaskHistory]  # newest first
    has_more: bool  # older rows exist beyond the last one


def history_slice(
    task: Task,
    *,
    before_id: int | None = None,
    after_id: int | None = None,
    step: str | None = None,
    kind: str | None = None,
    limit: int = 50,
) -> HistorySlice:
    """History rows of `task` with after_id < id < before_id, newest first, optionally of one
    step or one kind (walks taskhistory_task_recent, keyset on id: no OFFSET)."""
    qs = TaskHistory.objects.filter(task=task)
    if before_id is not None:
        qs = qs.filter(id__lt=before_id)
    if after_id is not None:
        qs = qs.filter(id__gt=after_id)
    if step:
        qs = qs.filter(step_key=step)
    if kind:
        qs = qs.filter(kind=kind)
    rows = list(qs.order_by("-id")[: limit + 1])
    return HistorySlice(rows=rows[:limit], has_more=len(rows) > limit)


def latest_history_id(task: Task) -> int:
    return (
        TaskHistory.objects.filter(task=task).order_by("-id").values_list("id", flat=True).first()
        or 0
    )


@dataclass
class WorkflowChoices:
    names: list[tuple[str, str]]  # (name, title)
    states: list[str]  # every state of every visible version, first seen first


def workflow_choices(project: Project | int) -> WorkflowChoices:
    """The workflows a project's tasks can run (its own and the built-ins) and their states,
    for the tasks list's filters. One query; a read only (nothing is registered here, and the
    built-ins count even before their first task registers them)."""
    definitions = (
        WorkflowDefinition.objects.filter(Q(project=project) | Q(project__isnull=True))
        .order_by("name", "version")
        .only("name", "title", "definition", "content_hash")
    )
    names: dict[str, str] = {}
    states: dict[str, None] = {}
    for spec in BUILTIN_WORKFLOWS.values():
        names[spec.name] = spec.title or spec.name
        states.update(dict.fromkeys(spec.states))
    for definition in definitions:
        names[definition.name] = definition.title or definition.name
        states.update(
            dict.fromkeys(spec_from_stored(definition.definition, definition.content_hash).states)
        )
    return WorkflowChoices(names=sorted(names.items()), states=list(states))


def session_ids_for_task(task: Task) -> list[str]:
    return [
        str(sid)
        for sid in TaskSession.objects.filter(task=task)
        .order_by("created_at", "id")
        .values_list("session_id", flat=True)
    ]


def sessions_for_task(task: Task) -> QuerySet[Session]:
    return (
        Session.objects.filter(task_links__task=task)
        .select_related("agent")
        .order_by("task_links__created_at", "id")
    )


def tasks_for_session(session: Session, *, with_steps: bool = True) -> QuerySet[Task]:
    """The tasks linked to `session`, oldest first; steps prefetched for the session page's
    task panel (status, attempts, errors, outputs) unless `with_steps` is False."""
    qs = (
        Task.objects.filter(session_links__session=session)
        .select_related("workflow")
        .order_by("created_at", "id")
    )
    if with_steps:
        qs = qs.prefetch_related(Prefetch("steps", queryset=Step.objects.select_related("agent")))
    return qs


def linked_tasks_summary(session: Session) -> list[dict[str, Any]]:
    """The tasks linked to a session, as the session API shows them (one query)."""
    return [
        {
            "id": str(task.pk),
            "workflow": task.workflow.name,
            "workflow_version": task.workflow.version,
            "state": task.state,
            "version": task.version,
            "finished": task.is_finished,
        }
        for task in tasks_for_session(session, with_steps=False)
    ]
