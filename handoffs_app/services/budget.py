"""A budget overrun opens a `budget` handoff: a person approves a new limit or closes.

The session store pauses the session and sends `sessions_app.signals.budget_exceeded` inside
that transaction (it cannot import this app); the receiver, connected in apps.py, opens the
handoff in the same transaction, so the pause and the request commit together.
"""

from typing import Any

from core.actors import Actor
from sessions_app.models import Session

from ..models import ACTIVE_STATUSES, Handoff, HandoffKind
from .handoffs import request_handoff_locked


def open_budget_handoff_on_overrun(
    sender: Any, *, session: Session, reason: str, actor: Actor, **kwargs: Any
) -> Handoff | None:
    """Open the budget handoff for `session` (row locked by the append); None when the session
    already has an active handoff (a person is on it)."""
    if Handoff.objects.filter(session_id=session.pk, status__in=ACTIVE_STATUSES).exists():
        return None
    return request_handoff_locked(
        session,
        kind=HandoffKind.BUDGET,
        reason=reason,
        payload={
            "reason": reason,
            "usage": {"tokens": session.tokens_used, "cost": str(session.cost_used)},
            "budget": {
                "max_tokens": session.budget_max_tokens,
                "max_cost": (
                    None if session.budget_max_cost is None else str(session.budget_max_cost)
                ),
            },
        },
        priority="high",
        due_in=None,
        idempotency_key=None,
        actor=actor,
    )
