"""The dashboard shell every app's pages share: the project in the URL, the member's role,
the project switcher, and helpers for htmx partials and list pages.

Views of every app build their base context here, so navigation and role flags are the same on
every page whichever app renders it.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest

from core.access import require_role
from core.models import Membership, Project, Role


def user_projects(user: AbstractBaseUser) -> list[Project]:
    """The projects the user is a member of; a superuser's are all of them."""
    if getattr(user, "is_superuser", False):
        return list(Project.objects.order_by("name"))
    return list(Project.objects.filter(memberships__user=user).order_by("name"))


def project_for(request: HttpRequest, project_id: int, minimum: str = Role.VIEWER) -> Membership:
    """The signed-in user's membership of `project_id` (404 for non-members, 403 below role)."""
    membership = require_role(request.user, project_id, minimum)  # type: ignore[arg-type]
    # Remember the project for the next visit of "/", writing the session only on a change
    # (every assignment marks it modified: a database write per page view otherwise).
    if request.session.get("project_id") != project_id:
        request.session["project_id"] = project_id
    return membership


def base_context(request: HttpRequest, membership: Membership, nav: str) -> dict[str, Any]:
    # The project this page shows, checked above: the navigation's counts (a context
    # processor of the composing app) are for this project only.
    request.dashboard_project_id = membership.project_id  # type: ignore[attr-defined]
    return {
        "project": membership.project,
        "membership": membership,
        "can_operate": membership.has_role(Role.OPERATOR),
        "is_admin": membership.has_role(Role.ADMIN),
        "user_projects": user_projects(request.user),  # type: ignore[arg-type]
        "nav": nav,
    }


def role_context(membership: Membership) -> dict[str, Any]:
    """The role flags partials use, for renders without a request (websocket pushes)."""
    return {
        "membership": membership,
        "can_operate": membership.has_role(Role.OPERATOR),
        "is_admin": membership.has_role(Role.ADMIN),
    }


def form_errors(form: Any) -> list[str]:
    """A form's errors as plain sentences ("Status: Select a valid choice …")."""
    messages = []
    for name, errors in form.errors.items():
        label = form.fields[name].label if name in form.fields else None
        for error in errors:
            messages.append(f"{label}: {error}" if label else str(error))
    return messages


def htmx_partial_for(request: HttpRequest, *targets: str) -> str | None:
    """The id the htmx request targets, if it is one of `targets` (else the full page)."""
    htmx = getattr(request, "htmx", None)
    if not htmx or htmx.history_restore_request:
        return None
    return htmx.target if htmx.target in targets else None


def cursor_links(request: HttpRequest, next_cursor: str | None) -> dict[str, str]:
    """Query strings of a list's first and next page: the same filters, another cursor."""
    params = request.GET.copy()
    params.pop("cursor", None)
    first_query = params.urlencode()
    if next_cursor:
        params["cursor"] = next_cursor
    return {"first_query": first_query, "next_query": params.urlencode() if next_cursor else ""}
