"""The floor every handoff step stands on: the project's SLA, row locks, the lease check, and
`record_step`, which writes a step's durable `handoff` event into the session's log, its audit
entry and its outboxed domain event, all in the caller's transaction.
"""

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.utils import timezone

from core.access import require_role
from core.actors import Actor
from core.domain_events import publish
from core.models import Role
from core.services.audit import record_audit
from sessions_app.models import EventKind, Session
from sessions_app.services.log import EventDraft, insert_events_locked

from ..domain_events import HandoffEvent
from ..errors import HandoffNotActive, NotLeaseHolder
from ..models import LEASED_STATUSES, Handoff, HandoffSettings

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def sla_for(project_id: int) -> HandoffSettings:
    """The project's SLA settings (the defaults, unsaved, when it has none)."""
    found = HandoffSettings.objects.filter(project_id=project_id).first()
    return found if found is not None else HandoffSettings(project_id=project_id)


def require_transaction(what: str) -> None:
    if not connection.in_atomic_block:
        raise RuntimeError(f"{what} must run inside a transaction")


def lock_handoff(handoff_id: Any) -> Handoff:
    """The handoff row, locked (FOR UPDATE) for the rest of the caller's transaction."""
    require_transaction("lock_handoff")
    return (
        Handoff.objects.select_for_update(of=("self",))
        .select_related("session", "lease_holder")
        .get(pk=handoff_id)
    )


def holder_label(handoff: Handoff) -> str | None:
    user = handoff.lease_holder
    return None if user is None else Actor.for_user(user).label


def require_holder(handoff: Handoff, user: "User", *, now: datetime | None = None) -> None:
    """Only the person holding the live lease may act: NotLeaseHolder (409) otherwise, or
    HandoffNotActive (409) when the handoff is past the point of acting."""
    now = now or timezone.now()
    if handoff.status not in LEASED_STATUSES:
        if handoff.status == "open":
            raise NotLeaseHolder(
                "Claim the handoff before acting on it.",
                detail={"status": handoff.status, "holder": None},
            )
        raise HandoffNotActive(
            f"The handoff is {handoff.status}; nothing more can be done with it.",
            detail={"status": handoff.status},
        )
    if handoff.lease_holder_id != user.pk:
        raise NotLeaseHolder(
            "Only the person holding this handoff may act on it.",
            detail={"status": handoff.status, "holder": holder_label(handoff)},
        )
    if handoff.lease_expires_at is None or handoff.lease_expires_at <= now:
        raise NotLeaseHolder(
            "Your lease on this handoff has expired; claim it again.",
            detail={"status": handoff.status, "holder": holder_label(handoff)},
        )
    # A holder whose role was lowered since the claim acts no more (PermissionDenied, 403).
    require_role(user, handoff.project_id, Role.OPERATOR)


def lock_session(handoff: Handoff) -> Session:
    """The handoff's session row, locked. Order: handoff first, then session, everywhere."""
    require_transaction("lock_session")
    session = Session.objects.select_for_update().get(pk=handoff.session_id)
    handoff.session = session
    return session


def record_step(
    handoff: Handoff,
    step: str,
    *,
    actor: Actor,
    event: HandoffEvent | None,
    detail: dict[str, Any] | None = None,
) -> None:
    """Write step `step` of `handoff`: a durable `handoff` event in its session's log (system
    written, so accepted whatever the session's status), an audit entry `handoff.<step>`, and
    `event` (outboxed) — all in the caller's transaction."""
    require_transaction("record_step")
    content: dict[str, Any] = {
        "handoff_id": str(handoff.pk),
        "step": step,
        "kind": handoff.kind,
        "status": handoff.status,
        "actor": actor.label,
        **(detail or {}),
    }
    if event is not None:
        # First: its relay is then the first thing to run after the commit (before the log's
        # live notice), so a waiting agent's long-poll wakes as early as it can.
        publish(event)
    insert_events_locked(
        handoff.session,
        [EventDraft(kind=EventKind.HANDOFF, content=content)],
        actor=actor,
        system=True,
    )
    record_audit(
        handoff.project_id,
        actor=actor,
        action=f"handoff.{step}",
        target_type="handoff",
        target_id=handoff.pk,
        detail={"session_id": str(handoff.session_id), **(detail or {})},
    )


def event_fields(handoff: Handoff, actor: Actor) -> dict[str, Any]:
    """The fields every HandoffEvent carries, from the row as it now is."""
    return {
        "project_id": handoff.project_id,
        "handoff_id": str(handoff.pk),
        "session_id": str(handoff.session_id),
        "kind": handoff.kind,
        "status": handoff.status,
        "priority": handoff.priority_name,
        "actor": actor.label,
        "holder": holder_label(handoff),
    }
