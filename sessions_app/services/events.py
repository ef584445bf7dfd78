"""Appending to a session's log: the hot path.

One short transaction: a single UPDATE … RETURNING on the session row both takes its lock and
allocates the seqs (so they are gap-free under any number of writers), then one multi-row INSERT
writes the batch. Usage counters ride in the same UPDATE; snapshots and broadcasts run after
commit.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from ..actors import Actor
from ..errors import HeadSeqMismatch, InvalidInput, NotFound, SessionNotWritable
from ..models import (
    AGENT_KINDS,
    DEFAULT_TIER,
    WRITABLE_STATUSES,
    Event,
    EventKind,
    Session,
    SessionStatus,
    Tier,
)
from .. import realtime


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


@dataclass
class AppendResult:
    events: list[Event]
    head_seq: int
    # Positions (in request order) answered from an earlier append with the same key.
    replayed: set[int] = field(default_factory=set)


def searchable_text(kind: str, content: Any) -> str:
    if not isinstance(content, dict):
        return ""
    if kind == EventKind.DECISION:
        return " ".join(str(content.get(k, "")) for k in ("decision", "rationale")).strip()
    if kind == EventKind.FACT:
        return f"{content.get('key', '')}: {content.get('value', '')}"
    text = content.get("text") or content.get("message") or ""
    return text if isinstance(text, str) else ""


def validate_draft(draft: EventDraft, *, system: bool) -> None:
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


def _db(field_name: str, value: Any) -> Any:
    return Session._meta.get_field(field_name).get_db_prep_value(value, connection)


def _allocate(
    session_id: Any,
    count: int,
    *,
    tokens: int,
    cost: Decimal,
    expected_head_seq: int | None,
    system: bool,
) -> tuple[int, str, int, Decimal, int | None, Decimal | None] | None:
    """Lock the session row and reserve `count` seqs; None when the WHERE clause refused."""
    sql = [
        "UPDATE sessions_app_session SET head_seq = head_seq + %s,"
        " tokens_used = tokens_used + %s, cost_used = cost_used + %s, updated_at = %s"
        " WHERE id = %s"
    ]
    params: list[Any] = [
        count, tokens, _db("cost_used", cost), _db("updated_at", timezone.now()),
        _db("id", session_id),
    ]
    if not system:
        sql.append(" AND status IN (%s, %s, %s)")
        params.extend(str(s) for s in WRITABLE_STATUSES)
    if expected_head_seq is not None:
        sql.append(" AND head_seq = %s")
        params.append(expected_head_seq)
    sql.append(
        " RETURNING head_seq, status, tokens_used, cost_used, budget_max_tokens, budget_max_cost"
    )
    with connection.cursor() as cursor:
        cursor.execute("".join(sql), params)
        row = cursor.fetchone()
    if row is None:
        return None
    head, status, tokens_used, cost_used, max_tokens, max_cost = row
    return head, status, tokens_used, Decimal(str(cost_used)), max_tokens, (
        None if max_cost is None else Decimal(str(max_cost))
    )


def _explain_refusal(session_id: Any, expected_head_seq: int | None) -> Exception:
    current = Session.objects.filter(pk=session_id).values("status", "head_seq").first()
    if current is None:
        return NotFound("Session not found.")
    if current["status"] not in WRITABLE_STATUSES:
        return SessionNotWritable(
            f"The session is {current['status']}; it accepts no more events.",
            detail={"status": current["status"]},
        )
    return HeadSeqMismatch(
        "The session's head has moved since you read it.",
        detail={"expected_head_seq": expected_head_seq, "head_seq": current["head_seq"]},
    )


def insert_events_locked(
    session: Session,
    drafts: Sequence[EventDraft],
    *,
    actor: Actor,
    expected_head_seq: int | None = None,
    system: bool = False,
) -> list[Event]:
    """Allocate seqs and insert; the caller holds a transaction. Raises on refusal."""
    tokens = sum(d.tokens for d in drafts)
    cost = sum((d.cost for d in drafts), Decimal("0"))
    allocated = _allocate(
        session.pk, len(drafts), tokens=tokens, cost=cost,
        expected_head_seq=expected_head_seq, system=system,
    )
    if allocated is None:
        raise _explain_refusal(session.pk, expected_head_seq)
    head, status, tokens_used, cost_used, max_tokens, max_cost = allocated
    now = timezone.now()
    first = head - len(drafts) + 1
    events = [
        Event(
            session_id=session.pk,
            seq=first + i,
            kind=d.kind,
            tier=d.tier or DEFAULT_TIER[d.kind],
            role=d.role,
            content=d.content,
            text=searchable_text(d.kind, d.content),
            tokens=d.tokens,
            cost=d.cost,
            actor=actor.label,
            idempotency_key=d.idempotency_key,
            created_at=now,
        )
        for i, d in enumerate(drafts)
    ]
    Event.objects.bulk_create(events)
    old_head = first - 1
    session.head_seq = head
    session.status = status
    session.tokens_used = tokens_used
    session.cost_used = cost_used
    every = settings.SWITCHBOARD_SNAPSHOT_EVERY
    if every > 0 and head // every > old_head // every:
        from .state import ensure_snapshots  # state folds events; avoid the import cycle

        # Every boundary the batch crossed, not only the last: a 1000-event batch must not leave
        # a 1000-event fold behind it (invariant 5's bound is the interval, not the batch size).
        boundaries = list(range((old_head // every + 1) * every, head + 1, every))
        transaction.on_commit(lambda: ensure_snapshots(session.pk, boundaries))
    realtime.broadcast_on_commit(
        session, {"type": "session.events", "from_seq": first, "to_seq": head}
    )
    over = _budget_exceeded(tokens_used, cost_used, max_tokens, max_cost)
    if over and status in (SessionStatus.OPEN, SessionStatus.RESUMED) and not system:
        from .lifecycle import transition_locked

        transition_locked(session, SessionStatus.PAUSED, actor=Actor.system("budget"), reason=over)
    return events


def _budget_exceeded(
    tokens_used: int, cost_used: Decimal, max_tokens: int | None, max_cost: Decimal | None
) -> str:
    if max_tokens is not None and tokens_used > max_tokens:
        return f"budget exceeded: {tokens_used} tokens used of {max_tokens}"
    if max_cost is not None and cost_used > max_cost:
        return f"budget exceeded: cost {cost_used} of {max_cost}"
    return ""


def append_events(
    session: Session,
    drafts: Sequence[EventDraft],
    *,
    actor: Actor,
    expected_head_seq: int | None = None,
) -> AppendResult:
    """Append a batch from an agent (or human) and return every event, in request order.

    Events whose idempotency_key was already used in this session are answered with the
    original event and not written again. Raises SessionNotWritable (closed/archived),
    HeadSeqMismatch (expected_head_seq given and stale; nothing written) or InvalidInput.
    Broadcasts the new range after commit; may pause the session when its budget runs out.
    """
    if not drafts:
        raise InvalidInput("An append needs at least one event.")
    for draft in drafts:
        validate_draft(draft, system=False)
    keys = [d.idempotency_key for d in drafts if d.idempotency_key is not None]
    if len(keys) != len(set(keys)):
        raise InvalidInput("An idempotency_key appears twice in the batch.")

    # Two attempts: a concurrent request with the same key can win between our look-up and our
    # insert; its unique-constraint violation rolls our whole transaction back (no seq is lost)
    # and the second look-up then finds its rows.
    for attempt in range(2):
        originals = _originals_by_key(session, keys) if keys else {}
        fresh = [d for d in drafts if d.idempotency_key not in originals]
        if not fresh:
            return _result(session, drafts, originals, [], session_head=None)
        try:
            with transaction.atomic():
                written = insert_events_locked(
                    session, fresh, actor=actor, expected_head_seq=expected_head_seq
                )
        except IntegrityError:
            if attempt == 1 or not keys:
                raise
            continue
        return _result(session, drafts, originals, written, session_head=session.head_seq)
    raise AssertionError("unreachable")


def _originals_by_key(session: Session, keys: list[str]) -> dict[str, Event]:
    return {
        event.idempotency_key: event
        for event in Event.objects.filter(session_id=session.pk, idempotency_key__in=keys)
    }


def _result(
    session: Session,
    drafts: Sequence[EventDraft],
    originals: dict[str, Event],
    written: list[Event],
    *,
    session_head: int | None,
) -> AppendResult:
    if session_head is None:
        session.refresh_from_db(fields=["head_seq", "status", "tokens_used", "cost_used"])
        session_head = session.head_seq
    fresh_iter = iter(written)
    events: list[Event] = []
    replayed: set[int] = set()
    for position, draft in enumerate(drafts):
        if draft.idempotency_key in originals:
            events.append(originals[draft.idempotency_key])
            replayed.add(position)
        else:
            events.append(next(fresh_iter))
    return AppendResult(events=events, head_seq=session_head, replayed=replayed)
