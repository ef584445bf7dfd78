"""Appending to a session's log: the hot path.

One short transaction: a single UPDATE … RETURNING on the session row both takes its lock and
allocates the seqs (so they are gap-free under any number of writers), then one multi-row INSERT
(a COPY for a larger batch) writes the batch (services.log, SQL in sessions_app.storage). Usage
counters ride in the same UPDATE; snapshots and the live notice follow the commit. The common
case (a session without a budget, no enclosing transaction) sends both as one statement in its
own transaction: one round trip instead of four (BEGIN, UPDATE, INSERT, COMMIT) or five with a
COPY; a larger batch's rows go in that statement as one JSON array (storage). A budgeted
session whose budget runs out is paused in the same transaction (services.lifecycle), which is
why appending sits above lifecycle.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from core.actors import Actor
from core.errors import InvalidInput, PayloadTooLarge
from core.text import MAX_JSON_DEPTH, check_storable, within_bounds
from sessions_app import storage
from sessions_app.errors import IdempotencyKeyReused, PartialReplay
from sessions_app.models import DEFAULT_TIER, WRITABLE_STATUSES, Event, Session, SessionStatus

from ..signals import budget_exceeded
from .blobs import StoredBlob, checked, held_blobs, store_blobs, store_blobs_locked
from .lifecycle import transition_locked
from .log import (
    EventDraft,
    build_events,
    events_written,
    insert_events_locked,
    is_agent_write,
    validate_draft,
)

__all__ = ["AppendResult", "EventDraft", "append_events"]


@dataclass
class AppendResult:
    events: list[Event]
    head_seq: int
    # Positions (in request order) answered from an earlier append with the same key.
    replayed: set[int] = field(default_factory=set)
    # The blobs sent with the batch, in order (append_events' `blobs`).
    blobs: list[StoredBlob] = field(default_factory=list)


def _budget_exceeded(
    tokens_used: int, cost_used: Decimal, max_tokens: int | None, max_cost: Decimal | None
) -> str:
    if max_tokens is not None and tokens_used > max_tokens:
        return f"budget exceeded: {tokens_used} tokens used of {max_tokens}"
    if max_cost is not None and cost_used > max_cost:
        return f"budget exceeded: cost {cost_used} of {max_cost}"
    return ""


def _append_locked(
    session: Session,
    drafts: Sequence[EventDraft],
    *,
    actor: Actor,
    expected_head_seq: int | None,
) -> list[Event]:
    """The transactional path: insert under the row lock, pause on an exhausted budget."""
    written = insert_events_locked(
        session, drafts, actor=actor, expected_head_seq=expected_head_seq
    )
    over = _budget_exceeded(
        written.tokens_used, written.cost_used, written.max_tokens, written.max_cost
    )
    if over and written.status in (SessionStatus.OPEN, SessionStatus.RESUMED):
        system = Actor.system("budget")
        transition_locked(session, SessionStatus.PAUSED, actor=system, reason=over)
        # In this transaction: what the apps above do about it (a budget handoff) commits
        # with the pause or not at all.
        budget_exceeded.send(sender=Session, session=session, reason=over, actor=system)
    return written.events


def _append_in_one_statement(
    session: Session,
    drafts: Sequence[EventDraft],
    *,
    actor: Actor,
    expected_head_seq: int | None,
) -> list[Event] | None:
    """The append as one statement in its own transaction; None when nothing was written.

    Sessions with a budget, and every refusal (closed, stale expected_head_seq, not found),
    are left to the transactional path, which answers them exactly as before.
    """
    events = build_events(session, drafts, actor=actor, first=None)
    result = storage.append_in_one_statement(
        session.pk,
        session.project_id,
        events,
        tokens=sum(d.tokens for d in drafts),
        cost=sum((d.cost for d in drafts), Decimal("0")),
        now=timezone.now(),
        writable_statuses=WRITABLE_STATUSES,
        expected_head_seq=expected_head_seq,
        agent_write=is_agent_write(actor),
    )
    if result is None:
        return None
    head, status, tokens_used, cost_used = result
    first = head - len(events) + 1
    for position, event in enumerate(events):
        event.seq = first + position
    events_written(
        session, first, head, status, tokens_used, cost_used, kinds=[e.kind for e in events]
    )
    return events


def _contents_storable_within(drafts: Sequence[EventDraft], limit: int) -> bool:
    """True when no draft's content can be unstorable or over `limit`, told by one encoding of
    the whole batch (per event, json.dumps built an encoder each time: a twentieth of a batch
    of 100's server time), and none nests too deep or holds too long an integer (the batch's
    list is one level more). False leaves it to _checked_content_size, event by event, which
    finds and names the one at fault.

    The limit counts ASCII-escaped JSON: a character is at most three times as long escaped
    as it is in UTF-8 (two or three bytes become a six-character escape, four bytes two of
    them), so a batch within a third of the limit in UTF-8 has no event over it."""
    try:
        dumped = json.dumps(
            [d.content for d in drafts], ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
        size = len(dumped.encode("utf-8"))  # a lone surrogate fails here
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
        return False
    return (
        "\\u0000" not in dumped
        and 3 * size <= limit
        and within_bounds([d.content for d in drafts], MAX_JSON_DEPTH + 1)
    )


def _checked_content_size(content: dict[str, object], position: int) -> int:
    """The content's size as compact JSON (ASCII-escaped, as the limit has always counted),
    after check_storable(content): one encoding serves both for the usual content (a batch
    of 100 encoded it twice, a tenth of its server time)."""
    try:
        # allow_nan=False: NaN or infinity raises here, and check_storable refuses it (the
        # append's storage encodes with orjson, which would write it as null).
        dumped = json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        dumped.encode("utf-8")  # a lone surrogate fails here
        # A NUL (or a text spelling its escape: the walk tells), deep nesting or a long integer.
        suspect = "\\u0000" in dumped or not within_bounds(content, MAX_JSON_DEPTH)
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
        suspect = True
    if suspect:
        check_storable(content, field="content", index=position)  # raises, naming the field
        dumped = json.dumps(content, separators=(",", ":"))
    if dumped.isascii():
        return len(dumped)
    return len(json.dumps(content, separators=(",", ":")))


def append_events(
    session: Session,
    drafts: Sequence[EventDraft],
    *,
    actor: Actor,
    expected_head_seq: int | None = None,
    blobs: Sequence[bytes] = (),
) -> AppendResult:
    """Append a batch from an agent (or human) and return every event, in request order.

    `blobs` (bytes the events name by SHA-256, services.blobs) are stored in the append's
    transaction: both or neither. Checked first (PayloadTooLarge as store_blobs); a batch
    that is all replays stores those the session lacks (store_blobs: its rules, its lock).

    Events whose idempotency_key was already used in this session's history (its own log or,
    for a fork, an ancestor's up to the fork point) are answered with the original event and
    not written again, when they repeat it (_changed_fields); an event that does not is
    refused with IdempotencyKeyReused, and nothing of the batch is written. For that look-up
    `session` carries its ancestry (a loaded row). Raises SessionNotWritable
    (closed/archived), HeadSeqMismatch (expected_head_seq given and stale; nothing written) or
    InvalidInput. Announces the new range after commit; may pause the session when its budget
    runs out.
    """
    if not drafts:
        raise InvalidInput("An append needs at least one event.")
    digests = checked(blobs) if blobs else []
    limit = settings.SWITCHBOARD_MAX_EVENT_BYTES
    contents_fit = _contents_storable_within(drafts, limit)
    for position, draft in enumerate(drafts):
        validate_draft(draft, system=False)
        # The API's schemas refuse these first; this keeps any other caller's text from
        # reaching psycopg (a UnicodeEncodeError) or PostgreSQL (a DataError quoting SQL).
        for name in ("role", "idempotency_key"):
            check_storable(getattr(draft, name), field=name, index=position)
        if contents_fit:
            continue
        size = _checked_content_size(draft.content, position)
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
        if originals:
            _refuse_changed_replays(drafts, originals)
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
            stored = _replayed_blobs(session, blobs, digests)
            return _result(session, drafts, originals, [], session_head=None, blobs=stored)
        stored = []
        try:
            written = None
            # The one-statement path writes events only: blobs take the transactional one.
            if not connection.in_atomic_block and not blobs:
                written = _append_in_one_statement(
                    session, fresh, actor=actor, expected_head_seq=expected_head_seq
                )
            if written is None:
                with transaction.atomic():
                    written = _append_locked(
                        session, fresh, actor=actor, expected_head_seq=expected_head_seq
                    )
                    # After the events: their UPDATE holds the row, writable (else refused).
                    if blobs:
                        stored = store_blobs_locked(session, blobs, digests)
        except IntegrityError:
            if attempt == 1 or not keys:
                raise
            continue
        return _result(
            session, drafts, originals, written, session_head=session.head_seq, blobs=stored
        )
    raise AssertionError("unreachable")


def _replayed_blobs(
    session: Session, blobs: Sequence[bytes], digests: list[str]
) -> list[StoredBlob]:
    """The blobs of a batch that is all replays. Its first sending stored them with its
    events; a retry of it finds them all and writes nothing, whatever the session's status
    since (as for its events). Any the session lacks (the events were first sent without them)
    are stored now, under store_blobs' rules."""
    if not blobs:
        return []
    if set(digests) <= held_blobs(session, digests):
        return [
            StoredBlob(sha, len(b), created=False) for sha, b in zip(digests, blobs, strict=True)
        ]
    return store_blobs(session, blobs)


def _originals_by_key(session: Session, keys: list[str]) -> dict[str, Event]:
    """The event holding each of `keys` in the session's visible history: its own log and,
    for a fork, its ancestors' up to the fork point, whose keys it inherits with the events
    (invariant 3 across the lineage). One statement (storage.events_with_keys). Were a key
    held twice (a fork's own event written with an inherited key before forks were looked
    through), the earlier event answers."""
    originals: dict[str, Event] = {}
    for event in storage.events_with_keys(session.lineage_segments(), keys):
        if event.idempotency_key is not None:
            originals.setdefault(event.idempotency_key, event)
    return originals


def _changed_fields(draft: EventDraft, original: Event) -> list[str]:
    """What `draft` says differently from the event first written with its key.

    A retry repeats everything the caller says about the event: kind, tier (an omitted tier
    is the kind's default, as when it was written), role, content, tokens and cost. Content
    is compared as JSON (_same_json); cost as a decimal ("0.5" is "0.500000"). Who sends it
    (the actor, the API key) is not compared: a retry may come through a rotated key.
    """
    changed = []
    if draft.kind != original.kind:
        changed.append("kind")
    if (draft.tier or DEFAULT_TIER[draft.kind]) != original.tier:
        changed.append("tier")
    if draft.role != original.role:
        changed.append("role")
    if not _same_json(_as_json(draft.content), original.content):
        changed.append("content")
    if draft.tokens != original.tokens:
        changed.append("tokens")
    if Decimal(draft.cost) != original.cost:
        changed.append("cost")
    return changed


def _as_json(content: object) -> object:
    """Content as stored: a Python caller's tuples and non-text keys become what JSON makes
    of them. The API's content is JSON already and is taken as it is."""
    try:
        return json.loads(json.dumps(content))
    except (TypeError, ValueError):
        return content


def _same_json(a: object, b: object) -> bool:
    """Equal as JSON values: objects by their members in any order, arrays item by item,
    numbers by value (1 and 1.0 are one number, as PostgreSQL's jsonb holds them), and
    nothing across types (true is not 1, "1" is not 1, null is not "")."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(value, b[key]) for key, value in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _refuse_changed_replays(drafts: Sequence[EventDraft], originals: dict[str, Event]) -> None:
    """IdempotencyKeyReused for the first event whose key is known and which does not repeat
    the event written with it (as payment APIs refuse a key reused with other parameters):
    answering it with the original would tell the caller that what it sent was stored."""
    for position, draft in enumerate(drafts):
        if draft.idempotency_key is None or draft.idempotency_key not in originals:
            continue
        original = originals[draft.idempotency_key]
        changed = _changed_fields(draft, original)
        if changed:
            raise IdempotencyKeyReused(
                f"idempotency_key {draft.idempotency_key!r} was used for the event at seq "
                f"{original.seq}, which had another {', '.join(changed)}; a retry must send "
                "the same event, and a new event needs a new key.",
                detail={
                    "index": position,
                    "idempotency_key": draft.idempotency_key,
                    "seq": original.seq,
                    "session_id": str(original.session_id),
                    "changed": changed,
                },
            )


def _result(
    session: Session,
    drafts: Sequence[EventDraft],
    originals: dict[str, Event],
    written: list[Event],
    *,
    session_head: int | None,
    blobs: list[StoredBlob],
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
    return AppendResult(events=events, head_seq=session_head, replayed=replayed, blobs=blobs)
