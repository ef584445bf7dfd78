"""What the session store announces (see core.domain_events for how it travels)."""

from dataclasses import dataclass

from core.domain_events import DomainEvent
from core.realtime import project_list_group, session_group


@dataclass(frozen=True)
class SessionEvent(DomainEvent):
    session_id: str

    def groups(self) -> list[str]:
        return [session_group(self.session_id), project_list_group(self.project_id, "sessions")]


@dataclass(frozen=True)
class SessionOpened(SessionEvent):
    """A session was opened, or forked from `parent_id` at `fork_seq`."""

    type = "session.opened"
    outboxed = True
    parent_id: str | None = None
    fork_seq: int | None = None


@dataclass(frozen=True)
class EventsAppended(SessionEvent):
    """Seqs from_seq..to_seq were appended. Live-only: readers catch up from the log."""

    type = "session.events"
    from_seq: int = 0
    to_seq: int = 0


# Lifecycle moves delivered to webhooks, by the status moved to (core.webhooks.EVENTS).
LIFECYCLE_WEBHOOKS = {
    "paused": "session.paused",
    "resumed": "session.resumed",
    "closed": "session.closed",
}


@dataclass(frozen=True)
class LifecycleChanged(SessionEvent):
    """The session moved from one lifecycle status to another."""

    type = "session.lifecycle"
    outboxed = True
    from_status: str = ""
    to_status: str = ""
    reason: str = ""
    actor: str = ""

    def webhook_event(self) -> str | None:
        return LIFECYCLE_WEBHOOKS.get(self.to_status)

    def payload(self) -> dict[str, object]:
        # "from"/"to" on the wire, as the lifecycle event's own content names them.
        body = super().payload()
        body["from"] = body.pop("from_status")
        body["to"] = body.pop("to_status")
        return body
