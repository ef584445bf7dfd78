"""Project membership and roles: the one check every view, endpoint and consumer goes through.

Lookups are scoped to the caller's project: an object of another project is indistinguishable
from one that does not exist (404), so ids leak nothing across tenants (invariant 8).
"""

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from .errors import NotFound, PermissionDeniedError
from .models import Membership, Project, Role


def as_uuid(value: Any, what: str = "Session") -> uuid.UUID:
    """`value` as a UUID; a malformed id is simply an object that does not exist (404)."""
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        raise NotFound(f"{what} not found.") from None


def membership_for(user: AbstractBaseUser | AnonymousUser, project_id: int) -> Membership | None:
    if not user.is_authenticated or not 0 < project_id < 2**63:
        return None  # an id no bigint column holds belongs to no project
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
