"""Dashboard views for sessions: parse, authorise (sessions_app.dashboard / access), render."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from .dashboard import base_context, project_for, user_projects
from .models import Membership


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    projects = user_projects(request.user)  # type: ignore[arg-type]
    if not projects:
        return render(request, "sessions_app/no_projects.html", {"user_projects": []})
    remembered = request.session.get("project_id")
    chosen = next((p for p in projects if p.pk == remembered), projects[0])
    return redirect("dashboard:overview", chosen.pk)


@require_GET
@login_required
def switch_project(request: HttpRequest) -> HttpResponse:
    try:
        project_id = int(request.GET.get("project", ""))
    except ValueError:
        return redirect("dashboard:home")
    membership = project_for(request, project_id)
    return redirect("dashboard:overview", membership.project_id)


@require_GET
@login_required
def overview(request: HttpRequest, project_id: int) -> HttpResponse:
    membership: Membership = project_for(request, project_id)
    context = base_context(request, membership, "overview")
    return render(request, "sessions_app/overview.html", context)
