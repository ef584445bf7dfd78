"""Websocket consumers of the dashboard: thin and read-only.

Each authenticates from scope["user"] (the session cookie, via AuthMiddlewareStack), checks
access with the same helpers as the views, joins the groups of core.realtime, and turns
the high-level group events the services publish after commit into rendered partials of the
page's own template, sent as htmx out-of-band swaps (hx-swap-oob). Nothing here writes domain
state; clients only listen (anything they send is ignored).

Server → client frames are HTML: one or more top-level elements, each with hx-swap-oob
(`true` = replace the element with the same id; `afterbegin:#id` / `beforeend:#id` = insert its
children; `delete` = remove the element). See the module docstrings of the streams for which.
"""

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from channels.db import database_sync_to_async
from django.http import QueryDict
from django.template.loader import render_to_string

from core.access import require_role
from core.errors import DomainError
from core.live import (
    CLOSE_NOT_FOUND,
    CLOSE_UNAUTHENTICATED,
    AccessLost,
    LiveConsumer,
)
from core.live_rows import RowChanges, ShownPage, rendered_page, rows_changed_since
from core.models import Membership
from core.pages import role_context
from core.realtime import project_list_group, session_group, task_group
from retention_app.domain_events import HOLDS_LISTING
from sessions_app.access import get_session_for_user
from sessions_app.models import EventKind, Session
from sessions_app.queries import (
    SESSION_SORTS,
    decode_sort_cursor,
    event_range_has_kind,
    page_sessions,
    slice_events,
)
from switchboard.sessions.context import (
    LogOptions,
    Moment,
    event_view,
    facts_context,
    linked_tasks,
    moment_at,
    session_header_context,
    timeline,
)
from switchboard.sessions.forms import EventLogForm, MomentForm, SessionFilterForm
from switchboard.sessions.queries import mark_holds, session_rows, sessions_linked_to

logger = logging.getLogger(__name__)

SESSION_PAGE = "switchboard/session_detail.html"
LIST_PAGE = "switchboard/session_list.html"

# At most this many rows per push; beyond it the log shows a gap with a link to the rest.
LIVE_MAX_ROWS = 200
# Task events that change what the sessions list's task column shows (state, links): the
# task services send these to the project's sessions group too (tasks_app.domain_events).
TASK_COLUMN_EVENTS = ("task.transition", "task.links")


# --- One session ----------------------------------------------------------------------------


@dataclass
class SessionStream:
    """What one session page shows live, and how far it has been brought up to date.

    Pushes: new event rows (`afterbegin:#event-rows` newest first, `beforeend:#event-rows`
    oldest first; none after a jump into the past), the header (status, budget, head, lineage,
    actions for the role) on every change, the lifecycle timeline on a transition, the facts
    panel when facts were appended, a linked task's panel when the task changes.

    A page pinned to a moment (time travel, `at=<seq>`) shows the past, which does not change:
    it gets no rows, and its header keeps the moment's status, usage and budget while the
    counts (the head) move on; the timeline, facts and tasks are not pushed at all.
    """

    user: Any
    session_id: str
    project_id: int
    options: LogOptions
    rows: bool
    covered: int  # every event up to this seq has been shown (or filtered out)
    task_ids: set[str] = field(default_factory=set)
    moment: Moment | None = None

    @classmethod
    def open(cls, user: Any, session_id: str, query: str) -> "SessionStream":
        session, _ = get_session_for_user(user, session_id)
        params = QueryDict(query)
        form = EventLogForm(session, params)
        moment_form = MomentForm(session, params)
        if not form.is_valid() or not moment_form.is_valid():
            raise DomainError("Invalid log settings.")
        at = moment_form.cleaned_data.get("at")
        # The past does not change: the moment is read once (Compacted closes the socket).
        moment = moment_at(session, at) if at is not None else None
        try:
            after = int(params.get("after_seq", session.head_seq))
        except ValueError:
            after = session.head_seq
        tasks = linked_tasks(session)
        return cls(
            user=user,
            session_id=str(session.pk),
            project_id=session.project_id,
            options=LogOptions.from_cleaned(form.cleaned_data, at=at),
            rows=params.get("rows", "1") == "1" and moment is None,
            covered=min(max(after, 0), session.head_seq),
            task_ids={str(t.pk) for t in tasks},
            moment=moment,
        )

    def _session(self) -> tuple[Session, Membership]:
        try:
            return get_session_for_user(self.user, self.session_id)
        except DomainError:
            raise AccessLost from None

    def events_frame(self) -> str:
        """Rows appended since `covered`, the header and (if facts changed) the facts panel."""
        session, membership = self._session()
        head = session.head_seq
        if head <= self.covered:
            return ""
        parts = []
        if self.rows:
            newest_first = self.options.order != "asc"
            page = slice_events(
                session,
                after_seq=self.covered,
                before_seq=head + 1,
                limit=LIVE_MAX_ROWS,
                kinds=self.options.kinds or None,
                tier=self.options.tier or None,
                newest_first=True,
            )
            rows = page.rows if newest_first else list(reversed(page.rows))
            gap = None
            if page.has_more:
                gap = {"from_seq": self.covered + 1, "to_seq": page.rows[-1]["seq"] - 1}
            parts.append(
                render_to_string(
                    f"{SESSION_PAGE}#live-events",
                    {
                        "session": session,
                        "events": [event_view(r) for r in rows],
                        "prepend": newest_first,
                        "gap": gap,
                    },
                )
            )
        parts.append(self._header(session, membership))
        if self.moment is not None:
            self.covered = head
            return "".join(parts)
        if event_range_has_kind(
            session, after_seq=self.covered, upto_seq=head, kind=EventKind.HANDOFF
        ):
            # A handoff step: the timeline says it in words, the header links the handoff.
            parts.append(
                render_to_string(
                    f"{SESSION_PAGE}#timeline",
                    {"session": session, "timeline": timeline(session), "oob": True},
                )
            )
        if event_range_has_kind(
            session, after_seq=self.covered, upto_seq=head, kind=EventKind.FACT
        ):
            parts.append(
                render_to_string(
                    f"{SESSION_PAGE}#facts-panel", {**facts_context(session), "oob": True}
                )
            )
        self.covered = head
        return "".join(parts)

    def lifecycle_frame(self) -> str:
        """Header, actions (which depend on the status) and the timeline."""
        session, membership = self._session()
        context = {**session_header_context(session, membership, self.moment), "oob": True}
        names = ["session-header", "session-actions"]
        if self.moment is None:
            context["timeline"] = timeline(session)
            names.append("timeline")
        return "".join(render_to_string(f"{SESSION_PAGE}#{name}", context) for name in names)

    def header_frame(self) -> str:
        """The header alone: a legal hold placed or lifted, a compaction (its badge)."""
        session, membership = self._session()
        return self._header(session, membership)

    def task_frame(self, task_id: str, unlinked: bool) -> str:
        session, _ = self._session()
        if unlinked:
            self.task_ids.discard(task_id)
            return (
                f'<div id="task-slot-{task_id}" hx-swap-oob="delete"></div>'
                if _is_uuid(task_id)
                else ""
            )
        if self.moment is not None:
            return ""  # the pane shows the task as it was then
        task = next((t for t in linked_tasks(session) if str(t.pk) == task_id), None)
        if task is None:
            return ""
        return render_to_string(
            f"{SESSION_PAGE}#task-slot", {"session": session, "task": task, "oob": True}
        )

    def _header(self, session: Session, membership: Membership) -> str:
        context = session_header_context(session, membership, self.moment)
        return render_to_string(f"{SESSION_PAGE}#session-header", {**context, "oob": True})


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


class SessionConsumer(LiveConsumer):
    """ws/sessions/<uuid>/?order=&kind=&tier=&after_seq=<head shown>&rows=1|0"""

    async def connect(self) -> None:
        user = self.user()
        if user is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        session_id = str(self.scope["url_route"]["kwargs"]["session_id"])
        query = self.scope.get("query_string", b"").decode("latin-1")
        try:
            self.stream = await database_sync_to_async(SessionStream.open)(user, session_id, query)
        except DomainError:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        groups = [session_group(self.stream.session_id)]
        # Agent- and project-wide legal holds cover this session too.
        groups.append(project_list_group(self.stream.project_id, HOLDS_LISTING))
        groups += [task_group(task_id) for task_id in sorted(self.stream.task_ids)]
        await self.join(groups)
        await self.accept()
        # Events appended between the page's render and this connection.
        await self.send_frame(await self.run(self.stream.events_frame))

    async def session_events(self, event: dict[str, Any]) -> None:
        if event.get("session_id") != self.stream.session_id:
            return
        if int(event.get("to_seq", 0)) <= self.stream.covered:
            return  # already shown by an earlier push (pushes read up to the head)
        await self.send_frame(await self.run(self.stream.events_frame))

    async def session_lifecycle(self, event: dict[str, Any]) -> None:
        if event.get("session_id") == self.stream.session_id:
            await self.send_frame(await self.run(self.stream.lifecycle_frame))

    async def session_opened(self, event: dict[str, Any]) -> None:
        return None  # a fork of this session: its header lists forks on the next change

    async def session_hold(self, event: dict[str, Any]) -> None:
        # This session's own hold, or an agent's or the project's (the header says which
        # hold covers it, if any: re-rendered whichever agent an agent hold names).
        if event.get("session_id") in ("", self.stream.session_id):
            await self.send_frame(await self.run(self.stream.header_frame))

    async def session_compacted(self, event: dict[str, Any]) -> None:
        if event.get("session_id") == self.stream.session_id:
            await self.send_frame(await self.run(self.stream.header_frame))

    async def session_deleted(self, event: dict[str, Any]) -> None:
        if event.get("session_id") != self.stream.session_id:
            return
        # Nothing left to render from: say so in place of the header, and stop listening.
        await self.send_frame(
            render_to_string(
                f"{SESSION_PAGE}#session-deleted",
                {
                    "events_deleted": int(event.get("events_deleted") or 0),
                    "deleted_by": str(event.get("actor") or "retention"),
                    "oob": True,
                },
            )
        )
        await self.close(code=CLOSE_NOT_FOUND)

    async def other_event(self, message: dict[str, Any]) -> None:
        task_id = str(message.get("task_id", ""))
        if not str(message.get("type", "")).startswith("task.") or task_id not in (
            self.stream.task_ids
        ):
            return
        unlinked = self.stream.session_id in (message.get("unlinked") or [])
        await self.send_frame(await self.run(self.stream.task_frame, task_id, unlinked))


# --- One project's sessions list (served by overview.consumers.ProjectConsumer) -------------


@dataclass
class SessionListStream:
    """Keeps one page of the sessions list (its filters, sort and cursor) up to date.

    Knows which rows the page shows (the same keyset query as the view, once, at connect);
    core.live_rows sorts out what a flush does to them. A shown session that changed is
    replaced in place (`true`), or removed (`delete`) when it no longer matches the filters; on
    the first page of "newest first", new matching sessions are inserted on top
    (`afterbegin:#session-rows`); on the first page of "recently active", a changed session
    moves to the top. Any other change that would land on this page shows a notice with a
    refresh link instead of reshuffling rows under the reader.
    """

    user: Any
    project_id: int
    form: SessionFilterForm
    page: ShownPage
    # Whether opening noted what changed since the page's render (LiveListConsumer flushes).
    caught_up: bool = False

    @classmethod
    def open(cls, user: Any, project_id: int, query: str) -> "SessionListStream":
        membership = require_role(user, project_id)
        params = QueryDict(query)
        form = SessionFilterForm(membership.project, params)
        if not form.is_valid():
            raise ValueError("invalid filters")
        sort = form.cleaned_data["sort"]
        cursor = form.cleaned_data.get("cursor") or None
        page, next_cursor = page_sessions(
            session_rows(membership.project, form.to_filters()),
            cursor=cursor,
            limit=50,
            sort=sort,
        )
        key_field, descending = SESSION_SORTS[sort]
        rendered = rendered_page(params)
        stream = cls(
            user=user,
            project_id=project_id,
            form=form,
            page=ShownPage(
                known=rendered[1] if rendered else {str(s.pk) for s in page},
                last_key=(getattr(page[-1], key_field), str(page[-1].pk)) if next_cursor else None,
                cursor_key=decode_sort_cursor(cursor, sort) if cursor else None,
                descending=descending,
            ),
        )
        if rendered:
            # What no notice brought between the page's render and this join: sessions changed
            # or opened since, and shown ones deleted (every change a row shows but its task
            # column and hold badge moves updated_at).
            sessions = Session.objects.filter(project_id=project_id)
            found = rows_changed_since(sessions, rendered[0], stream.page.known)
            stream.caught_up = stream.page.catch_up(*found)
        return stream

    @property
    def sort(self) -> str:
        return str(self.form.cleaned_data["sort"])

    @property
    def live_head(self) -> bool:
        return not self.form.cleaned_data.get("cursor")

    def note(self, kind: str, session_id: str) -> bool:
        """A session's change, or (ids prefixed "task:" / "linked:") a linked task's: see
        `note_task`."""
        if kind == "session.hold" and not session_id:
            # An agent's or the project's hold: any shown row may gain or lose its badge.
            self.page.changed |= self.page.known
            return bool(self.page.known)
        if kind == "session.opened":
            self.page.created.add(session_id)
        self.page.changed.add(session_id)
        return True

    def note_task(self, event: dict[str, Any]) -> list[str]:
        """The ids to note for a task event that moves the rows' task column: the task (its
        state; the shown sessions linked to it are looked up when rendering) and the sessions
        a link change names. None for the others (steps, signals): the column shows no step."""
        if event.get("type") not in TASK_COLUMN_EVENTS:
            return []
        task_id = str(event.get("task_id", ""))
        ids = [f"task:{task_id}"] if _is_uuid(task_id) else []
        for session_id in [*(event.get("linked") or []), *(event.get("unlinked") or [])]:
            if _is_uuid(str(session_id)):
                ids.append(f"linked:{session_id}")
        return ids

    def take(self) -> tuple[set[str], set[str]]:
        return self.page.take()

    def flush(self, noted: set[str], opened: set[str]) -> str:
        try:
            membership = require_role(self.user, self.project_id)
        except DomainError:
            raise AccessLost from None
        key_field = SESSION_SORTS[self.sort][0]
        ids = {i for i in noted if ":" not in i}
        # Sessions whose linked task changed (state, links): their sort keys did not move.
        task_ids = {i.removeprefix("task:") for i in noted if i.startswith("task:")}
        in_place = {i.removeprefix("linked:") for i in noted if i.startswith("linked:")}
        in_place |= sessions_linked_to(task_ids, among=self.page.known)
        in_place -= ids
        matching = {
            str(s.pk): s
            for s in session_rows(membership.project, self.form.to_filters())
            .filter(pk__in=list(ids | in_place))
            .select_related("agent")
        }

        def key(session: Session) -> tuple[Any, str]:
            return (getattr(session, key_field), str(session.pk))

        moves_to_top = self.live_head and self.sort == "-updated"
        newest_first = self.live_head and self.sort == "-created"
        changes = self.page.sort_out(
            ids,
            matching,
            RowChanges(),
            key=key,
            on_top=lambda session_id: moves_to_top or (newest_first and session_id in opened),
            to_top=moves_to_top,
        )
        # Now (or no longer) matching a task filter: in place, wherever the row sorts.
        self.page.sort_out(in_place, matching, changes, key=key)
        if changes:
            mark_holds(self.project_id, changes.replace + changes.prepend)
        return self.page.frame(LIST_PAGE, changes, key=key, context=role_context(membership))
