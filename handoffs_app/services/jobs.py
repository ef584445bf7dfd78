"""What the beat jobs do: lapsed leases back to the queue, and the SLA (overdue, expiry).

Each batch takes its rows with SELECT … FOR UPDATE SKIP LOCKED in one transaction, so
overlapping runs and several workers share the work, and a re-run finds only what is still
due. Every change is a recorded step, like a person's.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from core.actors import Actor

from ..domain_events import HandoffExpired, HandoffOverdue
from ..models import LEASED_STATUSES, UNANSWERED_STATUSES, Handoff, HandoffStatus, Priority
from .handoffs import LEASE_ACTOR, hand_back_locked, return_to_queue_locked
from .records import event_fields, lock_session, record_step

SLA_ACTOR = Actor.system("handoff-sla")


def expire_leases_batch(*, now: datetime | None = None, limit: int = 100) -> int:
    """Handoffs whose lease lapsed: a claimed or taken-over one returns to the queue (a
    `lease_expired` record; a take-over ends); an answered one is handed back for its holder
    (the agent has its answer). Returns how many were handled."""
    now = now or timezone.now()
    with transaction.atomic():
        due = list(
            Handoff.objects.select_for_update(of=("self",), skip_locked=True)
            .select_related("lease_holder")
            .filter(status__in=LEASED_STATUSES, lease_expires_at__lt=now)
            .order_by("lease_expires_at")[:limit]
        )
        for handoff in due:
            if handoff.status == HandoffStatus.ANSWERED:
                lock_session(handoff)
                record_step(
                    handoff,
                    "lease_expired",
                    actor=LEASE_ACTOR,
                    detail={"previous_holder": _holder(handoff)},
                    event=None,
                )
                hand_back_locked(handoff, actor=LEASE_ACTOR, reason="lease expired after answer")
            else:
                return_to_queue_locked(handoff, actor=LEASE_ACTOR, lapsed=True)
    return len(due)


def _holder(handoff: Handoff) -> str | None:
    user = handoff.lease_holder
    return None if user is None else Actor.for_user(user).label


@dataclass
class SlaResult:
    overdue: int
    expired: int

    @property
    def handled(self) -> int:
        return self.overdue + self.expired


def enforce_sla_batch(*, now: datetime | None = None, limit: int = 100) -> SlaResult:
    """Unanswered handoffs past due_at become overdue (priority raised one step, once; a
    `handoff.overdue` event); past expires_at they expire (the agent is told:
    `handoff.expired`; a take-over never applies to an unanswered one)."""
    now = now or timezone.now()
    with transaction.atomic():
        expiring = list(
            Handoff.objects.select_for_update(of=("self",), skip_locked=True)
            .select_related("lease_holder")
            .filter(status__in=UNANSWERED_STATUSES, expires_at__lt=now)
            .order_by("expires_at")[:limit]
        )
        for handoff in expiring:
            lock_session(handoff)
            handoff.status = HandoffStatus.EXPIRED
            handoff.overdue = True
            handoff.resolved_at = now
            handoff.lease_expires_at = None
            handoff.save(
                update_fields=[
                    "status",
                    "overdue",
                    "resolved_at",
                    "lease_expires_at",
                    "updated_at",
                ]
            )
            record_step(
                handoff,
                "expired",
                actor=SLA_ACTOR,
                detail={"expires_at": handoff.expires_at.isoformat()},
                event=HandoffExpired(**event_fields(handoff, SLA_ACTOR)),
            )
        overdue = list(
            Handoff.objects.select_for_update(of=("self",), skip_locked=True)
            .select_related("lease_holder")
            .filter(status__in=UNANSWERED_STATUSES, overdue=False, due_at__lt=now)
            .order_by("due_at")[: max(0, limit - len(expiring))]
        )
        for handoff in overdue:
            lock_session(handoff)
            before = handoff.priority
            handoff.overdue = True
            handoff.priority = min(handoff.priority + 1, Priority.URGENT)
            handoff.save(update_fields=["overdue", "priority", "updated_at"])
            record_step(
                handoff,
                "overdue",
                actor=SLA_ACTOR,
                detail={
                    "due_at": handoff.due_at.isoformat(),
                    "priority_from": Priority(before).label,
                    "priority": handoff.priority_name,
                },
                event=HandoffOverdue(
                    **event_fields(handoff, SLA_ACTOR), due_at=handoff.due_at.isoformat()
                ),
            )
    return SlaResult(overdue=len(overdue), expired=len(expiring))
