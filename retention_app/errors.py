"""Errors of retention (rendered like every DomainError: see core.errors)."""

from core.errors import Conflict, DomainError


class SessionHasForks(Conflict):
    """A session with forks is not deleted alone (their history reads through it): the detail
    names the forks; asking with `with_forks` deletes them too."""

    code = "session_has_forks"


class SessionUnderLegalHold(Conflict):
    """A standing legal hold covers the session (or one of the forks going with it): nothing
    of it is deleted. The detail names the hold."""

    code = "legal_hold"


class ErasureHeld(Conflict):
    """Standing legal holds cover sessions the erasure would remove: nothing is erased until an
    admin lifts them. The detail lists every such hold."""

    code = "legal_hold"


class SessionErased(DomainError):
    """The session was removed by an erasure (a data subject's request): gone for good. The
    detail names the erasure, whose receipt says what went."""

    status = 410
    code = "erased"
