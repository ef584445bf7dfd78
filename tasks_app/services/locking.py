"""Row locks on tasks: the one serialisation point for everything that changes a task."""

from collections.abc import Iterable
from typing import Any

from django.db import connection

from ..errors import NotFound, VersionMismatch
from ..models import Task


def _require_atomic() -> None:
    if not connection.in_atomic_block:
        raise RuntimeError("task locks must be taken inside transaction.atomic()")


def lock_task(task_id: Any) -> Task:
    """SELECT … FOR UPDATE the task row (not its workflow) and return it fresh.

    Every writer of a task, its steps, history and signals takes this lock first, so their
    rules see committed state and their version bumps never interleave.
    """
    _require_atomic()
    task = (
        Task.objects.select_for_update(of=("self",))
        .select_related("workflow")
        .filter(pk=task_id)
        .first()
    )
    if task is None:
        raise NotFound("Task not found.", detail={"task_id": str(task_id)})
    return task


def lock_tasks(task_ids: Iterable[Any]) -> list[Task]:
    """Lock several tasks in primary-key order, so two callers can never deadlock."""
    return [lock_task(task_id) for task_id in sorted(set(task_ids), key=str)]


def check_version(task: Task, expected_version: int | None) -> None:
    if expected_version is not None and expected_version != task.version:
        raise VersionMismatch(
            f"The task is at version {task.version}, not {expected_version}: it changed since "
            "you read it. Nothing was written.",
            detail={
                "expected_version": expected_version,
                "version": task.version,
                "state": task.state,
            },
        )
