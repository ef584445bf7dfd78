"""Appending to a session's log: the hot path.

One short transaction: a single UPDATE … RETURNING on the session row both takes its lock and
allocates the seqs (so they are gap-free under any number of writers), then one multi-row INSERT
(a COPY for a larger batch on PostgreSQL) writes the batch. Usage counters ride in the same
UPDATE; snapshots and broadcasts run after commit. The common case (a few events, a session
without a budget, PostgreSQL, no enclosing transaction) sends both as one statement in its own
transaction: one round trip instead of four (BEGIN, UPDATE, INSERT, COMMIT).
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from .. import realtime
from ..actors import Actor
from ..errors import (
    HeadSeqMismatch,
    InvalidInput,
    NotFound,
    PartialReplay,
    PayloadTooLarge,
    SessionNotWritable,
)
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
    project_id: int,
    tokens: int,
    cost: Decimal,
    expected_head_seq: int | None,
    system: bool,
) -> tuple[int, str, int, Decimal, int | None, Decimal | None] | None:
    """Lock the session row and reserve `count` seqs; None when the WHERE clause refused.

    Scoped to the project: the API appends to a session it has not read (see api.append).
    """
    sql = [
        "UPDATE sessions_app_session SET head_seq = head_seq + %s,"
        " tokens_used = tokens_used + %s, cost_used = cost_used + %s, updated_at = %s"
        " WHERE id = %s AND project_id = %s"
    ]
    params: list[Any] = [
        count, tokens, _db("cost_used", cost), _db("updated_at", timezone.now()),
        _db("id", session_id), project_id,
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


# From this many rows a batch goes in with COPY (PostgreSQL): the rows are sent as they are, where
# a multi-row INSERT has every one of the ~12 values per row quoted into the SQL text in Python
# (Django's client-side binding); about half the client CPU of a batch of 100 (bench/ingest.py).
COPY_FROM_ROWS = 8


def _insert(events: list[Event]) -> None:
    """Write the events: what `bulk_create` does, without its per-call SQL compilation.

    A few rows (the common single-event append): one multi-row INSERT. More rows on PostgreSQL:
    one COPY in the same transaction. Either way a constraint violation (a concurrent append
    with the same idempotency key) raises Django's IntegrityError and nothing is written.
    """
    fields = Event._meta.concrete_fields
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(Event._meta.db_table)
    if connection.vendor == "postgresql" and len(events) >= COPY_FROM_ROWS:
        with (
            connection.cursor() as cursor,
            connection.wrap_database_errors,
            cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
        ):
            for event in events:
                copy.write_row(
                    [f.get_db_prep_save(getattr(event, f.attname), connection) for f in fields]
                )
        return
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    size = max(connection.ops.bulk_batch_size(list(fields), events), 1)
    with connection.cursor() as cursor:
        for start in range(0, len(events), size):
            chunk = events[start:start + size]
            params = [
                f.get_db_prep_save(getattr(event, f.attname), connection)
                for event in chunk
                for f in fields
            ]
            values = ", ".join([row] * len(chunk))
            cursor.execute(f"INSERT INTO {table} ({columns}) VALUES {values}", params)


def _explain_refusal(
    session_id: Any, expected_head_seq: int | None, project_id: int | None = None
) -> Exception:
    found = Session.objects.filter(pk=session_id)
    if project_id is not None:
        found = found.filter(project_id=project_id)
    current = found.values("status", "head_seq").first()
    if current is None:
        return NotFound("Session not found.", detail={"session_id": str(session_id)})
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
        session.pk, len(drafts), project_id=session.project_id, tokens=tokens, cost=cost,
        expected_head_seq=expected_head_seq, system=system,
    )
    if allocated is None:
        raise _explain_refusal(session.pk, expected_head_seq, session.project_id)
    head, status, tokens_used, cost_used, max_tokens, max_cost = allocated
    first = head - len(drafts) + 1
    events = _build_events(session, drafts, actor=actor, first=first)
    _insert(events)
    _written(session, first, head, status, tokens_used, cost_used)
    over = _budget_exceeded(tokens_used, cost_used, max_tokens, max_cost)
    if over and status in (SessionStatus.OPEN, SessionStatus.RESUMED) and not system:
        from .lifecycle import transition_locked

        transition_locked(session, SessionStatus.PAUSED, actor=Actor.system("budget"), reason=over)
    return events


def _build_events(
    session: Session, drafts: Sequence[EventDraft], *, actor: Actor, first: int | None
) -> list[Event]:
    now = timezone.now()
    return [
        Event(
            session_id=session.pk,
            seq=None if first is None else first + i,
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


def _written(
    session: Session, first: int, head: int, status: str, tokens_used: int, cost_used: Decimal
) -> None:
    """Seqs first..head are written: update `session`; snapshot and broadcast after commit."""
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
        # robust: the events have committed whatever happens here; a failed snapshot must not
        # turn a durable append into an error the agent would retry (and so duplicate).
        transaction.on_commit(lambda: ensure_snapshots(session.pk, boundaries), robust=True)
    realtime.broadcast_on_commit(
        session, {"type": "session.events", "from_seq": first, "to_seq": head}
    )


def _can_append_in_one_statement(drafts: Sequence[EventDraft]) -> bool:
    return (
        connection.vendor == "postgresql"
        and not connection.in_atomic_block
        and len(drafts) < COPY_FROM_ROWS
    )


def _cast(field: Any) -> str:
    """The cast a VALUES placeholder needs so INSERT … SELECT sees the column's type.

    Text columns get none: the INSERT's assignment then checks varchar lengths as usual.
    """
    db_type = field.db_type(connection)
    if db_type.startswith("varchar") or db_type == "text":
        return ""
    return "::numeric" if db_type.startswith("numeric") else f"::{db_type}"


def _append_in_one_statement(
    session: Session,
    drafts: Sequence[EventDraft],
    *,
    actor: Actor,
    expected_head_seq: int | None,
) -> list[Event] | None:
    """The append as one statement in its own transaction (PostgreSQL): one round trip.

    The UPDATE … RETURNING that locks the session row and allocates the seqs and the INSERT
    that uses them are one data-modifying WITH, so they commit together or not at all, and
    concurrent appends still queue on the row lock (gap-free seqs). Only for sessions without
    a budget: a budgeted append may have to pause the session in the same transaction, so the
    WHERE clause leaves those (and every refusal: closed, stale expected_head_seq, not found)
    to the transactional path, which answers them exactly as before. None when nothing was
    written.
    """
    fields = [f for f in Event._meta.concrete_fields if f.attname != "seq"]
    events = _build_events(session, drafts, actor=actor, first=None)
    row = "(%s, " + ", ".join(f"%s{_cast(f)}" for f in fields) + ")"
    params: list[Any] = [
        len(drafts), sum(d.tokens for d in drafts),
        _db("cost_used", sum((d.cost for d in drafts), Decimal("0"))),
        _db("updated_at", timezone.now()), _db("id", session.pk), session.project_id,
        *(str(s) for s in WRITABLE_STATUSES),
    ]
    head_check = ""
    if expected_head_seq is not None:
        head_check = " AND head_seq = %s"
        params.append(expected_head_seq)
    params.append(len(drafts))
    for position, event in enumerate(events, start=1):
        params.append(position)
        params.extend(f.get_db_prep_save(getattr(event, f.attname), connection) for f in fields)
    aliases = ", ".join(f"c{i}" for i in range(len(fields)))
    values = ", ".join(f"v.c{i}" for i in range(len(fields)))
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    sql = (
        "WITH s AS ("
        " UPDATE sessions_app_session SET head_seq = head_seq + %s,"
        " tokens_used = tokens_used + %s, cost_used = cost_used + %s, updated_at = %s"
        " WHERE id = %s AND project_id = %s AND status IN (%s, %s, %s)"
        f" AND budget_max_tokens IS NULL AND budget_max_cost IS NULL{head_check}"
        " RETURNING head_seq, status, tokens_used, cost_used"
        "), w AS ("
        f" INSERT INTO sessions_app_event (seq, {columns})"
        f" SELECT s.head_seq - %s + v.ord, {values}"
        f" FROM s CROSS JOIN (VALUES {', '.join([row] * len(events))}) AS v(ord, {aliases})"
        ") SELECT head_seq, status, tokens_used, cost_used FROM s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        result = cursor.fetchone()
    if result is None:
        return None
    head, status, tokens_used, cost_used = result
    first = head - len(events) + 1
    for position, event in enumerate(events):
        event.seq = first + position
    _written(session, first, head, status, tokens_used, Decimal(str(cost_used)))
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
    limit = settings.SWITCHBOARD_MAX_EVENT_BYTES
    for position, draft in enumerate(drafts):
        validate_draft(draft, system=False)
        size = len(json.dumps(draft.content, separators=(",", ":")))
        if size > limit:
            raise PayloadTooLarge(
                f"Event {position} has {size} bytes of content; the limit is {limit}.",
                detail={"index": position, "limit": limit, "size": size},
            )
    keys = [d.idempotency_key for d in drafts if d.idempotency_key is not None]
    if len(keys) != len(set(keys)):
        raise InvalidInput("An idempotency_key appears twice in the batch.")

    # Two attempts: a concurrent request with the same key can win between our look-up and our
    # insert; its unique-constraint violation rolls our whole transaction back (no seq is lost)
    # and the second look-up then finds its rows.
    for attempt in range(2):
        originals = _originals_by_key(session, keys) if keys else {}
        fresh = [d for d in drafts if d.idempotency_key not in originals]
        if originals and any(d.idempotency_key is None for d in fresh):
            # A retry of a batch that mixes keyed and unkeyed events: the unkeyed ones may have
            # been written by the first try and cannot be recognised, so writing them again
            # could duplicate them. Refuse; key every event of a batch to make it retryable.
            raise PartialReplay(
                "Part of this batch was written before (its idempotency keys are known), and "
                "it also holds events without a key, which cannot be safely written again.",
                detail={"replayed_keys": sorted(originals)},
            )
        if not fresh:
            return _result(session, drafts, originals, [], session_head=None)
        try:
            written = None
            if _can_append_in_one_statement(fresh):
                written = _append_in_one_statement(
                    session, fresh, actor=actor, expected_head_seq=expected_head_seq
                )
            if written is None:
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
