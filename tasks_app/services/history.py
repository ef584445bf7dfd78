"""Appending to a task's history and moving its version on; both under the task's row lock."""

from datetime import datetime
from typing import Any

from django.utils import timezone

from core.actors import Actor

from ..models import Task, TaskHistory


def bump_version(task: Task, *, now: datetime | None = None, **fields: Any) -> Task:
    """Version + 1 (and any other task fields) in one UPDATE; the caller holds the row lock."""
    now = now or timezone.now()
    task.version += 1
    task.updated_at = now
    for name, value in fields.items():
        setattr(task, name, value)
    Task.objects.filter(pk=task.pk).update(version=task.version, updated_at=now, **fields)
    return task


def append_history(
    task: Task,
    *,
    kind: str,
    actor: Actor,
    from_state: str = "",
    to_state: str = "",
    step_key: str = "",
    round: int | None = None,
    attempt: int | None = None,
    reason: str = "",
    error: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
    dedupe_key: str | None = None,
    now: datetime | None = None,
) -> TaskHistory:
    """Write one append-only history row stamped with the task's current version."""
    return TaskHistory.objects.create(
        task=task,
        kind=kind,
        actor=actor.label,
        from_state=str(from_state),
        to_state=str(to_state),
        step_key=step_key,
        round=round,
        attempt=attempt,
        reason=reason,
        error=error,
        data=data or {},
        task_version=task.version,
        dedupe_key=dedupe_key,
        created_at=now or timezone.now(),
    )
