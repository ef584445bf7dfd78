"""Moving a task along its workflow: exactly the transitions of the version it started with."""

from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.domain_events import publish
from core.services.audit import record_audit

from ..domain_events import TaskTransitioned
from ..errors import InvalidInput, InvalidTransition
from ..models import HistoryKind, Step, StepStatus, Task
from ..workflows import TransitionSpec, WorkflowSpec
from .history import append_history, bump_version
from .locking import check_version, lock_task


def _refusal(spec: WorkflowSpec, state: str, to: str | None, name: str | None) -> InvalidTransition:
    allowed = spec.allowed_from(state)
    wanted = to if name is None else f"{to or '?'} (transition {name!r})"
    if spec.is_terminal(state):
        message = f"The task is in the terminal state {state}; nothing leaves it."
    else:
        targets = ", ".join(spec.allowed_targets(state))
        message = f"A {spec.name} task in {state} cannot move to {wanted}; allowed: {targets}."
    return InvalidTransition(
        message,
        detail={
            "state": state,
            "to": to,
            "transition": name,
            "allowed": spec.allowed_targets(state),
            "allowed_transitions": [{"to": t.target, "name": t.name} for t in allowed],
        },
    )


def transition_task(
    task: Task,
    to: str | None = None,
    *,
    actor: Actor,
    expected_version: int | None = None,
    reason: str = "",
    transition: str | None = None,
) -> Task:
    """Move `task` to state `to` (or along the transition named `transition`).

    Locks the task row, so concurrent transitions queue: of two callers sending the same
    `expected_version`, the second finds the version moved and gets VersionMismatch (409) with
    nothing written. Raises InvalidInput (422: unknown state), InvalidTransition (409, naming the
    allowed moves) and VersionMismatch. Writes a transition history row and an audit entry;
    reopens the steps the transition names (their next round); on reaching a terminal state,
    skips the steps still pending or waiting. Publishes TaskTransitioned. Updates `task` in place.
    """
    spec = task.spec
    if to is None and transition is None:
        raise InvalidInput('A transition needs "to" (a state) or "transition" (its name).')
    if to is not None and to not in spec.states:
        raise InvalidInput(
            f"{to!r} is not a state of {spec.name} version {spec.version}.",
            detail={"to": to, "states": list(spec.states)},
        )
    with transaction.atomic():
        locked = lock_task(task.pk)
        check_version(locked, expected_version)
        current = locked.state
        chosen = spec.find_transition(current, to=to, name=transition)
        if chosen is None:
            raise _refusal(spec, current, to, transition)
        now = timezone.now()
        finished_at = now if spec.is_terminal(chosen.target) else None
        bump_version(locked, now=now, state=chosen.target, finished_at=finished_at)
        append_history(
            locked,
            kind=HistoryKind.TRANSITION,
            actor=actor,
            from_state=current,
            to_state=chosen.target,
            reason=reason,
            data={"transition": chosen.name},
            now=now,
        )
        _reopen_steps(locked, chosen, actor=actor)
        if finished_at is not None:
            _skip_unfinished_steps(locked, actor=actor)
        record_audit(
            locked.project_id,
            actor=actor,
            action="task.transition",
            target_type="task",
            target_id=locked.pk,
            detail={
                "from": current,
                "to": chosen.target,
                "transition": chosen.name,
                "reason": reason,
            },
        )
        publish(
            TaskTransitioned(
                project_id=locked.project_id,
                task_id=str(locked.pk),
                from_state=current,
                to_state=chosen.target,
                version=locked.version,
            )
        )
    for name in ("state", "version", "updated_at", "finished_at"):
        setattr(task, name, getattr(locked, name))
    return task


def _reopen_steps(task: Task, transition: TransitionSpec, *, actor: Actor) -> None:
    """Start the next round of each step the transition reopens (a loop goes round again).

    The previous round's outputs and errors stay in history; the step starts clean.
    """
    if not transition.reopen:
        return
    now = timezone.now()
    for step in Step.objects.filter(task=task, key__in=transition.reopen):
        old_status = step.status
        step.round += 1
        step.start_clean()
        step.save()
        append_history(
            task,
            kind=HistoryKind.STEP,
            actor=actor,
            from_state=old_status,
            to_state=StepStatus.PENDING,
            step_key=step.key,
            round=step.round,
            reason=f"reopened by {transition.name or transition.target}",
            now=now,
        )


def _skip_unfinished_steps(task: Task, *, actor: Actor) -> None:
    """A finished task waits for nothing: pending steps and open waits become skipped.

    Running attempts are left to finish (their agent may still report), but none starts.
    """
    now = timezone.now()
    for step in Step.objects.filter(task=task, status__in=[StepStatus.PENDING, StepStatus.WAITING]):
        old_status = step.status
        step.status = StepStatus.SKIPPED
        step.finished_at = now
        step.waiting_on = ""
        step.wait_deadline = None
        step.save()
        append_history(
            task,
            kind=HistoryKind.STEP,
            actor=actor,
            from_state=old_status,
            to_state=StepStatus.SKIPPED,
            step_key=step.key,
            round=step.round,
            attempt=step.attempts or None,
            reason=f"task reached {task.state}",
            now=now,
        )
