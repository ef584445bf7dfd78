"""Handoff conflicts (rendered like every DomainError: see core.errors)."""

from core.errors import Conflict, InvalidInput, NotFound, PermissionDeniedError

__all__ = [
    "AnswerNotAllowed",
    "HandoffAlreadyClaimed",
    "HandoffAlreadyOpen",
    "HandoffNotActive",
    "InvalidInput",
    "NotFound",
    "NotLeaseHolder",
    "PermissionDeniedError",
]


class HandoffAlreadyOpen(Conflict):
    """The session already has an active handoff (one per session)."""

    code = "handoff_already_open"


class HandoffAlreadyClaimed(Conflict):
    """Invariant 7: someone else's claim won; the detail names the holder."""

    code = "handoff_already_claimed"


class HandoffNotActive(Conflict):
    """The handoff's status does not allow this step (answered, cancelled, expired, …)."""

    code = "handoff_not_active"


class NotLeaseHolder(Conflict):
    """Only the person holding the handoff's live lease may act on it."""

    code = "not_lease_holder"


class AnswerNotAllowed(InvalidInput):
    """The answer type is not one the request's config (or kind) allows."""

    code = "answer_not_allowed"
