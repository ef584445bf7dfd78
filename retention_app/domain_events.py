"""What retention announces (outboxed: each commits with its change). Live lists that do not
render a type ignore it (core.live); the sessions list hears `session.*` on its group."""

from dataclasses import dataclass

from core.domain_events import DomainEvent
from core.realtime import project_list_group, session_group

RETENTION_LISTING = "retention"
# Every live session page of a project hears agent- and project-wide holds on this group.
HOLDS_LISTING = "holds"


@dataclass(frozen=True)
class SessionCompacted(DomainEvent):
    type = "session.compacted"
    outboxed = True
    session_id: str = ""
    compaction_id: str = ""
    through_seq: int = 0
    events_removed: int = 0

    def groups(self) -> list[str]:
        return [
            session_group(self.session_id),
            project_list_group(self.project_id, "sessions"),
            project_list_group(self.project_id, RETENTION_LISTING),
        ]


@dataclass(frozen=True)
class SessionDeleted(DomainEvent):
    """A whole session was deleted, by retention (actor "retention") or on request (the API,
    the dashboard): its page says so, the lists drop its row, the `session.deleted` webhook
    goes out."""

    type = "session.deleted"
    outboxed = True
    session_id: str = ""
    events_deleted: int = 0
    external_id: str | None = None
    actor: str = ""

    def webhook_event(self) -> str | None:
        return "session.deleted"

    def groups(self) -> list[str]:
        return [
            session_group(self.session_id),
            project_list_group(self.project_id, "sessions"),
            project_list_group(self.project_id, RETENTION_LISTING),
        ]


@dataclass(frozen=True)
class RetentionChanged(DomainEvent):
    """A run started or finished, a policy was saved, a hold placed or lifted."""

    type = "retention.changed"
    outboxed = True
    what: str = ""
    id: str = ""

    def groups(self) -> list[str]:
        return [project_list_group(self.project_id, RETENTION_LISTING)]


@dataclass(frozen=True)
class HoldChanged(DomainEvent):
    """A legal hold placed or lifted (its sessions' pages and the lists show it). A session's
    hold goes to that session's group; an agent's or the project's (session_id empty) to the
    project's holds group, which every session page of the project hears."""

    type = "session.hold"
    outboxed = True
    session_id: str = ""
    scope: str = "session"
    agent_id: int | None = None
    held: bool = False

    def groups(self) -> list[str]:
        one = (
            session_group(self.session_id)
            if self.session_id
            else project_list_group(self.project_id, HOLDS_LISTING)
        )
        return [
            one,
            project_list_group(self.project_id, "sessions"),
            project_list_group(self.project_id, RETENTION_LISTING),
        ]


@dataclass(frozen=True)
class SessionErased(SessionDeleted):
    """A session removed by an erasure: live pages and lists treat it as a deletion (same
    type), but no `session.deleted` webhook goes out, so no new delivery body names it."""

    def webhook_event(self) -> str | None:
        return None
