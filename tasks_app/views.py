"""Dashboard views for tasks: parse, authorise (project_for / tasks_app.access), render.

Read-only (viewer and up): agents drive tasks through the API. One template per page; htmx
requests get a named partial of that same template ("tasks_app/task_detail.html#task-history"),
chosen by the element the request targets. Domain errors (404 outside the project) are rendered
by config.middleware.DashboardDomainErrorMiddleware, as a page or a fragment.
"""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from core.live_rows import live_query, render_started
from core.pages import base_context, cursor_links, form_errors, htmx_partial_for, project_for

from .access import get_task_for_user
from .dashboard import (
    LIST_PAGE,
    TASK_PAGE,
    linked_session,
    task_history,
    task_page,
    task_page_context,
)
from .forms import TaskFilterForm, TaskHistoryForm
from .queries import workflow_choices


@require_GET
@login_required
@vary_on_headers("HX-Request")
def task_list(request: HttpRequest, project_id: int) -> HttpResponse:
    membership = project_for(request, project_id)
    project = membership.project
    form = TaskFilterForm(workflow_choices(project), request.GET)
    partial = htmx_partial_for(request, "task-results")
    template = LIST_PAGE + (f"#{partial}" if partial else "")
    context = base_context(request, membership, "tasks")
    context["form"] = form
    if not form.is_valid():
        context["errors"] = form_errors(form)
        return render(request, template, context, status=400)
    rendered_at = render_started()  # before the read: what the page's socket catches up from
    tasks, next_cursor = task_page(project, form)
    context.update(
        {
            "tasks": tasks,
            **cursor_links(request, next_cursor),
            "is_first_page": not form.cleaned_data.get("cursor"),
            "is_filtered": form.is_filtered,
            "filter_session": linked_session(project, form),
            "ws_url": f"/ws/projects/{project.pk}/tasks/?"
            + live_query(request.GET, rendered_at, tasks),
        }
    )
    return render(request, template, context)


@require_GET
@login_required
@vary_on_headers("HX-Request")
def task_detail(request: HttpRequest, task_id: str) -> HttpResponse:
    task, membership = get_task_for_user(request.user, task_id)
    form = TaskHistoryForm(task, request.GET)
    valid = form.is_valid()
    context = {
        "task": task,
        "history_form": form,
        "history": task_history(task, form) if valid else None,
        "history_errors": [] if valid else form_errors(form),
    }
    status = 200 if valid else 400
    partial = htmx_partial_for(request, "task-history", "history-more")
    if partial == "history-more" and valid:
        return render(request, f"{TASK_PAGE}#history-rows", context)
    if partial:
        return render(request, f"{TASK_PAGE}#task-history", context, status=status)
    context.update(base_context(request, membership, "tasks"))
    context.update(task_page_context(task, membership))
    return render(request, TASK_PAGE, context, status=status)
