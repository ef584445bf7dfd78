"""Shared plumbing of dashboard views: the project in the URL, the member's role, base context."""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest

from .access import require_role
from .models import Membership, Project, Role


def user_projects(user: AbstractBaseUser) -> list[Project]:
    return list(Project.objects.filter(memberships__user=user).order_by("name"))


def project_for(request: HttpRequest, project_id: int, minimum: str = Role.VIEWER) -> Membership:
    """The signed-in user's membership of `project_id` (404 for non-members, 403 below role)."""
    membership = require_role(request.user, project_id, minimum)  # type: ignore[arg-type]
    request.session["project_id"] = project_id
    return membership


def base_context(request: HttpRequest, membership: Membership, nav: str) -> dict[str, Any]:
    return {
        "project": membership.project,
        "membership": membership,
        "can_operate": membership.has_role(Role.OPERATOR),
        "is_admin": membership.has_role(Role.ADMIN),
        "user_projects": user_projects(request.user),  # type: ignore[arg-type]
        "nav": nav,
    }
