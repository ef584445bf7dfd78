"""Legal holds: placed and lifted by admins with a reason, audited. While one stands over a
session (its own, its agent's or its project's), nothing of it is compacted or deleted;
closing and archiving still happen."""

from collections.abc import Sequence

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from core.actors import Actor
from core.domain_events import publish
from core.errors import InvalidInput, NotFound
from core.models import Project
from core.services.audit import record_audit
from sessions_app.models import Agent, Session

from ..domain_events import HoldChanged, RetentionChanged
from ..models import HoldScope, LegalHold

REASON_MAX = 1000


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("A legal hold needs a reason.", detail={"reason": "required"})
    if len(reason) > REASON_MAX:
        raise InvalidInput(f"The reason is at most {REASON_MAX} characters.")
    return reason


def _standing(
    project: Project, scope: str, session: Session | None, agent: Agent | None
) -> QuerySet[LegalHold]:
    return LegalHold.objects.filter(
        project=project, scope=scope, session=session, agent=agent, released_at__isnull=True
    )


def place_hold(
    project: Project,
    *,
    actor: Actor,
    reason: str,
    session: Session | None = None,
    agent: Agent | None = None,
) -> tuple[LegalHold, bool]:
    """Place a hold on a session, an agent or (neither) the whole project. Placing one that
    already stands returns it (False: nothing new)."""
    reason = _reason(reason)
    scope = HoldScope.SESSION if session else HoldScope.AGENT if agent else HoldScope.PROJECT
    with transaction.atomic():
        # Waits for a retention batch of the project in flight (it holds the row FOR SHARE):
        # once this commits, every later batch sees the hold.
        Project.objects.select_for_update(no_key=True).filter(pk=project.pk).first()
        if session is not None and not Session.objects.filter(pk=session.pk).exists():
            # Deleted while this waited for the lock (services.deletion holds it FOR SHARE).
            raise NotFound("Session not found.", detail={"session_id": str(session.pk)})
        existing = _standing(project, scope, session, agent).first()
        if existing is not None:
            return existing, False
        try:
            with transaction.atomic():
                hold = LegalHold.objects.create(
                    project=project,
                    scope=scope,
                    session=session,
                    agent=agent,
                    reason=reason,
                    created_by=actor.label,
                )
        except IntegrityError:  # placed concurrently: the one standing hold
            return _standing(project, scope, session, agent).get(), False
        _announce(hold, actor, "retention.hold", {"reason": reason}, held=True)
    return hold, True


def lift_hold(hold: LegalHold, *, actor: Actor, reason: str = "") -> LegalHold:
    with transaction.atomic():
        locked = LegalHold.objects.select_for_update().get(pk=hold.pk)
        if locked.released_at is not None:
            return locked
        locked.released_at = timezone.now()
        locked.released_by = actor.label
        locked.release_reason = (reason or "").strip()[:REASON_MAX]
        locked.save(update_fields=["released_at", "released_by", "release_reason"])
        _announce(locked, actor, "retention.release", {"reason": locked.release_reason}, held=False)
    return locked


def lift_session_hold(session: Session, *, actor: Actor, reason: str = "") -> LegalHold:
    hold = _standing(session.project, HoldScope.SESSION, session, None).first()
    if hold is None:
        raise NotFound("This session has no legal hold.")
    return lift_hold(hold, actor=actor, reason=reason)


def _announce(
    hold: LegalHold, actor: Actor, action: str, detail: dict[str, object], *, held: bool
) -> None:
    target_type, target_id = (
        ("session", hold.session_id)
        if hold.session_id
        else ("agent", hold.agent_id)
        if hold.agent_id
        else ("project", hold.project_id)
    )
    record_audit(
        hold.project_id,
        actor=actor,
        action=action,
        target_type=target_type,
        target_id=target_id,
        detail={"scope": hold.scope, "hold": hold.pk, **detail},
    )
    publish(
        HoldChanged(
            project_id=hold.project_id,
            session_id=str(hold.session_id) if hold.session_id else "",
            scope=hold.scope,
            agent_id=hold.agent_id,
            held=held,
        )
    )
    publish(RetentionChanged(project_id=hold.project_id, what="hold", id=str(hold.pk)))


def session_hold(session: Session) -> LegalHold | None:
    """The standing hold covering `session`: its own, else its agent's, else its project's."""
    found = covering_hold([session])
    return found[0] if found else None


def covering_hold(sessions: Sequence[Session]) -> tuple[LegalHold, Session] | None:
    """A standing hold covering any of `sessions` (all of one project), with the first of them
    it covers: a session's own hold before an agent's before the project's; None if none."""
    if not sessions:
        return None
    holds = LegalHold.objects.filter(
        project_id=sessions[0].project_id, released_at__isnull=True
    ).filter(
        Q(scope=HoldScope.SESSION, session_id__in=[s.pk for s in sessions])
        | Q(scope=HoldScope.AGENT, agent_id__in={s.agent_id for s in sessions})
        | Q(scope=HoldScope.PROJECT)
    )
    order = {HoldScope.SESSION: 0, HoldScope.AGENT: 1, HoldScope.PROJECT: 2}
    hold = min(holds, key=lambda h: (order[HoldScope(h.scope)], h.pk), default=None)
    if hold is None:
        return None
    covered = next(
        s
        for s in sessions
        if hold.scope == HoldScope.PROJECT
        or (hold.scope == HoldScope.AGENT and s.agent_id == hold.agent_id)
        or s.pk == hold.session_id
    )
    return hold, covered
