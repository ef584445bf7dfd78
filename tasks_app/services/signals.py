"""Signals: an external dependency reports in and resolves the steps waiting on it; deadlines
fail the waits nobody answered.

A delivered signal is stored (TaskSignal) whether or not a step waits on it yet: a webhook that
beats the agent's wait is consumed when the wait starts. Delivery is idempotent by key.
"""

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.domain_events import publish
from core.text import check_storable_values

from ..domain_events import SignalReceived
from ..errors import InvalidInput
from ..models import HistoryKind, Step, StepStatus, Task, TaskSignal
from ..workflows import IDENT_RE
from .history import append_history, bump_version
from .locking import lock_task
from .step_changes import apply_step_change_locked, normalize_error


@dataclass
class SignalResult:
    signal: TaskSignal
    task: Task
    resolved: list[Step] = field(default_factory=list)
    # True when this idempotency_key was delivered before: nothing was written this time.
    replayed: bool = False


def _resolve_locked(
    task: Task, step: Step, signal: TaskSignal, *, actor: Actor, now: datetime
) -> None:
    """Finish the current attempt of a step waiting on `signal`: succeeded with the payload as
    its outputs, or failed with the signal's error (retry rules apply)."""
    reason = f"signal {signal.name}"
    if signal.error is not None:
        apply_step_change_locked(
            task,
            step,
            status=StepStatus.FAILED,
            attempt=step.attempts,
            new_attempt=False,
            actor=actor,
            now=now,
            error=signal.error,
            signal_payload=signal.payload,
            reason=reason,
        )
    else:
        apply_step_change_locked(
            task,
            step,
            status=StepStatus.SUCCEEDED,
            attempt=step.attempts,
            new_attempt=False,
            actor=actor,
            now=now,
            outputs=signal.payload,
            signal_payload=signal.payload,
            reason=reason,
        )


def deliver_signal(
    task: Task,
    name: str,
    *,
    actor: Actor,
    payload: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> SignalResult:
    """Deliver signal `name` to `task`: every step waiting on it is resolved (succeeded with
    `payload` as outputs, or failed with `error`), and the payload is recorded on the step and
    in history. With no step waiting, the signal is kept until one waits on it.

    A repeated `idempotency_key` returns the original delivery (replayed=True), writing nothing.
    Locks the task row and moves its version on. Publishes SignalReceived.
    """
    if not IDENT_RE.fullmatch(name):
        raise InvalidInput("A signal name is an identifier.", detail={"signal": name})
    if payload is not None and not isinstance(payload, dict):
        raise InvalidInput("A signal payload must be a JSON object.")
    check_storable_values(payload=payload, error=error)
    error = normalize_error(error)
    with transaction.atomic():
        locked = lock_task(task.pk)
        if idempotency_key is not None:
            original = TaskSignal.objects.filter(
                task=locked, idempotency_key=idempotency_key
            ).first()
            if original is not None:
                resolved = list(Step.objects.filter(task=locked, key__in=original.consumed_by))
                return SignalResult(signal=original, task=locked, resolved=resolved, replayed=True)
        now = timezone.now()
        signal = TaskSignal.objects.create(
            task=locked,
            name=name,
            payload=payload or {},
            error=error,
            actor=actor.label,
            idempotency_key=idempotency_key,
            received_at=now,
        )
        waiting = list(Step.objects.filter(task=locked, status=StepStatus.WAITING, waiting_on=name))
        bump_version(locked, now=now)
        append_history(
            locked,
            kind=HistoryKind.SIGNAL,
            actor=actor,
            reason=f"signal {name}",
            error=error,
            data={
                "signal": name,
                "payload": signal.payload,
                "idempotency_key": idempotency_key,
                "resolved": [s.key for s in waiting],
            },
            now=now,
        )
        for step in waiting:
            _resolve_locked(locked, step, signal, actor=actor, now=now)
        if waiting:
            signal.consumed_at = now
            signal.consumed_by = [s.key for s in waiting]
            signal.save(update_fields=["consumed_at", "consumed_by"])
        publish(
            SignalReceived(
                project_id=locked.project_id,
                task_id=str(locked.pk),
                signal=name,
                resolved=[s.key for s in waiting],
                version=locked.version,
            )
        )
    return SignalResult(signal=signal, task=locked, resolved=waiting)


def consume_pending_signal_locked(task: Task, step: Step, *, actor: Actor) -> bool:
    """If a signal `step` now waits on had already arrived, resolve the wait with it (oldest
    first). The caller holds the task lock. Returns whether the step was resolved."""
    signal = (
        TaskSignal.objects.filter(task=task, name=step.waiting_on, consumed_at__isnull=True)
        .order_by("id")
        .first()
    )
    if signal is None:
        return False
    now = timezone.now()
    _resolve_locked(task, step, signal, actor=actor, now=now)
    signal.consumed_at = now
    signal.consumed_by = [step.key]
    signal.save(update_fields=["consumed_at", "consumed_by"])
    return True


@dataclass
class ExpiryBatch:
    locked: int = 0  # tasks taken in this batch (fewer than the limit: nothing more is due)
    tasks: int = 0  # tasks with at least one wait expired
    steps: int = 0


DEADLINE_ACTOR = Actor.system("deadline")


def expire_deadlines_batch(*, limit: int = 100) -> ExpiryBatch:
    """Fail every wait whose deadline has passed, for at most `limit` tasks, in one transaction.

    Tasks are taken with FOR UPDATE SKIP LOCKED: several workers (or an overlapping beat run)
    split the due tasks between them instead of queueing, and a task busy with another writer is
    simply left for the next run. Each due step's current attempt fails with a `timeout` error
    (so retry rules apply: the last allowed attempt marks the step failed). A re-run finds only
    what is still due.
    """
    now = timezone.now()
    due = Step.objects.filter(status=StepStatus.WAITING, wait_deadline__lte=now)
    batch = ExpiryBatch()
    with transaction.atomic():
        tasks = list(
            Task.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("workflow")
            .filter(pk__in=due.values("task_id"))
            .order_by("pk")[:limit]
        )
        batch.locked = len(tasks)
        for task in tasks:
            # Re-read under the lock: a signal may have resolved the wait meanwhile.
            steps = list(due.filter(task=task))
            if not steps:
                continue
            batch.tasks += 1
            bump_version(task, now=now)
            for step in steps:
                deadline = step.wait_deadline
                apply_step_change_locked(
                    task,
                    step,
                    status=StepStatus.FAILED,
                    attempt=step.attempts,
                    new_attempt=False,
                    actor=DEADLINE_ACTOR,
                    now=now,
                    error={
                        "type": "timeout",
                        "message": f"No {step.waiting_on!r} signal arrived before "
                        f"{deadline.isoformat() if deadline else 'the deadline'}.",
                        "detail": {
                            "signal": step.waiting_on,
                            "deadline": deadline.isoformat() if deadline else None,
                        },
                    },
                    reason=f"deadline passed waiting on {step.waiting_on}",
                )
                batch.steps += 1
    return batch
