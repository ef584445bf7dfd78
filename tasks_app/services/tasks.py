"""Creating tasks."""

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.actors import Actor
from core.domain_events import publish
from core.models import Project
from core.services.audit import record_audit
from core.text import check_storable_values

from ..domain_events import TaskCreated
from ..models import HistoryKind, Step, StepStatus, Task
from .history import append_history
from .links import link_sessions_locked, resolve_sessions
from .workflows import resolve_workflow

SIGNAL_TOKEN_PREFIX = "sbt_"


def hash_signal_token(raw_token: str) -> str:
    # 256 random bits: a fast unsalted hash is enough (nothing to guess), as for API keys.
    return hashlib.sha256(raw_token.encode()).hexdigest()


def new_signal_token() -> str:
    return f"{SIGNAL_TOKEN_PREFIX}{secrets.token_urlsafe(32)}"


@dataclass
class CreatedTask:
    task: Task
    created: bool
    # The raw signal token: returned once, to the creator, and never stored. None on a replay.
    signal_token: str | None = None


def create_task(
    project: Project,
    *,
    workflow: str,
    actor: Actor,
    workflow_version: int | None = None,
    params: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    session_ids: Iterable[Any] = (),
    external_id: str | None = None,
) -> CreatedTask:
    """Start a task of `workflow` (given version, or the latest) in its initial state, with one
    pending step per declared step, linked to the given sessions of the project.

    The same `external_id` again returns the existing task (created=False, no token). Raises
    UnknownWorkflow (422) and NotFound (a session id outside the project). Writes a `created`
    history row and an audit entry; publishes TaskCreated.
    """
    check_storable_values(params=params, metadata=metadata)
    definition = resolve_workflow(project, workflow, workflow_version)
    spec = definition.spec
    if external_id is not None:
        existing = Task.objects.filter(project=project, external_id=external_id).first()
        if existing is not None:
            return CreatedTask(task=existing, created=False)
    sessions = resolve_sessions(project.pk, session_ids)
    token = new_signal_token()
    try:
        with transaction.atomic():
            task = Task.objects.create(
                project=project,
                workflow=definition,
                external_id=external_id,
                state=spec.initial,
                params=params or {},
                metadata=metadata or {},
                initiated_by=actor.label,
                initiated_by_key=actor.api_key,
                initiated_by_user=actor.user,
                signal_token_hash=hash_signal_token(token),
            )
            Step.objects.bulk_create(
                [
                    Step(
                        task=task,
                        key=s.key,
                        title=s.title,
                        position=i,
                        max_attempts=s.max_attempts,
                        status=StepStatus.PENDING,
                    )
                    for i, s in enumerate(spec.steps)
                ]
            )
            append_history(
                task,
                kind=HistoryKind.CREATED,
                actor=actor,
                to_state=spec.initial,
                data={
                    "workflow": spec.name,
                    "workflow_version": spec.version,
                    "params": task.params,
                },
                now=timezone.now(),
            )
            link_sessions_locked(task, sessions, actor=actor)
            record_audit(
                project,
                actor=actor,
                action="task.create",
                target_type="task",
                target_id=task.pk,
                detail={"workflow": spec.name, "version": spec.version, "external_id": external_id},
            )
            publish(
                TaskCreated(
                    project_id=task.project_id,
                    task_id=str(task.pk),
                    state=task.state,
                    version=task.version,
                )
            )
    except IntegrityError:
        # The same external_id created concurrently: the constraint picked one winner.
        if external_id is None:
            raise
        return CreatedTask(
            task=Task.objects.get(project=project, external_id=external_id), created=False
        )
    return CreatedTask(task=task, created=True, signal_token=token)
