"""The project's live feed, ws/projects/<id>/: the overview (?view=overview, the default) or one
page of the sessions list (?view=sessions&<the list's filters>, sessions.consumers'
SessionListStream). Thin and read-only, like every consumer (sessions/consumers.py describes
the frames)."""

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from django.template.loader import render_to_string

from core.access import require_role
from core.errors import DomainError
from core.live import AccessLost, LiveListConsumer
from core.realtime import project_list_group
from switchboard.overview.context import overview_live_context, overview_tasks_context
from switchboard.sessions.consumers import SessionListStream

OVERVIEW_PAGE = "switchboard/overview.html"
# Project-wide changes are collected for this long and rendered once (one query per flush,
# however many events the project's agents append meanwhile).
PROJECT_FLUSH_SECONDS = 0.5


@dataclass
class OverviewStream:
    """Pushes the overview's status counts, waiting queue and recent changes (replaced whole)
    after sessions open or change status or a handoff moves, and its tasks card after a task
    changes. The events chart polls over HTTP instead (and the tasks card too, once a minute:
    a task becomes stuck by the clock alone)."""

    user: Any
    project_id: int
    parts: set[str] = field(default_factory=set)  # "sessions" and/or "tasks", since the flush

    def note(self, kind: str, session_id: str) -> bool:
        if kind in ("session.opened", "session.lifecycle") or kind.startswith("handoff."):
            self.parts.add("sessions")
        elif kind.startswith("task."):
            self.parts.add("tasks")
        else:
            return False
        return True

    def take(self) -> tuple[set[str], set[str]]:
        """The parts to render (called on the event loop, not the thread)."""
        taken, self.parts = self.parts, set()
        return taken, set()

    def flush(self, parts: set[str], opened: set[str]) -> str:
        try:
            membership = require_role(self.user, self.project_id)
        except DomainError:
            raise AccessLost from None
        project = membership.project
        frames = []
        if "sessions" in parts:
            context = {"project": project, **overview_live_context(project), "oob": True}
            frames += [
                render_to_string(f"{OVERVIEW_PAGE}#{name}", context)
                for name in ("status-counts", "handoffs-waiting", "waiting", "recent-changes")
            ]
        if "tasks" in parts:
            context = {"project": project, **overview_tasks_context(project), "oob": True}
            frames.append(render_to_string(f"{OVERVIEW_PAGE}#tasks-attention", context))
        return "".join(frames)


class ProjectConsumer(LiveListConsumer):
    """ws/projects/<id>/?view=overview, or ?view=sessions&<the list's filters>"""

    listing = "sessions"
    id_field = "session_id"
    flush_seconds = PROJECT_FLUSH_SECONDS

    def open_stream(self, user: Any, project_id: int, query: str) -> Any:
        view = (parse_qs(query).get("view") or ["overview"])[0]
        if view == "sessions":
            return SessionListStream.open(user, project_id, query)
        require_role(user, project_id)
        return OverviewStream(user=user, project_id=project_id)

    session_events = LiveListConsumer.changed
    session_lifecycle = LiveListConsumer.changed
    session_opened = LiveListConsumer.changed
    # Retention's changes: a row compacted (its badge), deleted (it goes), held or released.
    session_compacted = LiveListConsumer.changed
    session_deleted = LiveListConsumer.changed
    session_hold = LiveListConsumer.changed

    async def connect(self) -> None:
        await super().connect()
        stream = getattr(self, "stream", None)
        if self.joined and isinstance(stream, OverviewStream):
            # The overview also counts handoffs and lists waiting and stuck tasks.
            await self.join(
                [
                    project_list_group(stream.project_id, "handoffs"),
                    project_list_group(stream.project_id, "tasks"),
                ]
            )

    async def other_event(self, message: dict[str, Any]) -> None:
        stream = getattr(self, "stream", None)
        kind = str(message.get("type", ""))
        if isinstance(stream, OverviewStream) and kind.startswith(("handoff.", "task.")):
            await self.changed(message)
        elif isinstance(stream, SessionListStream) and kind.startswith("task."):
            for noted in stream.note_task(message):
                await self.changed({"type": kind, self.id_field: noted})
