"""Project membership and roles: the one check every view, endpoint and consumer goes through.

Lookups are scoped to the caller's project: an object of another project is indistinguishable
from one that does not exist (404), so ids leak nothing across tenants (invariant 8).
"""

import uuid
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Model, QuerySet

from .errors import NotFound, PermissionDeniedError
from .models import Membership, Project, Role


def as_uuid(value: Any, what: str = "Session") -> uuid.UUID:
    """`value` as a UUID; a malformed id is simply an object that does not exist (404)."""
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        raise NotFound(f"{what} not found.") from None


def member_rows[M: Model](
    queryset: QuerySet[M], user: AbstractBaseUser | AnonymousUser, project_field: str = "project"
) -> QuerySet[M]:
    """`queryset` narrowed to rows of projects the user can see: their projects (every
    project for a superuser; none when signed out)."""
    if not user.is_authenticated:
        return queryset.none()
    if getattr(user, "is_superuser", False):
        return queryset
    return queryset.filter(**{f"{project_field}__memberships__user_id": user.pk})


def membership_for(user: AbstractBaseUser | AnonymousUser, project_id: int) -> Membership | None:
    """The user's membership of the project, or None.

    A superuser (a deployment's staff) who is not a member gets an unsaved admin membership of
    every project that exists: they see and act as an admin without appearing in its members.
    """
    if not user.is_authenticated or not 0 < project_id < 2**63:
        return None  # an id no bigint column holds belongs to no project
    # The project rides along: every dashboard page shows its name.
    membership = (
        Membership.objects.select_related("project")
        .filter(user=user, project_id=project_id)
        .first()
    )
    if membership is None and getattr(user, "is_superuser", False):
        project = Project.objects.filter(pk=project_id).first()
        if project is not None:
            membership = Membership(project=project, user=user, role=Role.ADMIN)  # type: ignore[misc]
    return membership


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
