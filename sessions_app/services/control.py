"""What a person at the desk changes on a session besides its lifecycle: who has taken it over
from the agent, and its budget. Both run inside the caller's transaction (the handoff app's
services call them next to their own writes) and take the session row lock.
"""

from decimal import Decimal

from django.db import connection
from django.utils import timezone

from core.actors import Actor
from core.services.audit import record_audit
from sessions_app.models import Session


def _require_transaction(what: str) -> None:
    if not connection.in_atomic_block:
        raise RuntimeError(f"{what} must run inside the change's transaction")


def set_taken_over(session: Session, *, holder: str, actor: Actor) -> Session:
    """Mark `session` as taken over by `holder` (an actor label), or hand it back with "".

    While set, the allocating UPDATE refuses agents' appends (SessionTakenOver, 409) and
    accepts people's. Audited; the caller writes the log record of why.
    """
    _require_transaction("set_taken_over")
    now = timezone.now()
    Session.objects.filter(pk=session.pk).update(taken_over_by=holder, updated_at=now)
    session.taken_over_by = holder
    session.updated_at = now
    record_audit(
        session.project_id,
        actor=actor,
        action="session.taken_over" if holder else "session.handed_back",
        target_type="session",
        target_id=session.pk,
        detail={"taken_over_by": holder},
    )
    return session


def set_budget(
    session: Session,
    *,
    max_tokens: int | None,
    max_cost: Decimal | None,
    actor: Actor,
) -> Session:
    """Replace the session's budget (None: no limit of that kind). Audited."""
    _require_transaction("set_budget")
    locked = Session.objects.select_for_update().get(pk=session.pk)
    before = {
        "max_tokens": locked.budget_max_tokens,
        "max_cost": None if locked.budget_max_cost is None else str(locked.budget_max_cost),
    }
    Session.objects.filter(pk=session.pk).update(
        budget_max_tokens=max_tokens, budget_max_cost=max_cost, updated_at=timezone.now()
    )
    session.budget_max_tokens = max_tokens
    session.budget_max_cost = max_cost
    record_audit(
        session.project_id,
        actor=actor,
        action="session.budget",
        target_type="session",
        target_id=session.pk,
        detail={
            "before": before,
            "after": {
                "max_tokens": max_tokens,
                "max_cost": None if max_cost is None else str(max_cost),
            },
        },
    )
    return session
