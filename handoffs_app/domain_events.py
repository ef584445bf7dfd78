"""What the handoff app announces (see core.domain_events for how it travels).

Every step is outboxed: the queue page (group `project-<id>-handoffs`), the workspace and the
agent's long-poll (group `handoff-<uuid>`) listen, and webhook delivery reads the same rows,
asking each event's `webhook_event()` which webhook it is (None: not sent to agents).
"""

from dataclasses import dataclass, fields
from typing import Any

from core.domain_events import DomainEvent
from core.realtime import project_list_group


def handoff_group(handoff_id: object) -> str:
    """The group of one handoff: its workspace page and the agents long-polling on it."""
    return f"handoff-{handoff_id}"


def queue_group(project_id: object) -> str:
    return project_list_group(project_id, "handoffs")


@dataclass(frozen=True)
class HandoffEvent(DomainEvent):
    """One step of a handoff; `step` names it as the log record does."""

    outboxed = True
    handoff_id: str
    session_id: str
    kind: str = ""
    status: str = ""
    priority: str = ""
    actor: str = ""
    holder: str | None = None

    def groups(self) -> list[str]:
        return [handoff_group(self.handoff_id), queue_group(self.project_id)]

    def webhook_event(self) -> str | None:
        """The webhook this step is delivered as, or None (queue-internal steps)."""
        return None


@dataclass(frozen=True)
class HandoffCreated(HandoffEvent):
    type = "handoff.created"
    reason: str = ""
    request: dict[str, Any] | None = None
    due_at: str = ""

    def webhook_event(self) -> str | None:
        return "handoff.created"


@dataclass(frozen=True)
class HandoffClaimed(HandoffEvent):
    type = "handoff.claimed"
    lease_expires_at: str = ""

    def webhook_event(self) -> str | None:
        return "handoff.claimed"


@dataclass(frozen=True)
class HandoffReleased(HandoffEvent):
    """Back in the queue: released by its holder, or its lease lapsed (`lapsed`)."""

    type = "handoff.released"
    lapsed: bool = False


@dataclass(frozen=True)
class HandoffReassigned(HandoffEvent):
    type = "handoff.reassigned"
    previous_holder: str | None = None


@dataclass(frozen=True)
class HandoffAnswered(HandoffEvent):
    type = "handoff.answered"
    answer: dict[str, Any] | None = None

    def webhook_event(self) -> str | None:
        return "handoff.answered"


@dataclass(frozen=True)
class HandoffIgnored(HandoffEvent):
    """The holder dismissed the request (answer type "ignore"); the handoff is over. Agents
    learn it as an answer: the `handoff.answered` webhook, with `answer.type` "ignore"."""

    type = "handoff.ignored"
    answer: dict[str, Any] | None = None

    def webhook_event(self) -> str | None:
        return "handoff.answered"


@dataclass(frozen=True)
class HandoffTakenOver(HandoffEvent):
    type = "handoff.taken_over"


@dataclass(frozen=True)
class HandoffHandedBack(HandoffEvent):
    type = "handoff.handed_back"
    answer: dict[str, Any] | None = None


@dataclass(frozen=True)
class HandoffClosed(HandoffEvent):
    type = "handoff.closed"


@dataclass(frozen=True)
class HandoffCancelled(HandoffEvent):
    type = "handoff.cancelled"


@dataclass(frozen=True)
class HandoffExpired(HandoffEvent):
    type = "handoff.expired"

    def webhook_event(self) -> str | None:
        return "handoff.expired"


@dataclass(frozen=True)
class HandoffOverdue(HandoffEvent):
    type = "handoff.overdue"
    due_at: str = ""

    def webhook_event(self) -> str | None:
        return "handoff.overdue"


@dataclass(frozen=True)
class HandoffWorked(HandoffEvent):
    """The holder changed the session meanwhile: state patch, facts, a human message."""

    type = "handoff.worked"
    what: str = ""


# Outbox rows keep the `type` and the payload, not the class: readers of the outbox (webhook
# delivery) find the class, and so `webhook_event()`, by type.
EVENT_CLASSES: dict[str, type[HandoffEvent]] = {
    cls.type: cls
    for cls in (
        HandoffCreated,
        HandoffClaimed,
        HandoffReleased,
        HandoffReassigned,
        HandoffAnswered,
        HandoffIgnored,
        HandoffTakenOver,
        HandoffHandedBack,
        HandoffClosed,
        HandoffCancelled,
        HandoffExpired,
        HandoffOverdue,
        HandoffWorked,
    )
}


def webhook_event_for(message_type: str, payload: dict[str, Any]) -> str | None:
    """The webhook an outbox row of `message_type` is delivered as (None: not delivered)."""
    cls = EVENT_CLASSES.get(message_type)
    if cls is None:
        return None
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in payload.items() if k in names}).webhook_event()
