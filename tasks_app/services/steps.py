"""Recording a step's progress (the API's PUT /tasks/{id}/steps/{key}).

The rules of attempts and retries are services.step_changes; a wait on a signal that has
already arrived is resolved here through services.signals, which sits between the two.
"""

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.text import check_storable_values
from sessions_app.services.sessions import get_or_register_agent

from ..errors import InvalidInput
from ..models import StepStatus, Task, TaskHistory
from ..workflows import IDENT_RE
from .history import bump_version
from .locking import check_version, lock_task
from .signals import consume_pending_signal_locked
from .step_changes import (
    UPDATABLE_STATUSES,
    StepResult,
    _attempt_for,
    _check_attempt,
    _get_step,
    apply_step_change_locked,
    dedupe_key,
    normalize_error,
)


def update_step(
    task: Task,
    key: str,
    *,
    status: str,
    actor: Actor,
    attempt: int | None = None,
    error: dict[str, Any] | None = None,
    inputs: dict[str, Any] | None = None,
    outputs: dict[str, Any] | None = None,
    branch: str | None = None,
    waiting_on: str | None = None,
    wait_deadline: datetime | None = None,
    agent_name: str | None = None,
    expected_version: int | None = None,
    reason: str = "",
) -> StepResult:
    """Record progress of step `key`: start (running), wait on a signal, succeed with outputs,
    fail with an error, or skip.

    `attempt` names the attempt the update is about (default: the next one for a pending step,
    the current one otherwise). The same (attempt, status) sent again is a replay: nothing is
    written and replayed=True, even if the task moved on since. Locks the task row; moves the
    task's version on; raises NotFound (no such step), InvalidInput, VersionMismatch,
    AttemptConflict (stale, out of order, past max_attempts), StepNotActive and TaskFinished
    (all 409). A wait on a signal that has already arrived resolves at once. Publishes
    StepChanged.
    """
    if status not in UPDATABLE_STATUSES:
        raise InvalidInput(
            f"A step update's status is one of {', '.join(sorted(UPDATABLE_STATUSES))}.",
            detail={"status": status, "allowed": sorted(UPDATABLE_STATUSES)},
        )
    check_storable_values(error=error, inputs=inputs, outputs=outputs)
    error = normalize_error(error)
    if status == StepStatus.FAILED and error is None:
        raise InvalidInput('A failed step needs an "error" {type, message, detail}.')
    if status != StepStatus.FAILED and error is not None:
        raise InvalidInput('Only a failed step takes an "error".')
    if status == StepStatus.WAITING:
        if not waiting_on or not IDENT_RE.fullmatch(waiting_on):
            raise InvalidInput(
                'A waiting step needs "waiting_on" with a signal name (an identifier).'
            )
    elif waiting_on or wait_deadline:
        raise InvalidInput('Only a waiting step takes "waiting_on".')
    for name, value in (("inputs", inputs), ("outputs", outputs)):
        if value is not None and not isinstance(value, dict):
            raise InvalidInput(f"A step's {name} must be a JSON object.")
    if attempt is not None and attempt < 1:
        raise InvalidInput("attempt starts at 1.", detail={"attempt": attempt})
    agent = get_or_register_agent(task.project, agent_name) if agent_name else None

    with transaction.atomic():
        locked = lock_task(task.pk)
        step = _get_step(locked, key)
        n = _attempt_for(step, status, attempt)
        if TaskHistory.objects.filter(
            task=locked, dedupe_key=dedupe_key(step, n, status, waiting_on or "")
        ).exists():
            return StepResult(step=step, task=locked, replayed=True)
        check_version(locked, expected_version)
        new_attempt = _check_attempt(locked, step, status, n)
        now = timezone.now()
        bump_version(locked, now=now)
        apply_step_change_locked(
            locked,
            step,
            status=status,
            attempt=n,
            new_attempt=new_attempt,
            actor=actor,
            now=now,
            error=error,
            inputs=inputs,
            outputs=outputs,
            branch=branch,
            waiting_on=waiting_on or "",
            wait_deadline=wait_deadline,
            agent=agent,
            reason=reason,
        )
        if status == StepStatus.WAITING:
            consume_pending_signal_locked(locked, step, actor=actor)
    return StepResult(step=step, task=locked)
