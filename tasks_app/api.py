"""Task and workflow endpoints of the agent API: parse, authorise, call a service, render.

Same auth (project API keys), error shape and project isolation as the session endpoints. One
exception: a signal can be delivered with the task's own signal token instead of an API key, so
an external system (a webhook sender) needs no key and can reach nothing but that task's signals.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from uuid import UUID

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Field, Path, Query, Router
from ninja.security import APIKeyHeader, APIKeyQuery, HttpBearer
from pydantic import ConfigDict

from core.actors import Actor
from core.http import json_response
from core.models import ApiKey
from core.schemas import (
    MAX_BIGINT,
    MAX_INT,
    InSchema,
    IsoDateTime,
    OutSchema,
    StorableStr,
    json_int,
    responses,
)
from core.services.projects import authenticate_api_key
from sessions_app.access import get_session_for_key
from sessions_app.models import SessionStatus

from .access import get_task_for_key, get_task_for_signal_token
from .errors import NotFound, UnknownWorkflow
from .models import HistoryKind, Step, StepStatus, Task, TaskHistory, WorkflowDefinition
from .queries import (
    TaskFilters,
    filter_tasks,
    page_tasks,
    recent_history,
    session_ids_for_task,
    sessions_for_task,
    task_steps,
    tasks_for_session,
)
from .services.links import link_sessions, unlink_session
from .services.signals import deliver_signal
from .services.steps import update_step
from .services.tasks import SIGNAL_TOKEN_PREFIX, create_task
from .services.transitions import transition_task
from .services.workflows import register_workflow_data, resolve_workflow, visible_workflows
from .workflows import IDENT_RE

router = Router(tags=["tasks"])


# --- Auth for the signal endpoint -------------------------------------------------------------


@dataclass(frozen=True)
class SignalGrant:
    """What a signal token authenticates: delivering signals to one task."""

    task: Task


def _grant_for(token: str | None) -> SignalGrant | None:
    task = get_task_for_signal_token(token) if token else None
    return SignalGrant(task) if task is not None else None


class KeyOrSignalTokenBearer(HttpBearer):
    """`Authorization: Bearer <API key or signal token>`."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | SignalGrant | None:
        if token.startswith(SIGNAL_TOKEN_PREFIX):
            return _grant_for(token)
        return authenticate_api_key(token)


class SignalTokenHeader(APIKeyHeader):
    param_name = "X-Signal-Token"

    def authenticate(self, request: HttpRequest, key: str | None) -> SignalGrant | None:
        return _grant_for(key)


class SignalTokenQuery(APIKeyQuery):
    # For webhook senders that cannot set headers. The token opens only this task's signals.
    param_name = "signal_token"

    def authenticate(self, request: HttpRequest, key: str | None) -> SignalGrant | None:
        return _grant_for(key)


# --- Helpers ----------------------------------------------------------------------------------


def _key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_key(_key(request))


def _task(request: HttpRequest, task_id: UUID) -> Task:
    return get_task_for_key(_key(request), task_id)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


# --- Schemas ----------------------------------------------------------------------------------


class TaskIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "workflow": "document_approval",
                    "params": {"document": "Q3 report"},
                    "metadata": {"team": "finance"},
                    "external_id": "doc-77",
                }
            ]
        }
    )

    workflow: str = Field(..., min_length=1, max_length=100)
    workflow_version: json_int(ge=1, le=MAX_INT) | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    session_ids: list[UUID] = Field(default_factory=list, max_length=100)
    external_id: str | None = Field(None, min_length=1, max_length=200)


class TaskListQuery(InSchema):
    workflow: str | None = None
    state: list[str] | None = None
    step_status: list[StepStatus] | None = None
    session: UUID | None = None
    external_id: str | None = None
    cursor: str | None = None
    limit: int = Field(50, ge=1, le=200)


class TaskReadQuery(InSchema):
    history_limit: int = Field(50, ge=0, le=1000)


class HistoryQuery(InSchema):
    after_id: int | None = Field(None, ge=0, le=MAX_BIGINT)
    step: str | None = None
    limit: int = Field(100, ge=1, le=1000)


class TransitionIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"to": "sent_for_review", "reason": "draft ready"},
            ]
        }
    )

    to: str | None = Field(None, min_length=1, max_length=100)
    transition: str | None = Field(
        None, min_length=1, max_length=100, description="a named transition, instead of `to`"
    )
    expected_version: json_int(ge=1, le=MAX_INT) | None = None
    reason: str = Field("", max_length=1000)


class StepErrorIn(InSchema):
    type: str = Field(..., min_length=1, max_length=100)
    message: str = Field("", max_length=4000)
    detail: dict[str, Any] = Field(default_factory=dict)


class WaitIn(InSchema):
    signal: str = Field(..., pattern=IDENT_RE.pattern, description="an identifier")
    deadline: IsoDateTime | None = None
    timeout_seconds: json_int(ge=1, le=366 * 86400) | None = Field(
        None, description="instead of a deadline: now + this"
    )


class StepIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"status": "running", "inputs": {"document": "Q3 report"}, "agent": "writer"},
                {"status": "succeeded", "outputs": {"url": "https://example.com/q3"}},
                {
                    "status": "waiting",
                    "waiting_on": {"signal": "review_done", "timeout_seconds": 3600},
                },
            ]
        }
    )

    status: Literal["running", "waiting", "succeeded", "failed", "skipped"]
    attempt: json_int(ge=1, le=MAX_INT) | None = None
    error: StepErrorIn | None = None
    inputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    branch: str | None = Field(None, max_length=100)
    waiting_on: WaitIn | None = None
    agent: str | None = Field(None, min_length=1, max_length=100)
    expected_version: json_int(ge=1, le=MAX_INT) | None = None
    reason: str = Field("", max_length=1000)


class SignalIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"payload": {"approved": True}, "idempotency_key": "review-1"},
            ]
        }
    )

    payload: dict[str, Any] = Field(default_factory=dict)
    error: StepErrorIn | None = None
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)


class LinkIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"session_ids": ["3f2b8a6e-1c4d-4e5f-9a7b-8c9d0e1f2a3b"]},
            ]
        }
    )

    session_ids: list[UUID] = Field(..., min_length=1, max_length=100)


class TransitionDefIn(InSchema):
    from_: str = Field(..., alias="from")
    to: str
    name: str = ""
    reopen: list[str] = Field(default_factory=list)


class StepDefIn(InSchema):
    key: str
    title: str = ""
    max_attempts: json_int() = 1


class WorkflowIn(InSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "triage",
                    "title": "Triage a ticket",
                    "states": ["new", "done"],
                    "initial": "new",
                    "terminal": ["done"],
                    "transitions": [{"from": "new", "to": "done", "name": "finish"}],
                    "steps": [{"key": "classify", "title": "Classify", "max_attempts": 2}],
                }
            ]
        }
    )

    name: str = Field(..., min_length=1, max_length=100)
    version: json_int(ge=1, le=MAX_INT) | None = Field(
        None, description="default: the next free version"
    )
    title: str = ""
    description: str = ""
    states: list[str]
    initial: str
    terminal: list[str]
    transitions: list[TransitionDefIn]
    steps: list[StepDefIn] = Field(default_factory=list)


class WorkflowQuery(InSchema):
    name: str | None = None


# --- Response schemas -------------------------------------------------------------------------
# What the endpoints below send (rendered by the *_to_dict functions that follow), key for key.
# Keys named "from" are aliases: operations that send them say by_alias=True.


class WorkflowRefOut(OutSchema):
    name: str
    version: int


class AllowedTransitionOut(OutSchema):
    to: str
    name: str | None


class WaitOut(OutSchema):
    signal: str
    deadline: datetime | None


class StepOut(OutSchema):
    key: str
    title: str
    status: StepStatus
    round: int
    attempts: int
    max_attempts: int
    last_error: dict[str, Any] | None
    inputs: dict[str, Any]
    outputs: dict[str, Any]
    branch: str | None
    waiting_on: WaitOut | None
    signal_payload: dict[str, Any] | None
    agent: str | None
    actor: str | None
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime


class HistoryOut(OutSchema):
    id: int
    kind: HistoryKind
    actor: str
    from_: str | None = Field(..., alias="from")
    to: str | None
    step: str | None
    round: int | None
    attempt: int | None
    reason: str
    error: dict[str, Any] | None
    data: dict[str, Any]
    task_version: int | None
    created_at: datetime


class FailedStepOut(OutSchema):
    key: str
    attempts: int
    max_attempts: int
    error: dict[str, Any] | None


class WaitingStepOut(OutSchema):
    step: str
    signal: str
    deadline: datetime | None


class TaskOut(OutSchema):
    id: UUID
    external_id: str | None
    workflow: WorkflowRefOut
    state: str
    finished: bool
    allowed_transitions: list[AllowedTransitionOut]
    params: dict[str, Any]
    metadata: dict[str, Any]
    version: int
    initiated_by: str
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    steps: list[StepOut]
    failed_steps: list[FailedStepOut] = Field(..., description="failed for good, with the error")
    waiting: list[WaitingStepOut]


class TaskWithSessionsOut(TaskOut):
    session_ids: list[UUID]


class CreatedTaskOut(TaskWithSessionsOut):
    signal_token: str = Field(
        ..., description="Shown once: lets an external system deliver this task's signals."
    )


class TaskDetailOut(TaskWithSessionsOut):
    history: list[HistoryOut] = Field(..., description="the most recent entries, oldest first")


class TaskPageOut(OutSchema):
    tasks: list[TaskOut]
    next_cursor: str | None = Field(..., description="null on the last page")


class HistoryPageOut(OutSchema):
    history: list[HistoryOut]
    has_more: bool


class StepDetailOut(StepOut):
    history: list[HistoryOut]


class TaskBriefOut(OutSchema):
    id: UUID
    state: str
    version: int
    finished: bool


class StepUpdateOut(OutSchema):
    step: StepOut
    task: TaskBriefOut
    replayed: bool


class SignalRecordOut(OutSchema):
    id: int
    name: str
    received_at: datetime
    consumed: bool


class SignalOut(OutSchema):
    signal: SignalRecordOut
    resolved_steps: list[str]
    task: TaskBriefOut
    replayed: bool


class TaskSessionOut(OutSchema):
    id: UUID
    title: str
    agent: str
    status: SessionStatus
    external_id: str | None


class TaskSessionsOut(OutSchema):
    sessions: list[TaskSessionOut]


class LinkOut(OutSchema):
    linked: list[UUID]
    session_ids: list[UUID]


class UnlinkOut(OutSchema):
    unlinked: bool
    session_ids: list[UUID]


class SessionTasksOut(OutSchema):
    tasks: list[TaskOut]


class LinkedTaskOut(OutSchema):
    """A task as the session API lists it (queries.linked_tasks_summary)."""

    id: UUID
    workflow: str
    workflow_version: int
    state: str
    version: int
    finished: bool


class TransitionDefOut(OutSchema):
    from_: str = Field(..., alias="from")
    to: str
    name: str
    reopen: list[str]


class StepDefOut(OutSchema):
    key: str
    title: str
    max_attempts: int


class WorkflowOut(OutSchema):
    name: str
    version: int
    title: str
    description: str
    states: list[str]
    initial: str
    terminal: list[str]
    transitions: list[TransitionDefOut]
    steps: list[StepDefOut]
    builtin: bool
    source: WorkflowDefinition.Source
    content_hash: str
    created_at: datetime


class WorkflowListOut(OutSchema):
    workflows: list[WorkflowOut]


# --- Rendering --------------------------------------------------------------------------------


def step_to_dict(step: Step) -> dict[str, Any]:
    return {
        "key": step.key,
        "title": step.title,
        "status": step.status,
        "round": step.round,
        "attempts": step.attempts,
        "max_attempts": step.max_attempts,
        "last_error": step.last_error,
        "inputs": step.inputs,
        "outputs": step.outputs,
        "branch": step.branch or None,
        "waiting_on": (
            {"signal": step.waiting_on, "deadline": _iso(step.wait_deadline)}
            if step.waiting_on
            else None
        ),
        "signal_payload": step.signal_payload,
        "agent": step.agent.name if step.agent_id and step.agent else None,
        "actor": step.actor or None,
        "started_at": _iso(step.started_at),
        "finished_at": _iso(step.finished_at),
        "updated_at": _iso(step.updated_at),
    }


def history_to_dict(entry: TaskHistory) -> dict[str, Any]:
    return {
        "id": entry.pk,
        "kind": entry.kind,
        "actor": entry.actor,
        "from": entry.from_state or None,
        "to": entry.to_state or None,
        "step": entry.step_key or None,
        "round": entry.round,
        "attempt": entry.attempt,
        "reason": entry.reason,
        "error": entry.error,
        "data": entry.data,
        "task_version": entry.task_version,
        "created_at": entry.created_at.isoformat(),
    }


def task_to_dict(
    task: Task,
    *,
    steps: list[Step] | None = None,
    history: list[TaskHistory] | None = None,
    session_ids: list[str] | None = None,
) -> dict[str, Any]:
    spec = task.spec
    body: dict[str, Any] = {
        "id": str(task.pk),
        "external_id": task.external_id,
        "workflow": {"name": spec.name, "version": spec.version},
        "state": task.state,
        "finished": spec.is_terminal(task.state),
        "allowed_transitions": [
            {"to": t.target, "name": t.name or None} for t in spec.allowed_from(task.state)
        ],
        "params": task.params,
        "metadata": task.metadata,
        "version": task.version,
        "initiated_by": task.initiated_by,
        "created_at": task.created_at.isoformat(),
        "updated_at": task.updated_at.isoformat(),
        "finished_at": _iso(task.finished_at),
    }
    if steps is not None:
        body["steps"] = [step_to_dict(s) for s in steps]
        # Why the task is stuck, at a glance: steps failed for good, with their last error.
        body["failed_steps"] = [
            {
                "key": s.key,
                "attempts": s.attempts,
                "max_attempts": s.max_attempts,
                "error": s.last_error,
            }
            for s in steps
            if s.status == StepStatus.FAILED
        ]
        body["waiting"] = [
            {"step": s.key, "signal": s.waiting_on, "deadline": _iso(s.wait_deadline)}
            for s in steps
            if s.status == StepStatus.WAITING
        ]
    if history is not None:
        body["history"] = [history_to_dict(h) for h in history]
    if session_ids is not None:
        body["session_ids"] = session_ids
    return body


def _task_brief(task: Task) -> dict[str, Any]:
    return {
        "id": str(task.pk),
        "state": task.state,
        "version": task.version,
        "finished": task.is_finished,
    }


def workflow_to_dict(definition: WorkflowDefinition) -> dict[str, Any]:
    return {
        **definition.definition,
        "builtin": definition.is_builtin,
        "source": definition.source,
        "content_hash": definition.content_hash,
        "created_at": definition.created_at.isoformat(),
    }


# --- Tasks ------------------------------------------------------------------------------------


@router.post(
    "/tasks",
    summary="Create a task (idempotent by external_id)",
    response=responses({201: CreatedTaskOut, 200: TaskWithSessionsOut}, 404, body=True),
    openapi_extra={"responses": {200: {"description": "The task with this external_id"}}},
)
def create(request: HttpRequest, payload: TaskIn) -> HttpResponse:
    api_key = _key(request)
    result = create_task(
        api_key.project,
        workflow=payload.workflow,
        workflow_version=payload.workflow_version,
        actor=_actor(request),
        params=payload.params,
        metadata=payload.metadata,
        session_ids=payload.session_ids,
        external_id=payload.external_id,
    )
    task = result.task
    body = task_to_dict(task, steps=task_steps(task), session_ids=session_ids_for_task(task))
    if result.signal_token is not None:
        # Shown once, to the creator: hand it to the external system that will signal the task.
        body["signal_token"] = result.signal_token
    return json_response(body, status=201 if result.created else 200)


@router.get(
    "/tasks",
    summary="List tasks (filters, cursor pagination)",
    response=responses({200: TaskPageOut}),
)
def list_tasks(request: HttpRequest, filters: Query[TaskListQuery]) -> HttpResponse:
    qs = filter_tasks(
        _key(request).project_id,
        TaskFilters(
            workflow=filters.workflow,
            state=filters.state,
            step_status=[str(s) for s in filters.step_status] if filters.step_status else None,
            session=filters.session,
            external_id=filters.external_id,
        ),
    )
    page, next_cursor = page_tasks(qs, cursor=filters.cursor, limit=filters.limit)
    return json_response(
        {
            "tasks": [task_to_dict(t, steps=list(t.steps.all())) for t in page],
            "next_cursor": next_cursor,
        }
    )


@router.get(
    "/tasks/{task_id}",
    summary="Read a task, with its steps and recent history",
    response=responses({200: TaskDetailOut}, 404),
    by_alias=True,
)
def read_task(request: HttpRequest, task_id: UUID, params: Query[TaskReadQuery]) -> HttpResponse:
    task = _task(request, task_id)
    return json_response(
        task_to_dict(
            task,
            steps=task_steps(task),
            history=recent_history(task, limit=params.history_limit),
            session_ids=session_ids_for_task(task),
        )
    )


@router.get(
    "/tasks/{task_id}/history",
    summary="A task's history, oldest first",
    response=responses({200: HistoryPageOut}, 404),
    by_alias=True,
)
def read_history(request: HttpRequest, task_id: UUID, params: Query[HistoryQuery]) -> HttpResponse:
    task = _task(request, task_id)
    qs = TaskHistory.objects.filter(task=task).order_by("id")
    if params.after_id is not None:
        qs = qs.filter(id__gt=params.after_id)
    if params.step:
        qs = qs.filter(step_key=params.step)
    rows = list(qs[: params.limit + 1])
    return json_response(
        {
            "history": [history_to_dict(h) for h in rows[: params.limit]],
            "has_more": len(rows) > params.limit,
        }
    )


@router.post(
    "/tasks/{task_id}/transitions",
    summary="Move the task along its workflow",
    response=responses({200: TaskOut}, 404, 409, body=True),
)
def transition(request: HttpRequest, task_id: UUID, payload: TransitionIn) -> HttpResponse:
    task = _task(request, task_id)
    transition_task(
        task,
        payload.to,
        transition=payload.transition,
        actor=_actor(request),
        expected_version=payload.expected_version,
        reason=payload.reason,
    )
    return json_response(task_to_dict(task, steps=task_steps(task)))


@router.get(
    "/tasks/{task_id}/steps/{key}",
    summary="One step, with all its attempts' history",
    response=responses({200: StepDetailOut}, 404),
    by_alias=True,
)
def read_step(request: HttpRequest, task_id: UUID, key: StorableStr) -> HttpResponse:
    task = _task(request, task_id)
    step = Step.objects.select_related("agent").filter(task=task, key=key).first()
    if step is None:
        raise NotFound(f"The task has no step {key!r}.", detail={"step": key})
    history = TaskHistory.objects.filter(task=task, step_key=key).order_by("id")
    return json_response({**step_to_dict(step), "history": [history_to_dict(h) for h in history]})


@router.put(
    "/tasks/{task_id}/steps/{key}",
    summary="Report a step's progress",
    response=responses({200: StepUpdateOut}, 404, 409, body=True),
)
def put_step(
    request: HttpRequest, task_id: UUID, key: StorableStr, payload: StepIn
) -> HttpResponse:
    task = _task(request, task_id)
    deadline = None
    if payload.waiting_on is not None:
        deadline = payload.waiting_on.deadline
        if deadline is not None and timezone.is_naive(deadline):
            deadline = deadline.replace(tzinfo=UTC)
        if payload.waiting_on.timeout_seconds is not None:
            deadline = timezone.now() + timedelta(seconds=payload.waiting_on.timeout_seconds)
    result = update_step(
        task,
        key,
        status=payload.status,
        actor=_actor(request),
        attempt=payload.attempt,
        error=payload.error.model_dump() if payload.error else None,
        inputs=payload.inputs,
        outputs=payload.outputs,
        branch=payload.branch,
        waiting_on=payload.waiting_on.signal if payload.waiting_on else None,
        wait_deadline=deadline,
        agent_name=payload.agent,
        expected_version=payload.expected_version,
        reason=payload.reason,
    )
    return json_response(
        {
            "step": step_to_dict(result.step),
            "task": _task_brief(result.task),
            "replayed": result.replayed,
        }
    )


@router.post(
    "/tasks/{task_id}/signals/{name}",
    summary="Deliver a signal (API key, or the task's signal token)",
    auth=[KeyOrSignalTokenBearer(), SignalTokenHeader(), SignalTokenQuery()],
    response=responses({200: SignalOut, 202: SignalOut}, 404, 409, body=True),
    openapi_extra={
        "responses": {
            202: {
                "description": (
                    "Stored; no step waits on it yet: the first wait on it will consume it"
                )
            }
        }
    },
)
def signal(
    request: HttpRequest,
    task_id: UUID,
    name: str = Path(..., pattern=IDENT_RE.pattern, description="the signal: an identifier"),
    payload: SignalIn | None = None,
) -> HttpResponse:
    auth = request.auth  # type: ignore[attr-defined]
    if isinstance(auth, SignalGrant):
        if auth.task.pk != task_id:
            # A token opens its own task only; anything else looks like a missing task.
            raise NotFound("Task not found.", detail={"task_id": str(task_id)})
        task, actor = auth.task, Actor.system("signal-token")
    else:
        task, actor = get_task_for_key(auth, task_id), Actor.for_key(auth)
    payload = payload or SignalIn()
    result = deliver_signal(
        task,
        name,
        actor=actor,
        payload=payload.payload,
        error=payload.error.model_dump() if payload.error else None,
        idempotency_key=payload.idempotency_key or request.headers.get("Idempotency-Key"),
    )
    body = {
        "signal": {
            "id": result.signal.pk,
            "name": result.signal.name,
            "received_at": result.signal.received_at.isoformat(),
            "consumed": result.signal.consumed_at is not None,
        },
        "resolved_steps": [s.key for s in result.resolved],
        "task": _task_brief(result.task),
        "replayed": result.replayed,
    }
    # 202: stored, and no step waits on it yet; the first wait on this signal will consume it.
    return json_response(body, status=200 if result.resolved or result.replayed else 202)


# --- Links ------------------------------------------------------------------------------------


@router.get(
    "/tasks/{task_id}/sessions",
    summary="The sessions linked to a task",
    response=responses({200: TaskSessionsOut}, 404),
)
def task_sessions(request: HttpRequest, task_id: UUID) -> HttpResponse:
    task = _task(request, task_id)
    return json_response(
        {
            "sessions": [
                {
                    "id": str(s.pk),
                    "title": s.title,
                    "agent": s.agent.name,
                    "status": s.status,
                    "external_id": s.external_id,
                }
                for s in sessions_for_task(task)
            ]
        }
    )


@router.post(
    "/tasks/{task_id}/sessions",
    summary="Link sessions to a task",
    response=responses({200: LinkOut}, 404, body=True),
)
def link(request: HttpRequest, task_id: UUID, payload: LinkIn) -> HttpResponse:
    task = _task(request, task_id)
    linked = link_sessions(task, payload.session_ids, actor=_actor(request))
    return json_response(
        {
            "linked": [str(s.pk) for s in linked],
            "session_ids": session_ids_for_task(task),
        }
    )


@router.delete(
    "/tasks/{task_id}/sessions/{session_id}",
    summary="Unlink a session from a task",
    response=responses({200: UnlinkOut}, 404),
)
def unlink(request: HttpRequest, task_id: UUID, session_id: UUID) -> HttpResponse:
    task = _task(request, task_id)
    removed = unlink_session(task, session_id, actor=_actor(request))
    return json_response({"unlinked": removed, "session_ids": session_ids_for_task(task)})


@router.get(
    "/sessions/{session_id}/tasks",
    summary="The tasks linked to a session",
    response=responses({200: SessionTasksOut}, 404),
)
def session_tasks(request: HttpRequest, session_id: UUID) -> HttpResponse:
    session = get_session_for_key(_key(request), session_id)
    return json_response(
        {"tasks": [task_to_dict(t, steps=list(t.steps.all())) for t in tasks_for_session(session)]}
    )


# --- Workflow definitions ---------------------------------------------------------------------


@router.post(
    "/workflows",
    summary="Register a workflow definition (a new version)",
    response=responses({201: WorkflowOut, 200: WorkflowOut}, 409, body=True),
    openapi_extra={"responses": {200: {"description": "This very definition, registered before"}}},
    by_alias=True,
)
def register(request: HttpRequest, payload: WorkflowIn) -> HttpResponse:
    api_key = _key(request)
    data = payload.model_dump(by_alias=True)
    definition, created = register_workflow_data(api_key.project, data, actor=_actor(request))
    return json_response(workflow_to_dict(definition), status=201 if created else 200)


@router.get(
    "/workflows",
    summary="Workflow definitions this project can start",
    response=responses({200: WorkflowListOut}),
    by_alias=True,
)
def list_workflows(request: HttpRequest, params: Query[WorkflowQuery]) -> HttpResponse:
    qs = visible_workflows(_key(request).project_id)
    if params.name:
        qs = qs.filter(name=params.name)
    return json_response({"workflows": [workflow_to_dict(d) for d in qs]})


@router.get(
    "/workflows/{name}",
    summary="One workflow definition (latest, or ?version=)",
    response=responses({200: WorkflowOut}, 404),
    by_alias=True,
)
def read_workflow(
    request: HttpRequest, name: StorableStr, version: int | None = None
) -> HttpResponse:
    try:
        definition = resolve_workflow(_key(request).project_id, name, version)
    except UnknownWorkflow as exc:  # a 422 when creating a task; here, a page that is not there
        raise NotFound(exc.message, detail=exc.detail) from None
    return json_response(workflow_to_dict(definition))
