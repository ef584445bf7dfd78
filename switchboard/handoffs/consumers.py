"""Live handoff pages: the queue (group `project-<id>-handoffs`) and one handoff's workspace
(groups `handoff-<uuid>` and its session's). Read-only, like sessions.consumers: every push
re-reads through the same access helpers and context builders as the views.

The queue re-renders the page's rows (its filters and cursor: one keyset query of at most 50
rows) and the counts once per flush, however many steps arrived meanwhile: a new request
appears, a claim shows its holder, an answered one changes status, a resolved one leaves.
The workspace re-renders its header, the actions for this user (a claim by someone else
disables them), the request, the conversation, the records and the state and facts panels.
"""

import asyncio
import contextlib
import logging
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
    LAYER_ERRORS,
    AccessLost,
    LiveConsumer,
    LiveListConsumer,
)
from core.realtime import session_group
from handoffs_app import presence
from handoffs_app.access import get_handoff_for_user
from handoffs_app.domain_events import handoff_group
from handoffs_app.queries import waiting_marks
from switchboard.handoffs.context import queue_context, workspace_version
from switchboard.handoffs.forms import QueueFilterForm
from switchboard.handoffs.views import QUEUE_PAGE, NavCounts, nav_counts, workspace_frame

logger = logging.getLogger(__name__)

PRESENCE_LINE = "switchboard/_presence.html"

WORKSPACE_PARTS = [
    "handoff-header",
    "handoff-actions",
    "handoff-request",
    "conversation",
    "records",
    "state-panel",
    "facts-panel",
]
# A session event (an append while the handoff is open) changes only these.
SESSION_PARTS = ["conversation", "state-panel", "facts-panel"]


def notify_marks(project_id: int) -> str:
    """The waiting handoffs the page's browser notifications compare with the last ones
    (static/js/notify.js), swapped in out of band with the navigation's count."""
    context = {"handoff_nav": {"marks": waiting_marks(project_id)}, "oob": True}
    return render_to_string("switchboard/_handoff_notify.html#notify-marks", context)


@dataclass
class QueueStream:
    user: Any
    project_id: int
    form: QueueFilterForm
    changed: set[str] = field(default_factory=set)

    @classmethod
    def open(cls, user: Any, project_id: int, query: str) -> "QueueStream":
        require_role(user, project_id)
        form = QueueFilterForm(QueryDict(query))
        if not form.is_valid():
            raise ValueError("invalid filters")
        return cls(user=user, project_id=project_id, form=form)

    def note(self, kind: str, handoff_id: str) -> bool:
        self.changed.add(handoff_id)
        return True

    def take(self) -> tuple[set[str], set[str]]:
        taken, self.changed = self.changed, set()
        return taken, set()

    def flush(self, changed: set[str], created: set[str]) -> str:
        try:
            membership = require_role(self.user, self.project_id)
        except DomainError:
            raise AccessLost from None
        context = queue_context(
            self.project_id,
            self.form.to_filters(),
            user=self.user,
            cursor=self.form.cleaned_data.get("cursor") or None,
        )
        counts = context["counts"]
        context.update(
            {
                "project": membership.project,
                "oob": True,
                "is_first_page": not self.form.cleaned_data.get("cursor"),
                "is_filtered": self.form.is_filtered,
                "handoff_nav": NavCounts(open=counts.open, overdue=counts.overdue),
            }
        )
        return "".join(
            [
                render_to_string(f"{QUEUE_PAGE}#queue-rows", context),
                render_to_string(f"{QUEUE_PAGE}#queue-counts", context),
                render_to_string("_base.html#nav-handoff-count", context),
                notify_marks(self.project_id),
            ]
        )


class HandoffQueueConsumer(LiveListConsumer):
    """ws/projects/<id>/handoffs/?<the queue's filters and cursor>"""

    listing = "handoffs"
    id_field = "handoff_id"
    flush_seconds = 0.3
    flush_on_join = True

    def open_stream(self, user: Any, project_id: int, query: str) -> Any:
        return QueueStream.open(user, project_id, query)

    async def other_event(self, message: dict[str, Any]) -> None:
        if str(message.get("type", "")).startswith("handoff."):
            await self.changed(message)


@dataclass
class NavStream:
    """The navigation's count of waiting handoffs, on every page of a project (the queue page's
    own feed carries it there): re-counted once per flush after any handoff step."""

    user: Any
    project_id: int
    changed: bool = False

    def note(self, kind: str, handoff_id: str) -> bool:
        self.changed = True
        return True

    def take(self) -> tuple[set[str], set[str]]:
        self.changed = False
        return set(), set()

    def flush(self, changed: set[str], created: set[str]) -> str:
        try:
            require_role(self.user, self.project_id)
        except DomainError:
            raise AccessLost from None
        context = {"handoff_nav": nav_counts(self.project_id), "oob": True}
        return render_to_string("_base.html#nav-handoff-count", context) + notify_marks(
            self.project_id
        )


class HandoffNavConsumer(LiveListConsumer):
    """ws/projects/<id>/nav/ (templates/_base.html: every project page but the queue's)."""

    listing = "handoffs"
    id_field = "handoff_id"
    flush_seconds = 0.3
    flush_on_join = True

    def open_stream(self, user: Any, project_id: int, query: str) -> Any:
        require_role(user, project_id)
        return NavStream(user=user, project_id=project_id)

    async def other_event(self, message: dict[str, Any]) -> None:
        if str(message.get("type", "")).startswith("handoff."):
            await self.changed(message)


@dataclass
class WorkspaceStream:
    user: Any
    handoff_id: str
    session_id: str

    @classmethod
    def open(cls, user: Any, handoff_id: str) -> "WorkspaceStream":
        handoff, _ = get_handoff_for_user(user, handoff_id)
        return cls(user=user, handoff_id=str(handoff.pk), session_id=str(handoff.session_id))

    def frame(self, parts: list[str], *, unless_at: str = "") -> str:
        """The parts as they are now; nothing when the workspace is still at version
        `unless_at` (the version its page was rendered at: context.workspace_version)."""
        try:
            handoff, membership = get_handoff_for_user(self.user, self.handoff_id)
        except DomainError:
            raise AccessLost from None
        if unless_at and unless_at == workspace_version(handoff):
            return ""
        return workspace_frame(handoff, membership, self.user, parts)

    def arrive(self, channel_name: str) -> None:
        """This page opened: its row, and the rows of pages whose server died long ago gone."""
        presence.sweep()
        self.here(channel_name)

    def here(self, channel_name: str) -> None:
        """This page is still open: its row in the presence store, renewed."""
        presence.mark_viewing(self.handoff_id, self.user, channel_name)

    def viewers(self) -> tuple[list[str], str]:
        """Who else views the handoff now, and the line that says so (an out-of-band swap)."""
        try:
            handoff, _ = get_handoff_for_user(self.user, self.handoff_id)
        except DomainError:
            raise AccessLost from None
        names = presence.viewers_of(handoff.pk, handoff.project_id, exclude_user=self.user)
        return names, render_to_string(PRESENCE_LINE, {"viewers": names, "oob": True})


class HandoffConsumer(LiveConsumer):
    """ws/handoffs/<uuid>/

    Also who else has the workspace open ("Also viewing: alice, bob"): the page is recorded in
    handoffs_app.presence when it connects and every `heartbeat_seconds` while it stays open
    (a page whose server died drops out after presence.VIEWER_TTL), and forgotten when it
    closes; each change is told to the handoff's other pages (presence.presence_group), which
    read the viewers again, and each heartbeat reads them too (catching the expired ones).
    """

    heartbeat_seconds = presence.HEARTBEAT_SECONDS

    async def connect(self) -> None:
        self.heartbeat: asyncio.Task[None] | None = None
        self.viewing = False
        self.shown_viewers: list[str] | None = None
        user = self.user()
        if user is None:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        handoff_id = str(self.scope["url_route"]["kwargs"]["handoff_id"])
        try:
            self.stream = await database_sync_to_async(WorkspaceStream.open)(user, handoff_id)
        except DomainError:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        await self.join(
            [
                handoff_group(self.stream.handoff_id),
                session_group(self.stream.session_id),
                presence.presence_group(self.stream.handoff_id),
            ]
        )
        await self.accept()
        # Whatever changed between the page's render and this connection, and nothing if
        # nothing did: this frame could reach the page after the answer to a request the person
        # made there meanwhile (a claim pressed as the page opened), and its swap took the focus
        # from the field they had gone on to type in (a reject reason opened with "r").
        since = QueryDict(self.scope.get("query_string", b"")).get("since", "")
        await self.send_frame(await self.run(self.frame_since, since))
        await database_sync_to_async(self.stream.arrive)(self.channel_name)
        self.viewing = True
        await self.tell_viewers()
        await self.show_viewers()
        self.heartbeat = asyncio.create_task(self.beat())

    def frame_since(self, since: str) -> str:
        return self.stream.frame(WORKSPACE_PARTS, unless_at=since)

    async def other_event(self, message: dict[str, Any]) -> None:
        kind = str(message.get("type", ""))
        if kind.startswith("handoff.") and message.get("handoff_id") == self.stream.handoff_id:
            await self.send_frame(await self.run(self.stream.frame, WORKSPACE_PARTS))

    async def session_events(self, event: dict[str, Any]) -> None:
        if event.get("session_id") == self.stream.session_id:
            await self.send_frame(await self.run(self.stream.frame, SESSION_PARTS))

    async def session_lifecycle(self, event: dict[str, Any]) -> None:
        if event.get("session_id") == self.stream.session_id:
            await self.send_frame(await self.run(self.stream.frame, ["handoff-header"]))

    async def presence_changed(self, message: dict[str, Any]) -> None:
        """Someone opened or closed this handoff's workspace."""
        await self.show_viewers()

    async def show_viewers(self) -> None:
        seen = await self.run(self.stream.viewers)
        if seen is None:  # access lost: the socket is closed
            return
        names, line = seen
        if names != self.shown_viewers:
            self.shown_viewers = names
            await self.send_frame(line)

    async def tell_viewers(self) -> None:
        try:
            group = presence.presence_group(self.stream.handoff_id)
            await self.channel_layer.group_send(group, {"type": "presence.changed"})
        except LAYER_ERRORS as exc:  # the others catch up at their next heartbeat
            logger.warning("presence: could not tell the other viewers (%s)", exc)

    async def beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_seconds)
            try:
                await database_sync_to_async(self.stream.here)(self.channel_name)
                await self.show_viewers()
            except Exception as exc:  # a lost beat: the next one tries again
                logger.warning("presence: heartbeat failed (%s)", exc)

    async def disconnect(self, code: int) -> None:
        if self.heartbeat is not None:
            self.heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.heartbeat
        await super().disconnect(code)
        if self.viewing:
            self.viewing = False
            try:
                await database_sync_to_async(presence.stop_viewing)(self.channel_name)
            except Exception as exc:  # the row expires after presence.VIEWER_TTL
                logger.warning("presence: could not forget a closed page (%s)", exc)
            await self.tell_viewers()
