"""One access helper per object kind, used by the API, the dashboard and the consumers.

Lookups are scoped to the caller's project: an object of another project is indistinguishable
from one that does not exist (404), so ids leak nothing across tenants (invariant 8).
"""

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from .errors import NotFound, PermissionDeniedError
from .models import ApiKey, Membership, Project, Role, Session


def _as_uuid(value: Any) -> uuid.UUID:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        raise NotFound("Session not found.") from None


def get_session_for_key(api_key: ApiKey, session_id: Any) -> Session:
    session = Session.objects.filter(pk=_as_uuid(session_id), project_id=api_key.project_id).first()
    if session is None:
        raise NotFound("Session not found.", detail={"session_id": str(session_id)})
    return session


def membership_for(user: AbstractBaseUser | AnonymousUser, project_id: int) -> Membership | None:
    if not user.is_authenticated or not 0 < project_id < 2**63:
        return None  # an id no bigint column holds belongs to no project (SQLite would raise)
    # The project rides along: every dashboard page shows its name.
    return (
        Membership.objects.select_related("project")
        .filter(user=user, project_id=project_id)
        .first()
    )


def require_role(
    user: AbstractBaseUser | AnonymousUser, project: Project | int, minimum: str = Role.VIEWER
) -> Membership:
    """The user's membership of `project` with at least `minimum`; 404 for non-members."""
    project_id = project.pk if isinstance(project, Project) else project
    membership = membership_for(user, project_id)
    if membership is None:
        raise NotFound("Project not found.")
    if not membership.has_role(minimum):
        raise PermissionDeniedError(
            f"This needs the {minimum} role; you are {membership.role}.",
            detail={"required": minimum, "role": membership.role},
        )
    return membership


def get_session_for_user(
    user: AbstractBaseUser | AnonymousUser, session_id: Any, minimum: str = Role.VIEWER
) -> tuple[Session, Membership]:
    session = (
        Session.objects.select_related("agent", "project", "parent")
        .filter(pk=_as_uuid(session_id), project__memberships__user_id=user.pk)
        .first()
        if user.is_authenticated
        else None
    )
    if session is None:
        raise NotFound("Session not found.", detail={"session_id": str(session_id)})
    return session, require_role(user, session.project_id, minimum)
