"""Websocket consumers of the task pages: thin and read-only (core.live holds the shared bases;
switchboard/sessions/consumers.py describes the frame format).

Each authenticates from scope["user"], checks access with tasks_app.access / require_role (via
database_sync_to_async), joins a group of core.realtime, and turns the high-level
events the task services publish after commit ({"type": "task.<what>", "task_id", "project_id",
…}) into partials of the page's own template, sent as htmx out-of-band swaps. Nothing here
writes domain state; anything a client sends is ignored.

ws/tasks/<uuid>/?after=<newest history id shown>&step=&kind=&rows=1|0  (the task page)
    On every task event: #task-header and #task-panel replaced (`true`); history rows newer
    than `after` matching step/kind inserted on top (`afterbegin:#history-rows`, unless rows=0:
    a page showing an older slice); #task-sessions replaced when links changed.
ws/projects/<id>/tasks/?<the list's filters and cursor>  (the tasks list)
    Shown rows replaced in place (`true`) or removed (`delete`) when they stop matching; on
    the first page, new matching tasks inserted on top (`afterbegin:#task-rows`); a change
    that would reshuffle this page shows a notice with a refresh link instead.
"""

from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from django.http import QueryDict
from django.template.loader import render_to_string

from core.access import require_role
from core.cursors import decode_cursor
from core.errors import DomainError
from core.live import (
    CLOSE_BAD_REQUEST,
    CLOSE_NOT_FOUND,
    CLOSE_UNAUTHENTICATED,
    AccessLost,
    LiveConsumer,
    LiveListConsumer,
)
from core.live_rows import RowChanges, ShownPage, rendered_page, rows_changed_since
from core.realtime import task_group

from .access import get_task_for_user
from .dashboard import (
    LIST_PAGE,
    TASK_PAGE,
    linked_sessions,
    task_page,
    with_steps,
)
from .forms import TaskFilterForm, TaskHistoryForm
from .models import Task
from .queries import filter_tasks, history_slice, latest_history_id, workflow_choices

# At most this many history rows per push; beyond it the page says to reload.
LIVE_MAX_ROWS = 100
# Changes to a project's tasks are collected this long and rendered once.
LIST_FLUSH_SECONDS = 0.3


# --- One task -------------------------------------------------------------------------------


@dataclass
class TaskStream:
    """What one task page shows live, and how far its history has been brought up to date."""

    user: Any
    task_id: str
    step: str
    kind: str
    rows: bool
    covered: int  # every history row up to this id has been shown (or filtered out)

    @classmethod
    def open(cls, user: Any, task_id: str, query: str) -> "TaskStream":
        task, _ = get_task_for_user(user, task_id)
        params = QueryDict(query)
        form = TaskHistoryForm(task, params)
        if not form.is_valid():
            raise ValueError("invalid history settings")
        newest = latest_history_id(task)
        try:
            after = int(params.get("after", newest))
        except ValueError:
            after = newest
        return cls(
            user=user,
            task_id=str(task.pk),
            step=form.filter_params.get("step", ""),
            kind=form.filter_params.get("kind", ""),
            rows=params.get("rows", "1") == "1",
            covered=min(max(after, 0), newest),
        )

    def _task(self) -> Task:
        try:
            task, _ = get_task_for_user(self.user, self.task_id)
        except DomainError:
            raise AccessLost from None
        return task

    def frame(self, links_changed: bool = False) -> str:
        """Header and panel, the history rows since `covered`, and (if links changed) the
        linked sessions; "" when nothing happened since the last frame."""
        task = self._task()
        new = history_slice(task, after_id=self.covered, limit=LIVE_MAX_ROWS)
        if not new.rows and not links_changed:
            return ""
        # Read again after its history: a transition that committed between the two reads is
        # in the rows now covered, so no later frame would render its state if this one did
        # not (a transition commits the task and its history row together).
        task = self._task()
        if new.rows:
            self.covered = new.rows[0].pk
        context = {"task": with_steps(task), "oob": True}
        parts = [
            render_to_string(f"{TASK_PAGE}#{name}", context)
            for name in ("task-header", "task-panel")
        ]
        if self.rows:
            shown = [
                row
                for row in new.rows
                if (not self.step or row.step_key == self.step)
                and (not self.kind or row.kind == self.kind)
            ]
            parts.append(
                render_to_string(
                    f"{TASK_PAGE}#live-history", {"task": task, "rows": shown, "gap": new.has_more}
                )
            )
        if links_changed or any(row.kind in ("link", "unlink") for row in new.rows):
            parts.append(
                render_to_string(
                    f"{TASK_PAGE}#task-sessions",
                    {**context, "linked_sessions": linked_sessions(task)},
                )
            )
        return "".join(parts)


class TaskConsumer(LiveConsumer):
    """ws/tasks/<uuid>/?after=<newest history id shown>&step=&kind=&rows=1|0"""

    async def connect(self) -> None:
        user = self.user()
        if user is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        task_id = str(self.scope["url_route"]["kwargs"]["task_id"])
        query = self.scope.get("query_string", b"").decode("latin-1")
        try:
            self.stream = await database_sync_to_async(TaskStream.open)(user, task_id, query)
        except DomainError:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        except ValueError:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
        await self.join([task_group(self.stream.task_id)])
        await self.accept()
        # Changes made between the page's render and this connection.
        await self.send_frame(await self.run(self.stream.frame))

    async def _changed(self, event: dict[str, Any]) -> None:
        if str(event.get("task_id")) != self.stream.task_id:
            return
        links = event.get("type") == "task.links"
        await self.send_frame(await self.run(self.stream.frame, links))

    task_created = _changed
    task_transition = _changed
    task_step = _changed
    task_signal = _changed
    task_links = _changed


# --- One project's tasks list ---------------------------------------------------------------


@dataclass
class TaskListStream:
    """Keeps one page of the tasks list (its filters and cursor) up to date, newest first.

    Knows which rows the page shows (the same keyset query as the view, once, at connect);
    core.live_rows sorts out what a flush does to them.
    """

    user: Any
    project_id: int
    form: TaskFilterForm
    page: ShownPage
    # Whether opening noted what changed since the page's render (LiveListConsumer flushes).
    caught_up: bool = False

    @classmethod
    def open(cls, user: Any, project_id: int, query: str) -> "TaskListStream":
        membership = require_role(user, project_id)
        project = membership.project
        params = QueryDict(query)
        form = TaskFilterForm(workflow_choices(project), params)
        if not form.is_valid():
            raise ValueError("invalid filters")
        page, next_cursor = task_page(project, form)
        cursor = form.cleaned_data.get("cursor")
        rendered = rendered_page(params)
        stream = cls(
            user=user,
            project_id=project_id,
            form=form,
            page=ShownPage(
                known=rendered[1] if rendered else {str(t.pk) for t in page},
                last_key=_sort_key(page[-1]) if next_cursor else None,
                cursor_key=decode_cursor(cursor) if cursor else None,
            ),
        )
        if rendered:
            # What no notice brought between the page's render and this join: tasks changed
            # or created since, and shown ones deleted.
            found = rows_changed_since(project.tasks.all(), rendered[0], stream.page.known)
            stream.caught_up = stream.page.catch_up(*found)
        return stream

    def note(self, kind: str, task_id: str) -> bool:
        if kind == "task.created":
            self.page.created.add(task_id)
        self.page.changed.add(task_id)
        return True

    def take(self) -> tuple[set[str], set[str]]:
        return self.page.take()

    def flush(self, ids: set[str], created: set[str]) -> str:
        try:
            membership = require_role(self.user, self.project_id)
        except DomainError:
            raise AccessLost from None
        matching = {
            str(t.pk): t
            for t in filter_tasks(membership.project, self.form.to_filters())
            .filter(pk__in=list(ids))
            .select_related("workflow")
            .prefetch_related("steps__agent")
        }
        changes = self.page.sort_out(
            ids,
            matching,
            RowChanges(),
            key=_sort_key,
            on_top=lambda task_id: self.page.first_page and task_id in created,
        )
        return self.page.frame(LIST_PAGE, changes, key=_sort_key)


def _sort_key(task: Task) -> tuple[Any, str]:
    return (task.created_at, str(task.pk))


class TaskListConsumer(LiveListConsumer):
    """ws/projects/<id>/tasks/?<the list's filters and cursor>"""

    listing = "tasks"
    id_field = "task_id"
    flush_seconds = LIST_FLUSH_SECONDS

    def open_stream(self, user: Any, project_id: int, query: str) -> "TaskListStream":
        return TaskListStream.open(user, project_id, query)

    task_created = LiveListConsumer.changed
    task_transition = LiveListConsumer.changed
    task_step = LiveListConsumer.changed
    task_signal = LiveListConsumer.changed
    task_links = LiveListConsumer.changed
