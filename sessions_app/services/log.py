"""Writing to a session's log under its row lock: the floor every other writer stands on.

`insert_events_locked` allocates seqs and inserts a batch inside the caller's transaction
(sessions_app.storage holds the SQL); `events_written` updates the in-memory session and
schedules what follows a commit (snapshots at interval boundaries, the live notice). Appending
(services.events) and lifecycle moves (services.lifecycle) both write through here.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core import metrics
from core.actors import Actor
from core.domain_events import publish
from core.errors import InvalidInput, NotFound
from core.storage import concrete_field
from sessions_app import storage
from sessions_app.errors import HeadSeqMismatch, SessionNotWritable, SessionTakenOver
from sessions_app.models import (
    AGENT_KINDS,
    DEFAULT_TIER,
    WRITABLE_STATUSES,
    Event,
    EventKind,
    Session,
    Tier,
)

from ..domain_events import EventsAppended
from .snapshots import schedule_snapshots


@dataclass
class EventDraft:
    """An event as submitted, before it has a seq."""

    kind: str
    content: Any = field(default_factory=dict)
    tier: str | None = None
    role: str = ""
    tokens: int = 0
    cost: Decimal = Decimal("0")
    idempotency_key: str | None = None


def searchable_text(kind: str, content: Any) -> str:
    if not isinstance(content, dict):
        return ""
    if kind == EventKind.DECISION:
        return " ".join(str(content.get(k, "")) for k in ("decision", "rationale")).strip()
    if kind == EventKind.FACT:
        return f"{content.get('key', '')}: {content.get('value', '')}"
    text = content.get("text") or content.get("message") or ""
    return text if isinstance(text, str) else ""


# The columns' sizes: a longer value from a Python caller (the API's schema refuses it first)
# would reach PostgreSQL and come back as a DataError.
_TEXT_LIMITS = {
    name: concrete_field(Event, name).max_length for name in ("role", "idempotency_key")
}


def validate_draft(draft: EventDraft, *, system: bool) -> None:
    for name, limit in _TEXT_LIMITS.items():
        value = getattr(draft, name)
        if value is not None and limit is not None and len(value) > limit:
            raise InvalidInput(
                f"{name} is at most {limit} characters.",
                detail={"field": name, "limit": limit, "size": len(value)},
            )
    allowed = set(EventKind) if system else AGENT_KINDS
    if draft.kind not in allowed:
        raise InvalidInput(
            f"Event kind {draft.kind!r} cannot be appended.",
            detail={"kind": draft.kind, "allowed": sorted(allowed)},
        )
    if draft.tier is not None and draft.tier not in Tier.values:
        raise InvalidInput(f"Unknown tier {draft.tier!r}.", detail={"allowed": Tier.values})
    if draft.tier == Tier.TRANSIENT and DEFAULT_TIER[draft.kind] == Tier.DURABLE:
        # Facts and decisions must survive compaction (invariant 6), and slices filtered to
        # durable kinds read only durable rows (queries.slice_events): they are never transient.
        raise InvalidInput(
            f"A {draft.kind} event is always durable.",
            detail={"kind": draft.kind, "tier": draft.tier},
        )
    if not isinstance(draft.content, dict):
        raise InvalidInput("Event content must be a JSON object.", detail={"kind": draft.kind})
    if draft.kind == EventKind.FACT and not isinstance(draft.content.get("key"), str):
        raise InvalidInput('A fact needs a string "key" and a "value".')
    if draft.kind == EventKind.FACT and "value" not in draft.content:
        raise InvalidInput('A fact needs a string "key" and a "value".')
    if draft.kind == EventKind.DECISION and not isinstance(draft.content.get("decision"), str):
        raise InvalidInput('A decision needs a string "decision" (and a "rationale").')
    if draft.tokens < 0 or draft.cost < 0:
        raise InvalidInput("tokens and cost cannot be negative.")


_EVENT_FIELDS = (
    "session_id",
    "seq",
    "kind",
    "tier",
    "role",
    "content",
    "text",
    "tokens",
    "cost",
    "actor",
    "idempotency_key",
    "created_at",
)
if tuple(f.attname for f in Event._meta.concrete_fields) != _EVENT_FIELDS:
    # build_events passes the fields by position: a field added or moved must be placed there.
    raise RuntimeError("Event's fields changed: update build_events and _EVENT_FIELDS")


def build_events(
    session: Session, drafts: Sequence[EventDraft], *, actor: Actor, first: int | None
) -> list[Event]:
    """Unsaved events numbered from `first`; with `first` None they have no seq yet (the
    one-statement append numbers them in SQL, then sets it)."""
    now = timezone.now()
    label = actor.label
    # Positional, in _EVENT_FIELDS' order: half the cost of keywords in Model.__init__ (a
    # batch of 100 spent a tenth of its server time building its events).
    events = [
        # django-stubs' positional signature for Event is one field off from Model.__init__'s
        # (which takes the concrete fields in order): _EVENT_FIELDS is checked at import.
        Event(  # type: ignore[misc]
            session.pk,
            None,
            d.kind,
            d.tier or DEFAULT_TIER[d.kind],
            d.role,
            d.content,
            searchable_text(d.kind, d.content),
            d.tokens,
            d.cost,
            label,
            d.idempotency_key,
            now,
        )
        for d in drafts
    ]
    if first is not None:
        for position, event in enumerate(events):
            event.seq = first + position
    return events


def explain_refusal(
    session_id: Any, expected_head_seq: int | None, project_id: int | None = None
) -> Exception:
    """Why the allocating UPDATE matched no row: not found, not writable, or a moved head."""
    found = Session.objects.filter(pk=session_id)
    if project_id is not None:
        found = found.filter(project_id=project_id)
    current = found.values("status", "head_seq", "taken_over_by").first()
    if current is None:
        return NotFound("Session not found.", detail={"session_id": str(session_id)})
    if current["status"] not in WRITABLE_STATUSES:
        return SessionNotWritable(
            f"The session is {current['status']}; it accepts no more events.",
            detail={"status": current["status"]},
        )
    if current["taken_over_by"]:
        return SessionTakenOver(
            "A person has taken this session over; the agent's appends are refused until "
            "it is handed back.",
            detail={"taken_over_by": current["taken_over_by"]},
        )
    return HeadSeqMismatch(
        "The session's head has moved since you read it.",
        detail={"expected_head_seq": expected_head_seq, "head_seq": current["head_seq"]},
    )


@dataclass
class Written:
    """What an insert under the lock left on the session row."""

    events: list[Event]
    status: str
    tokens_used: int
    cost_used: Decimal
    max_tokens: int | None
    max_cost: Decimal | None


def is_agent_write(actor: Actor, *, system: bool = False) -> bool:
    """An append a take-over keeps out: anything but a person's or the system's."""
    return not system and actor.user is None


def insert_events_locked(
    session: Session,
    drafts: Sequence[EventDraft],
    *,
    actor: Actor,
    expected_head_seq: int | None = None,
    system: bool = False,
) -> Written:
    """Allocate seqs and insert; the caller holds a transaction. Raises on refusal.

    `system` writes (lifecycle and handoff records) are accepted whatever the status; an
    agent's (no user) are refused while a person has taken the session over.
    """
    allocated = storage.allocate_seqs(
        session.pk,
        session.project_id,
        count=len(drafts),
        tokens=sum(d.tokens for d in drafts),
        cost=sum((d.cost for d in drafts), Decimal("0")),
        now=timezone.now(),
        writable_statuses=None if system else WRITABLE_STATUSES,
        expected_head_seq=expected_head_seq,
        agent_write=is_agent_write(actor, system=system),
    )
    if allocated is None:
        raise explain_refusal(session.pk, expected_head_seq, session.project_id)
    head, status, tokens_used, cost_used, max_tokens, max_cost = allocated
    first = head - len(drafts) + 1
    events = build_events(session, drafts, actor=actor, first=first)
    storage.insert_events(events)
    events_written(
        session, first, head, status, tokens_used, cost_used, kinds=[e.kind for e in events]
    )
    return Written(events, status, tokens_used, cost_used, max_tokens, max_cost)


def events_written(
    session: Session,
    first: int,
    head: int,
    status: str,
    tokens_used: int,
    cost_used: Decimal,
    *,
    kinds: list[str],
) -> None:
    """Seqs first..head are written: update `session`; count, snapshot and announce after
    commit."""
    # After commit, so a rolled-back batch is not counted (runs at once outside a transaction).
    transaction.on_commit(lambda: metrics.count_events(kinds))
    old_head = first - 1
    session.head_seq = head
    session.status = status
    session.tokens_used = tokens_used
    session.cost_used = cost_used
    every = settings.SWITCHBOARD_SNAPSHOT_EVERY
    if every > 0 and head // every > old_head // every:
        # Every boundary the batch crossed, not only the last: a 1000-event batch must not leave
        # a 1000-event fold behind it (invariant 5's bound is the interval, not the batch size).
        boundaries = list(range((old_head // every + 1) * every, head + 1, every))
        session_id = session.pk
        # robust: the events have committed whatever happens here; a failed snapshot must not
        # turn a durable append into an error the agent would retry (and so duplicate). Taken
        # by this process's snapshot thread, after the response (services/snapshots.py).
        transaction.on_commit(lambda: schedule_snapshots(session_id, boundaries), robust=True)
    publish(
        EventsAppended(
            project_id=session.project_id,
            session_id=str(session.pk),
            from_seq=first,
            to_seq=head,
        )
    )
