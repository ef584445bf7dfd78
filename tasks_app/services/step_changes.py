"""Changing a step under its task's lock: the floor that update_step and signals stand on.

Step attempts: start, wait, succeed, fail, skip — with retries and idempotent replays.

A step's life per round: pending → (attempt n) running / waiting → succeeded, or failed. A failed
attempt with attempts left puts the step back to pending (a retry is due) and keeps the error in
`last_error`; the failure of attempt max_attempts marks it failed for good. Every change is one
history row whose `dedupe_key` is (step, round, attempt, outcome[, signal]): the same update sent
again finds that row and writes nothing, whatever has happened since.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.actors import Actor
from core.domain_events import publish
from sessions_app.models import Agent

from ..domain_events import StepChanged
from ..errors import AttemptConflict, InvalidInput, NotFound, StepNotActive, TaskFinished
from ..models import ACTIVE_STEP_STATUSES, HistoryKind, Step, StepStatus, Task
from .history import append_history

UPDATABLE_STATUSES = frozenset(
    {
        StepStatus.RUNNING,
        StepStatus.WAITING,
        StepStatus.SUCCEEDED,
        StepStatus.FAILED,
        StepStatus.SKIPPED,
    }
)


@dataclass
class StepResult:
    step: Step
    task: Task
    # True when this exact update had been applied before: nothing was written this time.
    replayed: bool = False


def normalize_error(error: Any) -> dict[str, Any] | None:
    """A step error as stored: {"type": str, "message": str, "detail": any JSON}."""
    if error is None:
        return None
    if not isinstance(error, dict) or not isinstance(error.get("type"), str) or not error["type"]:
        raise InvalidInput('An error needs a "type" (and a "message", optionally a "detail").')
    message = error.get("message", "")
    if not isinstance(message, str):
        raise InvalidInput('An error "message" must be a string.')
    return {"type": error["type"], "message": message, "detail": error.get("detail") or {}}


def dedupe_key(step: Step, attempt: int, outcome: str, signal: str = "") -> str:
    key = f"step:{step.key}:r{step.round}:a{attempt}:{outcome}"
    return f"{key}:{signal}" if signal else key


def _get_step(task: Task, key: str) -> Step:
    step = Step.objects.select_related("agent").filter(task=task, key=key).first()
    if step is None:
        raise NotFound(
            f"The task has no step {key!r}.",
            detail={"step": key, "steps": [s.key for s in task.spec.steps]},
        )
    return step


def _attempt_for(step: Step, status: str, attempt: int | None) -> int:
    if status == StepStatus.SKIPPED:
        return step.attempts  # skipping consumes no attempt
    if attempt is not None:
        return attempt
    # No number given: a pending step starts its next attempt, an active one continues.
    return step.attempts + 1 if step.status == StepStatus.PENDING else step.attempts


def _check_attempt(task: Task, step: Step, status: str, n: int) -> bool:
    """Validate attempt `n` for `status`; True when it starts a new attempt."""
    if status == StepStatus.SKIPPED:
        if step.is_finished:
            raise StepNotActive(
                f"Step {step.key} has already {step.status}; it cannot be skipped.",
                detail={"step": step.key, "status": step.status},
            )
        return False
    detail = {
        "step": step.key,
        "attempt": n,
        "attempts": step.attempts,
        "max_attempts": step.max_attempts,
        "status": step.status,
        "round": step.round,
    }
    if step.is_finished:
        raise StepNotActive(
            f"Step {step.key} has {step.status}; it takes no more updates this round.",
            detail=detail,
        )
    if n == step.attempts + 1:
        if step.status != StepStatus.PENDING:
            raise AttemptConflict(
                f"Attempt {step.attempts} of step {step.key} is still {step.status}; "
                f"finish it (succeed or fail) before starting attempt {n}.",
                detail=detail,
            )
        if n > step.max_attempts:
            raise AttemptConflict(
                f"Step {step.key} allows {step.max_attempts} attempts.", detail=detail
            )
        if task.is_finished:
            raise TaskFinished(
                f"The task is {task.state} (terminal): no new attempt starts.",
                detail={**detail, "state": task.state},
            )
        return True
    if n == step.attempts and n >= 1:
        if step.status not in ACTIVE_STEP_STATUSES:
            raise StepNotActive(
                f"Attempt {n} of step {step.key} has ended (the step is {step.status}); "
                f"start attempt {n + 1} to retry.",
                detail=detail,
            )
        return False
    raise AttemptConflict(
        f"Step {step.key} is at attempt {step.attempts}; attempt {n} is "
        + ("stale." if n < step.attempts else "out of order."),
        detail=detail,
    )


def apply_step_change_locked(
    task: Task,
    step: Step,
    *,
    status: str,
    attempt: int,
    new_attempt: bool,
    actor: Actor,
    now: datetime,
    error: dict[str, Any] | None = None,
    inputs: dict[str, Any] | None = None,
    outputs: dict[str, Any] | None = None,
    branch: str | None = None,
    waiting_on: str = "",
    wait_deadline: datetime | None = None,
    signal_payload: dict[str, Any] | None = None,
    agent: Agent | None = None,
    reason: str = "",
) -> Step:
    """Apply one validated change to `step` and record it; the caller holds the task lock and
    has already moved the task's version on (the history row is stamped with it)."""
    old_status = step.status
    if new_attempt:
        step.attempts = attempt
        step.started_at = now
        step.finished_at = None
    if inputs is not None:
        step.inputs = inputs
    if agent is not None:
        step.agent = agent
    step.actor = actor.label
    if status != StepStatus.WAITING:
        step.waiting_on = ""
        step.wait_deadline = None

    notes = reason
    if status == StepStatus.RUNNING:
        step.status = StepStatus.RUNNING
    elif status == StepStatus.WAITING:
        step.status = StepStatus.WAITING
        step.waiting_on = waiting_on
        step.wait_deadline = wait_deadline
    elif status == StepStatus.SUCCEEDED:
        step.status = StepStatus.SUCCEEDED
        step.finished_at = now
        if outputs is not None:
            step.outputs = outputs
        if branch is not None:
            step.branch = branch
        if signal_payload is not None:
            step.signal_payload = signal_payload
    elif status == StepStatus.FAILED:
        step.last_error = error
        if signal_payload is not None:
            step.signal_payload = signal_payload
        if attempt >= step.max_attempts:
            step.status = StepStatus.FAILED
            step.finished_at = now
            verdict = f"attempts exhausted ({attempt} of {step.max_attempts}): step failed"
        else:
            step.status = StepStatus.PENDING
            verdict = f"attempt {attempt} of {step.max_attempts} failed; a retry is due"
        notes = f"{reason}; {verdict}" if reason else verdict
    elif status == StepStatus.SKIPPED:
        step.status = StepStatus.SKIPPED
        step.finished_at = now
    step.save()

    data: dict[str, Any] = {"step_status": step.status}
    if inputs is not None:
        data["inputs"] = inputs
    if outputs is not None:
        data["outputs"] = outputs
    if branch is not None:
        data["branch"] = branch
    if status == StepStatus.WAITING:
        data["waiting_on"] = {
            "signal": waiting_on,
            "deadline": wait_deadline.isoformat() if wait_deadline else None,
        }
    if signal_payload is not None:
        data["signal_payload"] = signal_payload
    if agent is not None:
        data["agent"] = agent.name
    append_history(
        task,
        kind=HistoryKind.STEP,
        actor=actor,
        from_state=old_status,
        to_state=status,
        step_key=step.key,
        round=step.round,
        attempt=attempt or None,
        reason=notes,
        error=error,
        data=data,
        dedupe_key=dedupe_key(step, attempt, status, waiting_on),
        now=now,
    )
    publish(
        StepChanged(
            project_id=task.project_id,
            task_id=str(task.pk),
            step=step.key,
            status=step.status,
            attempt=step.attempts,
            version=task.version,
        )
    )
    return step
