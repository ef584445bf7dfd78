"""Access to tasks, scoped by project (invariant 8): another project's task is a 404, exactly
like a task that does not exist. Used by the API, the dashboard and the consumers."""

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from core.access import member_rows, require_role
from core.models import ApiKey, Membership, Role

from .errors import NotFound
from .models import Task
from .services.tasks import SIGNAL_TOKEN_PREFIX, hash_signal_token


def _not_found(task_id: Any) -> NotFound:
    return NotFound("Task not found.", detail={"task_id": str(task_id)})


def _as_uuid(value: Any) -> uuid.UUID:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        raise _not_found(value) from None


def get_task_for_key(api_key: ApiKey, task_id: Any) -> Task:
    task = (
        Task.objects.select_related("workflow")
        .filter(pk=_as_uuid(task_id), project_id=api_key.project_id)
        .first()
    )
    if task is None:
        raise _not_found(task_id)
    return task


def get_task_for_user(
    user: AbstractBaseUser | AnonymousUser, task_id: Any, minimum: str = Role.VIEWER
) -> tuple[Task, Membership]:
    """The task and the user's membership of its project; 404 for non-members, PermissionDenied
    (403) below `minimum`."""
    task = member_rows(
        Task.objects.select_related("workflow", "project").filter(pk=_as_uuid(task_id)), user
    ).first()
    if task is None:
        raise _not_found(task_id)
    return task, require_role(user, task.project_id, minimum)


def get_task_for_signal_token(raw_token: str) -> Task | None:
    """The one task a signal token opens (to deliver signals, nothing else), or None."""
    if not raw_token.startswith(SIGNAL_TOKEN_PREFIX):
        return None
    # The lookup is by the hash of a 256-bit secret: nothing to learn from timing.
    return (
        Task.objects.select_related("workflow", "project")
        .filter(signal_token_hash=hash_signal_token(raw_token))
        .first()
    )
