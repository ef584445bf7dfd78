"""Session look-ups scoped to the caller's project (an API key's, or a signed-in member's)."""

import uuid
from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from core.access import as_uuid, member_rows, membership_for, require_role
from core.errors import DomainError, NotFound
from core.models import ApiKey, Membership, Role
from sessions_app import storage
from sessions_app.models import Session

# Why a session id names no session, said by an app above this one (retention_app: an erasure
# removed it, 410 `erased`): (the project it was in, the error to answer) or None. Registered by
# that app's ready(), so this app never imports it; asked only once a look-up has missed.
MissingSessionExplainer = Callable[[uuid.UUID], tuple[int, DomainError] | None]
_explainers: list[MissingSessionExplainer] = []


def explain_missing_sessions_with(explainer: MissingSessionExplainer) -> None:
    if explainer not in _explainers:
        _explainers.append(explainer)


def _explained(session_id: uuid.UUID, visible: Callable[[int], bool]) -> DomainError | None:
    for explain in _explainers:
        found = explain(session_id)
        if found is not None and visible(found[0]):
            return found[1]
    return None


def missing_session_error(session_id: Any, project_id: int) -> DomainError:
    """What to answer for a session id that the project's caller did not find: an explainer's
    error when the session was of this project (never reveal another project's), else 404."""
    try:
        sid = as_uuid(session_id)
    except NotFound:
        sid = None
    explained = sid and _explained(sid, lambda pid: pid == project_id)
    return explained or NotFound("Session not found.", detail={"session_id": str(session_id)})


def get_session_for_key(api_key: ApiKey, session_id: Any) -> Session:
    """The key's project's session (one fixed statement: the API's hot path), or 404 (or an
    explainer's error, missing_session_error)."""
    session = storage.session_in_project(as_uuid(session_id), api_key.project_id)
    if session is None:
        raise missing_session_error(session_id, api_key.project_id)
    return session


def get_session_for_user(
    user: AbstractBaseUser | AnonymousUser, session_id: Any, minimum: str = Role.VIEWER
) -> tuple[Session, Membership]:
    session = member_rows(
        Session.objects.select_related("agent", "project", "parent").filter(pk=as_uuid(session_id)),
        user,
    ).first()
    if session is None:
        explained = _explained(
            as_uuid(session_id), lambda pid: membership_for(user, pid) is not None
        )
        raise explained or NotFound("Session not found.", detail={"session_id": str(session_id)})
    return session, require_role(user, session.project_id, minimum)
