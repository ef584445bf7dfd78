"""Lifecycle transitions, exactly the moves of DESIGN.md's diagram.

Each transition locks the session row, validates the move, appends a durable `lifecycle`
event (from, to, actor, reason), writes an audit entry and publishes LifecycleChanged.
"""

from typing import Any

from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.domain_events import publish
from core.errors import InvalidTransition
from core.services.audit import record_audit
from sessions_app.models import ALLOWED_TRANSITIONS, EventKind, Session, SessionStatus

from ..domain_events import LifecycleChanged
from .log import EventDraft, insert_events_locked


def transition_locked(
    session: Session,
    to: str,
    *,
    actor: Actor,
    reason: str = "",
    detail: dict[str, Any] | None = None,
) -> Session:
    """Move `session` to `to`; the caller holds a transaction (and ideally the row lock).

    `detail` adds keys to the lifecycle event's content (e.g. the handoff that caused it).
    """
    current = SessionStatus(session.status)
    if to not in ALLOWED_TRANSITIONS[current]:
        allowed = sorted(ALLOWED_TRANSITIONS[current])
        raise InvalidTransition(
            f"A {current} session cannot move to {to}.",
            detail={"status": str(current), "to": str(to), "allowed": allowed},
        )
    insert_events_locked(
        session,
        [
            EventDraft(
                kind=EventKind.LIFECYCLE,
                content={
                    **(detail or {}),
                    "from": str(current),
                    "to": str(to),
                    "reason": reason,
                    "actor": actor.label,
                },
            )
        ],
        actor=actor,
        system=True,
    )
    now = timezone.now()
    session.status = to
    update_fields = ["status", "updated_at"]
    if to == SessionStatus.CLOSED:
        session.closed_at = now
        update_fields.append("closed_at")
    elif to == SessionStatus.ARCHIVED:
        session.archived_at = now
        update_fields.append("archived_at")
    Session.objects.filter(pk=session.pk).update(
        **{f: getattr(session, f) for f in update_fields if f != "updated_at"}, updated_at=now
    )
    record_audit(
        session.project_id,
        actor=actor,
        action=f"session.{to}",
        target_type="session",
        target_id=session.pk,
        detail={**(detail or {}), "from": str(current), "to": str(to), "reason": reason},
    )
    publish(
        LifecycleChanged(
            project_id=session.project_id,
            session_id=str(session.pk),
            from_status=str(current),
            to_status=str(to),
            reason=reason,
            actor=actor.label,
        )
    )
    return session


def transition_session(session: Session, to: str, *, actor: Actor, reason: str = "") -> Session:
    """Lock, re-read and move the session. Raises InvalidTransition (409) on a disallowed move."""
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        transition_locked(locked, to, actor=actor, reason=reason)
    for name in ("status", "head_seq", "closed_at", "archived_at", "updated_at"):
        setattr(session, name, getattr(locked, name))
    return session


def pause_session(session: Session, *, actor: Actor, reason: str = "") -> Session:
    return transition_session(session, SessionStatus.PAUSED, actor=actor, reason=reason)


def resume_session(session: Session, *, actor: Actor, reason: str = "") -> Session:
    return transition_session(session, SessionStatus.RESUMED, actor=actor, reason=reason)


def close_session(session: Session, *, actor: Actor, reason: str = "") -> Session:
    return transition_session(session, SessionStatus.CLOSED, actor=actor, reason=reason)


def archive_session(session: Session, *, actor: Actor, reason: str = "") -> Session:
    return transition_session(session, SessionStatus.ARCHIVED, actor=actor, reason=reason)
