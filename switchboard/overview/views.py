"""The dashboard shell's pages: home (the remembered project's overview), the project switcher,
and the overview (status counts, waiting sessions and handoffs, recent changes, tasks needing
attention, the events chart). Parse, authorise (core.pages), render.

The overview stays live through overview.consumers (ws/projects/<id>/?view=overview); its chart
and tasks card poll (see below).
"""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from core.pages import base_context, htmx_partial_for, project_for, user_projects
from switchboard.overview.context import events_chart, overview_live_context, overview_tasks_context


@require_GET
@login_required
def home(request: HttpRequest) -> HttpResponse:
    projects = user_projects(request.user)  # type: ignore[arg-type]
    if not projects:
        return render(request, "switchboard/no_projects.html", {"user_projects": []})
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


# --- Overview -------------------------------------------------------------------------------


@require_GET
@login_required
@vary_on_headers("HX-Request")
def overview(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id)
    project = membership.project
    if htmx_partial_for(request, "events-chart"):
        # The chart polls itself every half minute.
        return render(
            request,
            "switchboard/overview.html#events-chart",
            {"project": project, "chart": events_chart(project)},
        )
    if htmx_partial_for(request, "tasks-attention"):
        # Polled every minute: a task becomes stuck by the clock, with no event to push.
        return render(
            request,
            "switchboard/overview.html#tasks-attention",
            {"project": project, **overview_tasks_context(project)},
        )
    context = base_context(request, membership, "overview")
    context.update(overview_live_context(project))
    context.update(overview_tasks_context(project))
    request.handoff_counts = context["handoff_counts"]  # type: ignore[attr-defined]  (the nav's)
    context["chart"] = events_chart(project)
    context["ws_url"] = f"/ws/projects/{project.pk}/?view=overview"
    return render(request, "switchboard/overview.html", context)
