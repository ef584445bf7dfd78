"""Reads shared by the API, the dashboard and the jobs.

A fork's history is its ancestors' rows up to each fork point plus its own, resolved through
`Session.ancestry`; nothing is copied. Every slice walks the (session_id, seq) primary key.
"""

import asyncio
import functools
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

import psycopg
from django.db.models import (
    Case,
    Count,
    JSONField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    TextField,
    Value,
    When,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, TruncMinute

from core.cursors import decode_cursor, encode_cursor
from core.errors import InvalidInput
from core.models import AuditEntry, Project
from core.storage import open_async_connection
from sessions_app import storage
from sessions_app.compaction import (
    CompactedRange,
    compacted_ranges,
    refuse_inside_compacted,
    summaries,
)
from sessions_app.models import DEFAULT_TIER, Event, EventKind, Session, SessionStatus, Tier


@dataclass
class EventSlice:
    rows: list[dict[str, Any]]  # each has "content_json": the stored JSON text, undecoded
    head_seq: int
    has_more: bool
    # With `as_json`, each event's JSON as the API sends it, and no rows.
    lines: list[str] = field(default_factory=list)
    # The compacted ranges the slice's window meets (CompactedRange.as_dict, with summary):
    # their transient events are gone, so a reader is told rather than shown a silent gap.
    compacted: list[dict[str, Any]] = field(default_factory=list)
    # Positions of the whole history compacted so far (the compacted ranges' total span):
    # every compaction that removes events from this history raises it, so a reader keeping
    # events between reads knows by it that its copy may hold removed ones (compaction_mark).
    compaction_mark: int = 0


def compaction_mark(ranges: list[CompactedRange]) -> int:
    """The total span of `ranges`: a compaction only ever widens a range (its through_seq
    grows), so this grows with every one that meets the history and never otherwise."""
    return sum(r.through_seq - r.after_seq for r in ranges)


def slice_events(
    session: Session,
    *,
    after_seq: int | None = None,
    before_seq: int | None = None,
    limit: int = 100,
    kinds: list[str] | None = None,
    tier: str | None = None,
    newest_first: bool = False,
    as_json: bool = False,
    keys: list[str] | None = None,
    key_prefix: str | None = None,
) -> EventSlice:
    """A positional slice: events with after_seq < seq < before_seq, at most `limit` of them.
    With `as_json`, the events come as `lines`, each one's JSON made by the database
    (storage.segment_rows), for a response that sends them as they are.

    Walks the lineage segment by segment along the primary key, so reading the last 50 events
    of a million-event session, or of a fork of one, touches about 50 index entries.

    With `keys` (or `key_prefix`), only the events whose idempotency_key is one of them (or
    starts with it), in the same window and order: a fork's include its ancestors' up to
    where it took them (their keys are the fork's too, services.events). Those segments are
    read through the unique index on the key when few events match (storage._key_condition).
    """
    if limit < 1 or limit > 1000:
        raise InvalidInput("limit must be between 1 and 1000.", detail={"limit": limit})
    if keys is not None and key_prefix is not None:
        raise InvalidInput(
            "Ask for events by key or by key_prefix, not both.",
            detail={"keys": keys, "key_prefix": key_prefix},
        )
    if tier is None and kinds and all(DEFAULT_TIER.get(k) == Tier.DURABLE for k in kinds):
        # Durable-only kinds live behind the partial index on durable events: far fewer rows
        # to walk than the whole log when filtering a long session for facts or decisions.
        tier = Tier.DURABLE
    lower = after_seq or 0
    upper = before_seq  # exclusive
    segments = session.lineage_segments()
    if newest_first:
        segments = list(reversed(segments))
    rows: list[Any] = []
    wanted = limit + 1  # one extra tells whether there is more
    for segment_id, seg_lower, seg_upto in segments:
        low = max(seg_lower, lower)
        high = seg_upto
        if upper is not None:
            high = upper - 1 if high is None else min(high, upper - 1)
        if high is not None and high <= low:
            continue
        read = functools.partial(
            storage.segment_rows,
            segment_id,
            kinds=kinds,
            tier=tier,
            newest_first=newest_first,
            as_json=as_json,
            keys=keys,
            key_prefix=key_prefix,
        )
        last = seg_upto if seg_upto is not None else session.head_seq
        # Durable events are read through their partial index, which holds only them: no
        # window to walk first (it would read transient positions for nothing).
        filtered = bool(kinds or tier or key_prefix) and not (
            tier == Tier.DURABLE and key_prefix is None
        )
        rows.extend(
            _window_first(
                read,
                low,
                high,
                last,
                wanted - len(rows),
                filtered=filtered,
                newest_first=newest_first,
            )
        )
        if len(rows) >= wanted:
            break
    has_more = len(rows) > limit
    compacted: list[dict[str, Any]] = []
    mark = 0
    if session.compacted_through_seq or session.ancestry:
        ranges = compacted_ranges(session)
        mark = compaction_mark(ranges)
        met = [r for r in ranges if r.overlaps(lower, _inclusive(upper))]
        found = summaries(met)
        compacted = [r.as_dict(found[(r.session_id, r.through_seq)]) for r in met]
    page = rows[:limit]
    return EventSlice(
        rows=[] if as_json else page,
        lines=page if as_json else [],
        head_seq=session.head_seq,
        has_more=has_more,
        compacted=compacted,
        compaction_mark=mark,
    )


# A filtered read's first window of positions holds at most this many (_window_first).
FIRST_WINDOW_MAX = 512
# A window where fewer than one position in this many matched: the rest is read by index.
SPARSE = 4


def _window_first(
    read: Callable[..., list[Any]],
    low: int,
    high: int | None,
    last: int,
    limit: int,
    *,
    filtered: bool,
    newest_first: bool,
) -> list[Any]:
    """read(low, high, limit=...) of one segment (low < seq <= high; `last`: its last seq as
    far as the session row knows), walked by windows of positions from the end the read
    starts at (the newest with newest_first, else the oldest).

    Why: PostgreSQL plans a filtered read from its statistics, and for a session's key prefix
    or kind list it often expects a few rows, so it fetches every matching row of the segment
    through an index and sorts them to keep `limit`: an adapter's "last 50 items" read all
    5,000 of a 5,000-item session (the OpenAI adapter's key_prefix, ADK's kinds). A window is
    read along the primary key (by_position) and touches at most its positions whatever the
    plan. The first is `2 * limit + 64` positions (at most FIRST_WINDOW_MAX); while the
    matches are dense the next is sized from what is still wanted; when they are sparse (fewer
    than one in SPARSE) the rest of the segment is read as before, where an index finds few
    rows cheaply (a checkpoint's writes among thousands of events). Each window is the answer
    so far because every row outside it is further from the starting end."""
    if not filtered:
        return read(low, high, limit=limit)
    rows: list[Any] = []
    window = min(2 * limit + 64, FIRST_WINDOW_MAX)
    top = last if high is None else min(high, last)
    while True:
        wanted = limit - len(rows)
        if top - low <= window:
            # What is left of the segment fits in the window: read it whole, by position.
            return rows + read(low, high, limit=wanted, by_position=True)
        if newest_first:
            cut = top - window
            found = read(cut, high, limit=wanted, by_position=True)
            high = top = cut
        else:
            cut = low + window
            found = read(low, cut, limit=wanted, by_position=True)
            low = cut
        rows += found
        if len(found) >= wanted:
            return rows
        if len(found) * SPARSE < window:
            return rows + read(low, high, limit=wanted - len(found))
        window = (wanted - len(found)) * window // len(found) + 64


def last_events(sessions: list[Session], limit: int) -> list[tuple[list[str], bool]]:
    """Per session, its last `limit` events oldest first (the API's JSON lines, as
    slice_events(as_json=True) makes them) and whether older ones exist.

    The root sessions never compacted are read in one statement, each walk bounded to the
    positions after head - limit - 1: seq is gap-free there, so those positions hold the events
    wanted and one more that says whether there are older ones. A session whose window comes
    back short (a gap), a compacted one and a fork are read by slice_events."""
    wanted = limit + 1
    simple = {
        session.pk: max(session.head_seq - wanted, 0)
        for session in sessions
        if not session.ancestry and not session.compacted_through_seq
    }
    batched = storage.last_events_json(list(simple.items()), wanted)
    tails: list[tuple[list[str], bool]] = []
    for session in sessions:
        newest = batched.get(session.pk)
        if newest is None or len(newest) < min(wanted, session.head_seq):
            page = slice_events(session, limit=limit, newest_first=True, as_json=True)
            lines, has_more = page.lines, page.has_more
        else:
            lines, has_more = newest[:limit], len(newest) > limit
        tails.append((lines[::-1], has_more))
    return tails


def _inclusive(before_seq: int | None) -> int | None:
    return None if before_seq is None else before_seq - 1


def iter_events_json(session: Session, *, chunk: int = 1000) -> Iterator[dict[str, Any]]:
    """Every visible event in seq order, read in keyset chunks so memory stays flat."""
    after = 0
    while True:
        page = slice_events(session, after_seq=after, limit=chunk)
        yield from page.rows
        if not page.has_more:
            return
        after = page.rows[-1]["seq"]


# Rows per FETCH of an export's server-side cursor, sent as one chunk: large enough that the
# per-chunk costs (a round trip, an ASGI message) vanish, small enough that a batch (lines the
# database built, joined here: ~3 ms) holds the event loop only briefly (bench/exports.py).
EXPORT_BATCH = 2000


class SessionExport:
    """A running export: its own database connection, holding one of its project's export
    slots (storage.take_export_slot), and what it will read (the lineage up to `upto`).

    `chunks()` yields the JSON Lines, one FETCH batch per chunk, awaiting the database
    between batches (no thread held), and closes the connection however it ends: fully read,
    the client gone (the server cancels the stream), or an error. Closing frees the slot.
    """

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any],
        segments: list[tuple[UUID, int, int | None]],
        *,
        upto: int,
        header: str,
    ) -> None:
        self.conn = conn
        self.segments = segments
        self.upto = upto
        self.header = header

    async def chunks(self) -> AsyncIterator[str]:
        try:
            yield self.header + "\n"
            async for lines in storage.export_lines(
                self.conn, self.segments, upto=self.upto, batch=EXPORT_BATCH
            ):
                yield "\n".join(lines) + "\n"
                await asyncio.sleep(0)  # let requests waiting on the event loop go first
        finally:
            await self.close()

    async def close(self) -> None:
        await self.conn.close()


def export_header(session: Session, *, agent_name: str) -> str:
    """An export's first line: the session it describes, as loaded (its events follow).

    One JSON object with the single key "session" (an event line has "seq"), so a reader tells
    it apart: id, title, agent, lineage (parent_id and fork_seq, null for a root), status,
    head_seq (the last event exported) and usage (tokens, cost as a decimal string).
    """
    return json.dumps(
        {
            "session": {
                "id": str(session.pk),
                "title": session.title,
                "agent": agent_name,
                "parent_id": None if session.parent_id is None else str(session.parent_id),
                "fork_seq": session.fork_seq,
                "status": session.status,
                "head_seq": session.head_seq,
                "usage": {"tokens": session.tokens_used, "cost": str(session.cost_used)},
            }
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


async def open_export(session: Session, *, slots: int, header: str) -> SessionExport | None:
    """Connect and take one of the project's `slots` export slots; None when all are taken.

    The export reads the session's visible log up to its head now (`session` as loaded),
    after `header` (export_header) as its first line.
    """
    conn = await open_async_connection()
    try:
        slot = await storage.take_export_slot(conn, session.project_id, slots=slots)
    except BaseException:
        await conn.close()
        raise
    if slot is None:
        await conn.close()
        return None
    return SessionExport(conn, session.lineage_segments(), upto=session.head_seq, header=header)


def lifecycle_changes(
    session: Session, *, limit: int = 50, upto_seq: int | None = None
) -> list[Event]:
    """The session's own lifecycle events (up to `upto_seq`), newest first (index
    event_lifecycle_seq)."""
    qs = Event.objects.filter(session_id=session.pk, kind=EventKind.LIFECYCLE)
    if upto_seq is not None:
        qs = qs.filter(seq__lte=upto_seq)
    return list(
        qs.order_by("-seq").only("session_id", "seq", "content", "actor", "created_at")[:limit]
    )


@dataclass(frozen=True)
class SessionAt:
    """What a session was at one seq of its history: when that was, its status, its usage and
    its budget then."""

    seq: int
    head_seq: int  # the head when this was read
    time: datetime  # when the event at `seq` was written (the session's opening for seq 0)
    status: str
    tokens_used: int
    cost_used: Decimal
    budget_max_tokens: int | None
    budget_max_cost: Decimal | None


def session_at(session: Session, seq: int) -> SessionAt:
    """The session as it was at `seq` (0 ≤ seq ≤ head).

    Raises InvalidInput outside that range and Compacted (410) strictly inside a compacted
    range, where the transient events (and so the time and usage there) are gone.

    Usage is the session's own counters minus its own events after `seq` (the events after a
    seq that is not inside a compacted range are all still there; the ones before may not
    be). A fork counts only its own events, as its counters do: zero inside the parent's
    prefix. The budget is the one set then: the `before` of the first budget change after
    that time (audit trail), else today's.
    """
    if seq < 0 or seq > session.head_seq:
        raise InvalidInput(
            f"Pick a seq from 0 to {session.head_seq} (the head).",
            detail={"at_seq": seq, "head_seq": session.head_seq},
        )
    if seq and (session.compacted_through_seq or session.ancestry):
        refuse_inside_compacted(session, seq, what="session")
    time = session.created_at
    if seq:
        # The event at `seq`, or (its row compacted away at a range's end) the last one before.
        page = slice_events(session, before_seq=seq + 1, limit=1, newest_first=True)
        if page.rows:
            time = page.rows[0]["created_at"]
    last_move = lifecycle_changes(session, limit=1, upto_seq=seq)
    status = str(last_move[0].content.get("to", "")) if last_move else SessionStatus.OPEN
    later = Event.objects.filter(
        session_id=session.pk, seq__gt=max(seq, session.own_start_seq)
    ).aggregate(tokens=Sum("tokens"), cost=Sum("cost"))
    tokens_used = session.tokens_used - (later["tokens"] or 0)
    cost_used = Decimal(session.cost_used) - (later["cost"] or Decimal(0))
    max_tokens, max_cost = session.budget_max_tokens, session.budget_max_cost
    change = (
        AuditEntry.objects.filter(
            target_type="session",
            target_id=str(session.pk),
            action="session.budget",
            created_at__gt=time,
        )
        .order_by("id")
        .values_list("detail", flat=True)
        .first()
    )
    if isinstance(change, dict) and isinstance(change.get("before"), dict):
        before = change["before"]
        max_tokens = before.get("max_tokens")
        max_cost = None if before.get("max_cost") is None else Decimal(str(before["max_cost"]))
    return SessionAt(
        seq=seq,
        head_seq=session.head_seq,
        time=time,
        status=status or SessionStatus.OPEN,
        tokens_used=tokens_used,
        cost_used=cost_used,
        budget_max_tokens=max_tokens,
        budget_max_cost=max_cost,
    )


def event_range_has_kind(session: Session, *, after_seq: int, upto_seq: int, kind: str) -> bool:
    """Whether the session's own events in (after_seq, upto_seq] include `kind` (PK range)."""
    return Event.objects.filter(
        session_id=session.pk, seq__gt=after_seq, seq__lte=upto_seq, kind=kind
    ).exists()


# --- Sessions list --------------------------------------------------------------------------


# --- Full-text search (the sessions list's `q`; how it is read: see storage.EventTextMatch) --

# Above this many estimated matching events, walk instead of collecting.
SEARCH_COLLECT_MAX_EVENTS = 5000


def text_search_strategy(text: str) -> str:
    """ "walk" or "collect" for `text`, as the planner would estimate it.

    Estimated matching events = indexed rows x the product of each lexeme's frequency among
    them (pg_stats' most common elements of the index's tsvector column). A lexeme missing
    from that list is rarer than all of them: collect. No statistics yet (never analysed) or
    no search index: collect, the form that is correct without the index.
    """
    row = storage.search_term_statistics(text)
    if row is None:
        return "collect"
    elems, freqs, rows, lexemes = row
    if not elems or not freqs or not lexemes or not rows or rows <= 0:
        return "collect"
    frequency = dict(zip(elems, freqs, strict=False))
    estimate = float(rows)
    for lexeme in set(lexemes):
        if lexeme not in frequency:
            return "collect"
        estimate *= frequency[lexeme]
    return "walk" if estimate > SEARCH_COLLECT_MAX_EVENTS else "collect"


def sessions_matching_text(
    project: Project, text: str, *, strategy: str | None = None
) -> QuerySet[Session]:
    """Sessions of `project` with an event whose searchable text matches `text`.

    `strategy` ("walk" / "collect") overrides the estimate (tests).
    """
    return Session.objects.filter(project=project).filter(
        storage.EventTextMatch(text, strategy or text_search_strategy(text))
    )


def matching_text(text: str) -> storage.EventMatchingText:
    """An annotation: the text of the outer session's newest own event matching `text` (NULL
    when none does), for a search snippet (sessions_app.snippets)."""
    return storage.EventMatchingText(text)


# Sort options of the sessions list: (field, descending). Each is served by an index that
# leads with `project` (session_project_created / session_project_updated, walked either way)
# and paginated by keyset on (field, id), never OFFSET.
SESSION_SORTS: dict[str, tuple[str, bool]] = {
    "-created": ("created_at", True),
    "created": ("created_at", False),
    "-updated": ("updated_at", True),
    "updated": ("updated_at", False),
}
DEFAULT_SESSION_SORT = "-created"


def encode_sort_cursor(sort: str, value: datetime, session_id: object) -> str:
    """A cursor for `sort`; the default sort's carries no order name (the API's format)."""
    return encode_cursor(value, session_id, None if sort == DEFAULT_SESSION_SORT else sort)


def decode_sort_cursor(cursor: str, sort: str) -> tuple[datetime, str]:
    """(value, id) of a cursor issued for `sort`; InvalidInput for anything else."""
    return decode_cursor(cursor, None if sort == DEFAULT_SESSION_SORT else sort)


@dataclass
class SessionFilters:
    status: list[str] | None = None
    agent: str | None = None
    q: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    metadata_key: str | None = None
    # With metadata_key: the key's value, compared as text ("tag" filter key=value).
    metadata_value: str | None = None
    # The sessions with one of these external_ids (a look-up: nothing is opened).
    external_ids: list[str] | None = None
    # (name, value) pairs, all to hold: the API's `metadata.<name>=<value>` (metadata_matches).
    metadata_equals: list[tuple[str, str]] = field(default_factory=list)


def filter_sessions(project: Project, filters: SessionFilters) -> QuerySet[Session]:
    qs = (
        sessions_matching_text(project, filters.q)
        if filters.q
        else Session.objects.filter(project=project)
    )
    if filters.status:
        qs = qs.filter(status__in=filters.status)
    if filters.agent:
        qs = qs.filter(agent__name=filters.agent)
    if filters.created_after:
        qs = qs.filter(created_at__gte=filters.created_after)
    if filters.created_before:
        qs = qs.filter(created_at__lt=filters.created_before)
    if filters.updated_after:
        qs = qs.filter(updated_at__gte=filters.updated_after)
    if filters.updated_before:
        qs = qs.filter(updated_at__lt=filters.updated_before)
    if filters.metadata_key:
        if filters.metadata_value is None:
            qs = qs.filter(metadata__has_key=filters.metadata_key)
        else:
            # A transform, not a `metadata__<key>` lookup path: a key holding "__" stays a key.
            # Cast: compared as plain text, not as JSON.
            value = Cast(KeyTextTransform(filters.metadata_key, "metadata"), TextField())
            qs = qs.alias(_meta_value=value).filter(_meta_value=filters.metadata_value)
    if filters.external_ids is not None:
        # index session_unique_external_id: one probe per id
        qs = qs.filter(external_id__in=filters.external_ids)
    for meta_name, meta_value in filters.metadata_equals:
        qs = qs.filter(metadata_matches(meta_name, meta_value))
    return qs


# A query-string value that spells one of these JSON values also matches that value. An
# exponent of at most 4 digits: PostgreSQL's numeric overflows past about 1e131072.
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]{1,4})?")
_JSON_LITERALS = ("true", "false", "null")


def metadata_matches(name: str, value: str) -> Q:
    """Sessions whose metadata has the top-level key `name` holding `value`: the JSON string
    `value`, or, when `value` spells a JSON number, true, false or null, that JSON value too
    (`3` matches 3, 3.0 and "3"; `true` matches true and "true"). Nested objects are not
    looked into: `a.b` is a key with a dot in it.

    A jsonb containment (`metadata @> {"name": …}`), served by the GIN index
    session_metadata_path: the documents are built here as JSON text, so a number keeps its
    digits (no float on the way) and PostgreSQL compares it as a number.
    """
    match = Q()
    for document in metadata_documents(name, value):
        match |= Q(metadata__contains=Cast(Value(document), JSONField()))
    return match


def metadata_documents(name: str, value: str) -> list[str]:
    """The JSON documents one of which a session's metadata contains when it matches
    `name`=`value` (metadata_matches)."""
    key = json.dumps(name, ensure_ascii=False)
    documents = [f"{{{key}:{json.dumps(value, ensure_ascii=False)}}}"]
    if value in _JSON_LITERALS or _JSON_NUMBER.fullmatch(value):
        documents.append(f"{{{key}:{value}}}")
    return documents


def page_sessions(
    qs: QuerySet[Session], *, cursor: str | None, limit: int, sort: str = DEFAULT_SESSION_SORT
) -> tuple[list[Session], str | None]:
    """Keyset page on (sort field, id): no OFFSET, steady at any depth.

    The bound is written `field <= v AND (field < v OR id < i)` (mirrored ascending) so the
    first conjunct is an index range condition; the second only drops the rows tied on `v`.
    Sorting by updated_at follows a moving key: a session active meanwhile may move between
    pages (a page is never wrong, only a newer view of the list).
    """
    _check_page_limit(limit)
    if sort not in SESSION_SORTS:
        raise InvalidInput(f"Unknown sort {sort!r}.", detail={"allowed": list(SESSION_SORTS)})
    field, descending = SESSION_SORTS[sort]
    if cursor:
        value, session_id = decode_sort_cursor(cursor, sort)
        if descending:
            bound = Q(**{f"{field}__lte": value})
            after_ties = Q(**{f"{field}__lt": value}) | Q(id__lt=session_id)
        else:
            bound = Q(**{f"{field}__gte": value})
            after_ties = Q(**{f"{field}__gt": value}) | Q(id__gt=session_id)
        qs = qs.filter(bound & after_ties)
    order = (f"-{field}", "-id") if descending else (field, "id")
    return _cut_page(list(qs.select_related("agent").order_by(*order)[: limit + 1]), limit, sort)


def _check_page_limit(limit: int) -> None:
    if limit < 1 or limit > 200:
        raise InvalidInput("limit must be between 1 and 200.", detail={"limit": limit})


def _cut_page(rows: list[Session], limit: int, sort: str) -> tuple[list[Session], str | None]:
    """A page of `limit` from up to limit + 1 rows in `sort` order, and the next page's cursor
    when there was one more."""
    if len(rows) <= limit:
        return rows, None
    page = rows[:limit]
    field, _ = SESSION_SORTS[sort]
    return page, encode_sort_cursor(sort, getattr(page[-1], field), page[-1].pk)


def list_sessions_page(
    project: Project,
    filters: SessionFilters,
    *,
    cursor: str | None,
    limit: int,
    narrowed: Q | None = None,
) -> tuple[list[Session], str | None]:
    """A page of the project's sessions that pass `filters` (and `narrowed`, a condition a
    floor above composes), newest first: filter_sessions, then page_sessions.

    A first page looked up by external_ids alone is one fixed statement: it is how the
    framework adapters open a thread or a session, once per fresh process and per turn, and the
    ORM's compiling of the general query cost more CPU than the rest of that request. So is
    one by metadata values alone, with or without external_ids (an ADK app's sessions)."""
    by_id_and_metadata = SessionFilters(
        external_ids=filters.external_ids, metadata_equals=filters.metadata_equals
    )
    if (
        (filters.external_ids or filters.metadata_equals)
        and cursor is None
        and narrowed is None
        and filters == by_id_and_metadata
    ):
        _check_page_limit(limit)
        rows = storage.sessions_matching(
            project.pk,
            external_ids=filters.external_ids,
            metadata_documents=[
                metadata_documents(name, value) for name, value in filters.metadata_equals
            ],
            limit=limit + 1,
        )
        return _cut_page(rows, limit, DEFAULT_SESSION_SORT)
    qs = filter_sessions(project, filters)
    if narrowed is not None:
        qs = qs.filter(narrowed)
    return page_sessions(qs, cursor=cursor, limit=limit)


# --- Overview -------------------------------------------------------------------------------


def status_counts(project: Project) -> dict[str, int]:
    """Sessions per lifecycle status: one GROUP BY over the index (project, status, …)."""
    counts = dict.fromkeys(SessionStatus.values, 0)
    rows = (
        Session.objects.filter(project=project)
        .order_by()
        .values_list("status")
        .annotate(n=Count("pk"))
    )
    for status, n in rows:
        counts[status] = n
    return counts


def pause_annotations() -> dict[str, Any]:
    """`paused_since` and `pause_reason` (the lifecycle event's reason, "" when none was given)
    of a paused session, None for any other: a paused session's latest lifecycle event is the
    one that paused it. One probe of the partial index event_lifecycle_seq per paused row.
    """
    latest = Event.objects.filter(session_id=OuterRef("pk"), kind=EventKind.LIFECYCLE).order_by(
        "-seq"
    )
    paused = Q(status=SessionStatus.PAUSED)
    reason = latest.annotate(_reason=KeyTextTransform("reason", "content")).values("_reason")
    return {
        "paused_since": Case(When(paused, then=Subquery(latest.values("created_at")[:1]))),
        "pause_reason": Case(When(paused, then=Subquery(reason[:1], output_field=TextField()))),
    }


def waiting_sessions(project: Project, *, limit: int = 5) -> list[Session]:
    """Paused sessions, longest wait first, each with `paused_since` and `pause_reason`."""
    return list(
        Session.objects.filter(project=project, status=SessionStatus.PAUSED)
        .select_related("agent")
        .annotate(**pause_annotations())
        .order_by("paused_since", "id")[:limit]
    )


SESSION_CHANGE_ACTIONS = (
    "session.open",
    "session.fork",
    "session.paused",
    "session.resumed",
    "session.closed",
    "session.archived",
)


CHANGE_VERBS = {
    "session.open": "opened",
    "session.fork": "forked",
    "session.paused": "paused",
    "session.resumed": "resumed",
    "session.closed": "closed",
    "session.archived": "archived",
}


@dataclass
class SessionChange:
    entry: AuditEntry
    session: Session | None  # None once the session is gone (deleted by retention)

    @property
    def verb(self) -> str:
        return CHANGE_VERBS.get(self.entry.action, self.entry.action)

    @property
    def reason(self) -> str:
        reason = self.entry.detail.get("reason") if isinstance(self.entry.detail, dict) else ""
        return str(reason or "")


def recent_session_changes(project: Project, *, limit: int = 10) -> list[SessionChange]:
    """The latest lifecycle changes (opened, forked, paused …) from the audit trail.

    Walks index audit_project_created newest first; events carry no project column, so the
    audit trail is the cheap project-wide timeline. Two queries whatever the limit.
    """
    entries = list(
        AuditEntry.objects.filter(project=project, action__in=SESSION_CHANGE_ACTIONS).order_by(
            "-created_at", "-id"
        )[:limit]
    )
    ids = {e.target_id for e in entries}
    sessions = {
        str(s.pk): s
        for s in Session.objects.filter(project=project, pk__in=list(ids)).only(
            "id", "title", "status", "project_id"
        )
    }
    return [SessionChange(entry=e, session=sessions.get(e.target_id)) for e in entries]


def events_per_minute(project: Project, *, now: datetime, minutes: int = 60) -> list[int]:
    """Events appended per minute over the last `minutes`, oldest minute first.

    The last bucket is the current (partial) minute.

    Cheap because it reads only recent rows: every append moves its session's updated_at in
    the same UPDATE that allocates the seqs, so only sessions touched in the window (index
    session_project_updated; a minute of slack for the clock read before the insert) can
    hold such events, and among their events the created_at range is served by the BRIN
    index event_created_brin on PostgreSQL (rows are inserted in time order, so the range
    is a handful of recent blocks, not the table). The cost follows the last hour's volume,
    never the table size; the overview caches the result for half a minute on top.
    """
    start = now.replace(second=0, microsecond=0) + timedelta(minutes=1 - minutes)
    recent = Session.objects.filter(
        project=project, updated_at__gte=start - timedelta(minutes=1)
    ).values("pk")
    rows = (
        Event.objects.filter(session_id__in=Subquery(recent), created_at__gte=start)
        .annotate(minute=TruncMinute("created_at"))
        .order_by()
        .values("minute")
        .annotate(n=Count("pk"))
        .values_list("minute", "n")
    )
    buckets = [0] * minutes
    for minute, n in rows:
        index = int((minute - start).total_seconds() // 60)
        if 0 <= index < minutes:  # a clock step could put a row in the future: drop it
            buckets[index] += n
    return buckets
