"""The data the task pages and their live updates render.

Views and consumers build their template context here, so the first render, the htmx swap and
the websocket push of a partial get the same data. Nothing here builds HTML: the templates
(autoescaped) do, including the state diagram (see diagram.py and templatetags/).
"""

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db.models import Prefetch, prefetch_related_objects

from core.models import Membership, Project
from sessions_app.models import Session

from .forms import TaskFilterForm, TaskHistoryForm
from .models import Step, Task
from .queries import (
    filter_tasks,
    history_slice,
    latest_history_id,
    page_tasks,
    sessions_for_task,
)

TASK_PAGE = "tasks_app/task_detail.html"
LIST_PAGE = "tasks_app/task_list.html"
TASKS_PER_PAGE = 50
HISTORY_PER_PAGE = 50


def with_steps(task: Task) -> Task:
    """Prefetch the steps (and their agents) the task panel shows: one query."""
    prefetch_related_objects(
        [task], Prefetch("steps", queryset=Step.objects.select_related("agent"))
    )
    return task


# --- Tasks list -----------------------------------------------------------------------------


def linked_session(project: Project, form: TaskFilterForm) -> Session | None:
    """The session the list is filtered by, if it is one of the project's."""
    session_id = form.cleaned_data.get("session")
    if session_id is None:
        return None
    return Session.objects.filter(project=project, pk=session_id).first()


def task_page(project: Project, form: TaskFilterForm) -> tuple[list[Task], str | None]:
    return page_tasks(
        filter_tasks(project, form.to_filters()),
        cursor=form.cleaned_data.get("cursor") or None,
        limit=TASKS_PER_PAGE,
    )


# --- Task page ------------------------------------------------------------------------------


@dataclass
class HistoryView:
    rows: list[Any]  # TaskHistory, newest first
    has_more: bool
    more_query: str  # the query string of the next (older) slice
    filter_query: str
    filtered: bool
    live: bool  # new rows are inserted on top as they happen (websocket)
    ws_query: str


def task_history(task: Task, form: TaskHistoryForm) -> HistoryView:
    """One slice of the task's history, newest first, and the links around it.

    The newest id is read before the slice, so a row appended meanwhile arrives once, by the
    websocket (which resumes after it), never twice.
    """
    data = form.cleaned_data
    newest = latest_history_id(task)
    before = data.get("before")
    filters = form.filter_params
    slice_ = history_slice(
        task,
        before_id=before if before is not None else newest + 1,
        step=filters.get("step"),
        kind=filters.get("kind"),
        limit=HISTORY_PER_PAGE,
    )
    more = {**filters, "before": slice_.rows[-1].pk} if slice_.rows else filters
    live = before is None
    return HistoryView(
        rows=slice_.rows,
        has_more=slice_.has_more,
        more_query=urlencode(more),
        filter_query=urlencode(filters),
        filtered=bool(filters),
        live=live,
        ws_query=urlencode({**filters, "after": newest, "rows": int(live)}),
    )


def linked_sessions(task: Task) -> list[Session]:
    return list(sessions_for_task(task))


def task_page_context(task: Task, membership: Membership) -> dict[str, Any]:
    """Header, panel and linked sessions (the history is added by the caller)."""
    return {
        "task": with_steps(task),
        "project": task.project,
        "membership": membership,
        "linked_sessions": linked_sessions(task),
    }
