"""Reads shared by the API, the dashboard and the jobs."""

import copy
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet

from core.cursors import decode_cursor, encode_cursor
from core.models import Project
from sessions_app.models import Session

from .errors import InvalidInput
from .models import (
    HistoryKind,
    Step,
    StepStatus,
    Task,
    TaskHistory,
    TaskSession,
    WorkflowDefinition,
)
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


@dataclass
class TaskAsOf:
    """A task as it was at `when`, rebuilt from its history (which carries times).

    `task` is an unsaved copy of the task holding its state, version and finish time then, with
    its steps then as `task.steps.all()` (the panel template renders it as it renders a live
    task); `existed` is False when the task was created after `when` (then `task` is the live
    one, untouched).
    """

    task: Task
    when: datetime
    existed: bool


def tasks_as_of(tasks: list[Task], when: datetime) -> list[TaskAsOf]:
    """Each of `tasks` (loaded with their workflow and steps) as it was at `when`.

    One query: every history row of these tasks up to `when`, replayed in order over steps
    reset to how creation made them. Step rows that do not say a field (a reopening, a skip)
    follow the services that wrote them (tasks_app/services: step_changes, transitions).
    """
    if not tasks:
        return []
    rows: dict[Any, list[TaskHistory]] = {task.pk: [] for task in tasks}
    for row in TaskHistory.objects.filter(
        task__in=[task.pk for task in tasks], created_at__lte=when
    ).order_by("task_id", "id"):
        rows[row.task_id].append(row)
    return [_replay(task, rows[task.pk], when) for task in tasks]


def _replay(task: Task, history: list[TaskHistory], when: datetime) -> TaskAsOf:
    if not any(row.kind == HistoryKind.CREATED for row in history):
        return TaskAsOf(task=task, when=when, existed=False)
    past = copy.copy(task)
    spec = task.spec
    live_steps = list(task.steps.all())
    agents = {step.key: step.agent for step in live_steps}
    steps = {step.key: _fresh_step(step, task) for step in live_steps}
    for row in history:
        past.version = row.task_version or past.version
        past.updated_at = row.created_at
        if row.kind in (HistoryKind.CREATED, HistoryKind.TRANSITION) and row.to_state:
            past.state = row.to_state
            past.finished_at = row.created_at if spec.is_terminal(row.to_state) else None
        elif row.kind == HistoryKind.STEP and row.step_key in steps:
            _apply_step_row(steps[row.step_key], row, agents[row.step_key])
    # What `task.steps.all()` answers once prefetched: the panel template reads the steps so.
    past._prefetched_objects_cache = {"steps": list(steps.values())}
    return TaskAsOf(task=past, when=when, existed=True)


def _fresh_step(step: Step, task: Task) -> Step:
    """An unsaved copy of `step` as task creation made it (pending, round 1, no attempt)."""
    fresh = copy.copy(step)
    fresh.start_clean()
    fresh.round = 1
    fresh.inputs = {}
    fresh.agent = None
    fresh.actor = ""
    fresh.updated_at = task.created_at
    return fresh


def _apply_step_row(step: Step, row: TaskHistory, agent: Any) -> None:
    """One `step` history row applied to `step` (`agent`: the step's agent today, named
    again when the row names the same one; the row keeps only the name)."""
    data = row.data if isinstance(row.data, dict) else {}
    step.updated_at = row.created_at
    if "step_status" in data:  # an update reported for the step (not a reopening or a skip)
        step.actor = row.actor
    if row.round and row.round > step.round:
        # A transition reopened the step: a new round starts clean (services/transitions.py).
        step.start_clean()
        step.round = row.round
        return
    if data.get("agent"):
        step.agent = agent if agent is not None and agent.name == data["agent"] else None
    if row.attempt and row.attempt > step.attempts:
        step.attempts = row.attempt
        step.started_at = row.created_at
        step.finished_at = None
    if isinstance(data.get("inputs"), dict):
        step.inputs = data["inputs"]
    requested = row.to_state
    step.status = str(data.get("step_status") or requested)
    if requested == StepStatus.WAITING:
        waiting = data["waiting_on"] if isinstance(data.get("waiting_on"), dict) else {}
        step.waiting_on = str(waiting.get("signal") or "")
        deadline = waiting.get("deadline")
        step.wait_deadline = datetime.fromisoformat(deadline) if deadline else None
    else:
        step.waiting_on = ""
        step.wait_deadline = None
    if "signal_payload" in data:
        step.signal_payload = data["signal_payload"]
    if requested == StepStatus.SUCCEEDED:
        step.finished_at = row.created_at
        if isinstance(data.get("outputs"), dict):
            step.outputs = data["outputs"]
        if "branch" in data:
            step.branch = str(data["branch"])
    elif requested == StepStatus.FAILED:
        step.last_error = row.error
        if step.status == StepStatus.FAILED:
            step.finished_at = row.created_at
    elif requested == StepStatus.SKIPPED:
        step.finished_at = row.created_at


# --- Tasks needing attention (the overview) ------------------------------------------------


@dataclass
class AttentionStep:
    """A step that makes its task waiting or stuck, with why and since when."""

    step: Step  # with .task and .task.workflow
    reason: str  # "waiting" | "failed" | "overdue" | "no_progress" | "retry_due"
    since: datetime


@dataclass
class TasksNeedingAttention:
    waiting: list[AttentionStep]  # one per task, the longest wait first
    stuck: list[AttentionStep]  # one per task, stuck the longest first
    waiting_count: int  # tasks
    stuck_count: int  # tasks


def _stuck_steps(now: datetime, stuck_after: timedelta) -> Q:
    """A step that holds its (unfinished) task up with nobody moving it on: failed for good,
    waiting past its deadline, or running, or due a retry, with no update for `stuck_after`."""
    quiet = Q(updated_at__lt=now - stuck_after)
    return (
        Q(status=StepStatus.FAILED)
        | Q(status=StepStatus.WAITING, wait_deadline__lt=now)
        | (Q(status=StepStatus.RUNNING) & quiet)
        | (Q(status=StepStatus.PENDING, attempts__gt=0) & quiet)
    )


def _waiting_steps(now: datetime) -> Q:
    """A step waiting on a signal, within its deadline (past it, the step is stuck)."""
    return Q(status=StepStatus.WAITING) & ~Q(wait_deadline__lt=now)


def _why(step: Step, now: datetime) -> tuple[str, datetime]:
    if step.status == StepStatus.FAILED:
        return "failed", step.finished_at or step.updated_at
    if step.status == StepStatus.WAITING:
        overdue = step.wait_deadline is not None and step.wait_deadline < now
        return ("overdue" if overdue else "waiting"), step.updated_at
    if step.status == StepStatus.PENDING:
        return "retry_due", step.updated_at
    return "no_progress", step.updated_at


def tasks_needing_attention(
    project: Project | int, *, now: datetime, stuck_after: timedelta, limit: int = 5
) -> TasksNeedingAttention:
    """The project's unfinished tasks with a step waiting (`waiting`) or holding it up
    (`stuck`: _stuck_steps), `limit` of each, and how many tasks there are of each. Three
    queries, over the steps of unfinished tasks only (a finished task's failed step is history).
    """
    steps = Step.objects.filter(task__project=project, task__finished_at__isnull=True)
    stuck_q, waiting_q = _stuck_steps(now, stuck_after), _waiting_steps(now)
    counts = steps.aggregate(
        waiting=Count("task", distinct=True, filter=waiting_q),
        stuck=Count("task", distinct=True, filter=stuck_q),
    )

    def first_per_task(condition: Q) -> list[AttentionStep]:
        # A few extra rows so that several steps of one task still leave `limit` tasks.
        rows = (
            steps.filter(condition)
            .select_related("task__workflow")
            .order_by("updated_at", "id")[: limit * 3]
        )
        chosen: dict[Any, AttentionStep] = {}
        for step in rows:
            if step.task_id not in chosen and len(chosen) < limit:
                reason, since = _why(step, now)
                chosen[step.task_id] = AttentionStep(step=step, reason=reason, since=since)
        return list(chosen.values())

    return TasksNeedingAttention(
        waiting=first_per_task(waiting_q),
        stuck=first_per_task(stuck_q),
        waiting_count=counts["waiting"],
        stuck_count=counts["stuck"],
    )
