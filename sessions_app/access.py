"""Session look-ups scoped to the caller's project (an API key's, or a signed-in member's)."""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from core.access import as_uuid, member_rows, require_role
from core.errors import NotFound
from core.models import ApiKey, Membership, Role
from sessions_app import storage
from sessions_app.models import Session


def get_session_for_key(api_key: ApiKey, session_id: Any) -> Session:
    """The key's project's session (one fixed statement: the API's hot path), or 404."""
    session = storage.session_in_project(as_uuid(session_id), api_key.project_id)
    if session is None:
        raise NotFound("Session not found.", detail={"session_id": str(session_id)})
    return session


def get_session_for_user(
    user: AbstractBaseUser | AnonymousUser, session_id: Any, minimum: str = Role.VIEWER
) -> tuple[Session, Membership]:
    session = member_rows(
        Session.objects.select_related("agent", "project", "parent").filter(pk=as_uuid(session_id)),
        user,
    ).first()
    if session is None:
        raise NotFound("Session not found.", detail={"session_id": str(session_id)})
    return session, require_role(user, session.project_id, minimum)
