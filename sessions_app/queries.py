"""Reads shared by the API, the dashboard and the jobs.

A fork's history is its ancestors' rows up to each fork point plus its own, resolved through
`Session.ancestry`; nothing is copied. Every slice walks the (session_id, seq) primary key.
"""

import base64
import binascii
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from json.encoder import encode_basestring as _json_str  # json.dumps(str, ensure_ascii=False)
from typing import Any

from asgiref.sync import sync_to_async
from django.apps import apps
from django.db import connection
from django.db.models import (
    BooleanField,
    Count,
    Exists,
    F,
    Func,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, TruncMinute

from .errors import InvalidInput
from .models import (
    DEFAULT_TIER,
    AuditEntry,
    Event,
    EventKind,
    Project,
    Session,
    SessionStatus,
    Tier,
)

EVENT_FIELDS = (
    "session_id", "seq", "kind", "tier", "role", "tokens", "cost", "actor",
    "idempotency_key", "created_at",
)


def lineage_q(session: Session, *, after: int = 0, upto: int | None = None) -> Q:
    """Rows (events or snapshots) of `session`'s visible history with after < seq <= upto."""
    q = Q(pk__in=[])
    for segment_id, lower, segment_upto in session.lineage_segments():
        low = max(lower, after)
        high = segment_upto if upto is None else (
            upto if segment_upto is None else min(upto, segment_upto)
        )
        if high is not None and high <= low:
            continue
        part = Q(session_id=segment_id, seq__gt=low)
        if high is not None:
            part &= Q(seq__lte=high)
        q |= part
    return q


@dataclass
class EventSlice:
    rows: list[dict[str, Any]]  # each has "content_json": the stored JSON text, undecoded
    head_seq: int
    has_more: bool


def _content_as_text() -> Cast:
    return Cast("content", output_field=TextField())


def slice_events(
    session: Session,
    *,
    after_seq: int | None = None,
    before_seq: int | None = None,
    limit: int = 100,
    kinds: list[str] | None = None,
    tier: str | None = None,
    newest_first: bool = False,
) -> EventSlice:
    """A positional slice: events with after_seq < seq < before_seq, at most `limit` of them.

    Walks the lineage segment by segment along the primary key, so reading the last 50 events
    of a million-event session, or of a fork of one, touches about 50 index entries.
    """
    if limit < 1 or limit > 1000:
        raise InvalidInput("limit must be between 1 and 1000.", detail={"limit": limit})
    if tier is None and kinds and all(DEFAULT_TIER.get(k) == Tier.DURABLE for k in kinds):
        # Durable-only kinds live behind the partial index on durable events: far fewer rows
        # to walk than the whole log when filtering a long session for facts or decisions.
        tier = Tier.DURABLE
    lower = after_seq or 0
    upper = before_seq  # exclusive
    segments = session.lineage_segments()
    if newest_first:
        segments = list(reversed(segments))
    rows: list[dict[str, Any]] = []
    wanted = limit + 1  # one extra tells whether there is more
    for segment_id, seg_lower, seg_upto in segments:
        low = max(seg_lower, lower)
        high = seg_upto
        if upper is not None:
            high = upper - 1 if high is None else min(high, upper - 1)
        if high is not None and high <= low:
            continue
        if connection.vendor == "postgresql":
            rows.extend(
                _segment_rows(segment_id, low, high, kinds, tier, newest_first, wanted - len(rows))
            )
        else:
            qs = Event.objects.filter(session_id=segment_id, seq__gt=low)
            if high is not None:
                qs = qs.filter(seq__lte=high)
            if kinds:
                qs = qs.filter(kind__in=kinds)
            if tier:
                qs = qs.filter(tier=tier)
            qs = qs.order_by("-seq" if newest_first else "seq").annotate(
                content_json=_content_as_text()
            )
            rows.extend(qs.values(*EVENT_FIELDS, "content_json")[: wanted - len(rows)])
        if len(rows) >= wanted:
            break
    has_more = len(rows) > limit
    return EventSlice(rows=rows[:limit], head_seq=session.head_seq, has_more=has_more)


_SLICE_COLUMNS = ", ".join(EVENT_FIELDS) + ", content::text"
_SLICE_KEYS = (*EVENT_FIELDS, "content_json")


def _segment_rows(
    segment_id: Any,
    low: int,
    high: int | None,
    kinds: list[str] | None,
    tier: str | None,
    newest_first: bool,
    limit: int,
) -> list[dict[str, Any]]:
    """One segment's rows as `slice_events`' ORM query returns them, in one fixed statement.

    PostgreSQL only: the slice endpoint is a hot path, and building this query through the ORM
    costs more CPU than the database spends answering it (bench/ingest.py).
    """
    sql = [f"SELECT {_SLICE_COLUMNS} FROM sessions_app_event WHERE session_id = %s AND seq > %s"]
    params: list[Any] = [segment_id, low]
    if high is not None:
        sql.append(" AND seq <= %s")
        params.append(high)
    if kinds:
        sql.append(f" AND kind IN ({', '.join(['%s'] * len(kinds))})")
        params.extend(kinds)
    if tier:
        sql.append(" AND tier = %s")
        params.append(tier)
    sql.append(f" ORDER BY seq {'DESC' if newest_first else 'ASC'} LIMIT %s")
    params.append(limit)
    with connection.cursor() as cursor:
        cursor.execute("".join(sql), params)
        return [dict(zip(_SLICE_KEYS, row, strict=True)) for row in cursor.fetchall()]


def iter_events_json(session: Session, *, chunk: int = 1000) -> Iterator[dict[str, Any]]:
    """Every visible event in seq order, read in keyset chunks so memory stays flat."""
    after = 0
    while True:
        page = slice_events(session, after_seq=after, limit=chunk)
        yield from page.rows
        if not page.has_more:
            return
        after = page.rows[-1]["seq"]


async def aiter_events_json(
    session: Session, *, chunk: int = 1000
) -> AsyncIterator[dict[str, Any]]:
    """`iter_events_json` for ASGI streaming, bounded at the head when the export started.

    Each chunk is one keyset read in the ORM's thread; the server sends it before reading the
    next, so memory stays flat however long the log (a sync iterator would be read whole).
    """
    after, before = 0, session.head_seq + 1
    while True:
        page = await sync_to_async(slice_events)(
            session, after_seq=after, before_seq=before, limit=chunk
        )
        for row in page.rows:
            yield row
        if not page.has_more or not page.rows:
            return
        after = page.rows[-1]["seq"]


def lifecycle_changes(session: Session, *, limit: int = 50) -> list[Event]:
    """The session's own lifecycle events, newest first (index event_lifecycle_seq)."""
    return list(
        Event.objects.filter(session_id=session.pk, kind=EventKind.LIFECYCLE)
        .order_by("-seq")
        .only("session_id", "seq", "content", "actor", "created_at")[:limit]
    )


def event_range_has_kind(session: Session, *, after_seq: int, upto_seq: int, kind: str) -> bool:
    """Whether the session's own events in (after_seq, upto_seq] include `kind` (PK range)."""
    return Event.objects.filter(
        session_id=session.pk, seq__gt=after_seq, seq__lte=upto_seq, kind=kind
    ).exists()


def event_row_to_json(row: dict[str, Any]) -> str:
    """Serialise a slice row, splicing the stored content JSON in rather than re-encoding it.

    Written out field by field: byte for byte what `json.dumps(head, separators=(",", ":"),
    ensure_ascii=False)` gives, at half its cost (a 1,000-event slice serialises 1,000 of
    these). Strings a client chose go through json's own string encoder; the others (numbers,
    a Decimal, an ISO timestamp, a UUID) need no escaping.
    """
    key = row["idempotency_key"]
    return (
        f'{{"seq":{row["seq"]},"kind":{_json_str(row["kind"])},"tier":{_json_str(row["tier"])},'
        f'"role":{_json_str(row["role"])},"tokens":{row["tokens"]},"cost":"{row["cost"]}",'
        f'"actor":{_json_str(row["actor"])},'
        f'"idempotency_key":{"null" if key is None else _json_str(key)},'
        f'"created_at":"{row["created_at"].isoformat()}","session_id":"{row["session_id"]}",'
        f'"content":{row["content_json"]}}}'
    )


# --- Sessions list --------------------------------------------------------------------------


def encode_cursor(created_at: datetime, session_id: object) -> str:
    raw = json.dumps([created_at.isoformat(), str(session_id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, object_id = json.loads(base64.urlsafe_b64decode(padded))
        # Both parts are compared in SQL: a forged id must fail here, not in the database.
        return datetime.fromisoformat(created), str(uuid.UUID(str(object_id)))
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
        raise InvalidInput("The cursor is not one this server issued.") from None


# --- Full-text search (the sessions list's `q`) ---------------------------------------------
#
# A session matches when one of its own events has searchable text matching `q` (a fork's
# inherited prefix is its parent's). On PostgreSQL the GIN index event_text_search_session
# (migration 0004) holds, for every event with text, its session (as a one-element array) and
# its tsvector, and the list is read one of two ways, picked from the index's statistics:
#
# * collect (rare terms): the matching events' sessions, from the index, then those sessions
#   by primary key. Costs about one heap read per matching event, so only when they are few.
# * walk (common terms): the sessions in the list's own keyset order, each probed until a page
#   is full. A probe asks the index for events of *that* session matching the term (the array
#   column: a B-tree cannot answer `ARRAY[session_id] @> …`, so a probe never degrades into a
#   scan of a long session's primary key). A session with a long log first checks its newest
#   SEARCH_WINDOW events by primary key, because a GIN probe of a session holding the term
#   100,000 times reads all of those entries before answering.
#
# The old form, SELECT DISTINCT session_id over every matching event, read every match of a
# common word (about a second at a million events, bench/dashboard.py).

SEARCH_INDEX = "event_text_search_session"
SEARCH_WINDOW = 64
# Above this many estimated matching events, walk instead of collecting.
SEARCH_COLLECT_MAX_EVENTS = 5000

_SEARCH_ESTIMATE_SQL = """
SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples,
       tsvector_to_array(to_tsvector('simple', %s))
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname
     AND s.attname = 'to_tsvector'
WHERE c.oid = to_regclass(%s)
"""


def text_search_strategy(text: str) -> str:
    """"walk" or "collect" for `text` (PostgreSQL), as the planner would estimate it.

    Estimated matching events = indexed rows x the product of each lexeme's frequency among
    them (pg_stats' most common elements of the index's tsvector column). A lexeme missing
    from that list is rarer than all of them: collect. No statistics yet (never analysed) or
    no search index: collect, the form that is correct without the index.
    """
    with connection.cursor() as cursor:
        cursor.execute(_SEARCH_ESTIMATE_SQL, [text, SEARCH_INDEX])
        row = cursor.fetchone()
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


class EventTextMatch(Func):
    """True for a session with an own event whose searchable text matches `text` (PostgreSQL).

    The outer session's id and head_seq are source expressions, so they follow the query's
    aliases wherever the queryset ends up. The tsvector expression and the `text <> ''`
    condition are the index's (migration 0004).
    """

    output_field = BooleanField()

    def __init__(self, text: str, strategy: str) -> None:
        if strategy not in ("walk", "collect"):
            raise ValueError(f"unknown search strategy {strategy!r}")
        super().__init__(F("pk"), F("head_seq"))
        self.text = text
        self.strategy = strategy

    def as_sql(self, compiler: Any, connection: Any, **extra_context: Any) -> tuple[str, list]:
        (id_sql, id_params), (head_sql, head_params) = (
            compiler.compile(expression) for expression in self.get_source_expressions()
        )
        table = Event._meta.db_table
        match = "to_tsvector('simple', {0}.text) @@ plainto_tsquery('simple', %s)"
        if self.strategy == "collect":
            sql = (
                f"{id_sql} = ANY(ARRAY(SELECT DISTINCT sb_m.session_id FROM {table} sb_m"
                f" WHERE sb_m.text <> '' AND {match.format('sb_m')}))"
            )
            return sql, [*id_params, self.text]
        sql = (
            f"(({head_sql} > {SEARCH_WINDOW} AND EXISTS (SELECT 1 FROM {table} sb_w"
            f" WHERE sb_w.session_id = {id_sql} AND sb_w.seq > {head_sql} - {SEARCH_WINDOW}"
            f" AND {match.format('sb_w')}))"
            f" OR EXISTS (SELECT 1 FROM {table} sb_m"
            f" WHERE ARRAY[sb_m.session_id] @> ARRAY[{id_sql}]"
            f" AND sb_m.text <> '' AND {match.format('sb_m')}))"
        )
        return sql, [*head_params, *id_params, *head_params, self.text, *id_params, self.text]


def sessions_matching_text(
    project: Project, text: str, *, strategy: str | None = None
) -> QuerySet[Session]:
    """Sessions of `project` with an event whose searchable text matches `text`.

    `strategy` ("walk" / "collect", PostgreSQL only) overrides the estimate (tests).
    """
    if connection.vendor == "postgresql":
        return Session.objects.filter(project=project).filter(
            EventTextMatch(text, strategy or text_search_strategy(text))
        )
    matching = Event.objects.filter(text__icontains=text).values("session_id")
    return Session.objects.filter(project=project, id__in=matching)


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
    """A cursor for `sort`; the default sort's is `encode_cursor`'s (the API's format)."""
    if sort == DEFAULT_SESSION_SORT:
        return encode_cursor(value, session_id)
    raw = json.dumps([value.isoformat(), str(session_id), sort]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_sort_cursor(cursor: str, sort: str) -> tuple[datetime, str]:
    """(value, id) of a cursor issued for `sort`; InvalidInput for anything else."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        decoded = json.loads(base64.urlsafe_b64decode(padded))
        if not isinstance(decoded, list) or len(decoded) not in (2, 3):
            raise ValueError
        issued_for = decoded[2] if len(decoded) == 3 else DEFAULT_SESSION_SORT
        value = datetime.fromisoformat(decoded[0])
        session_id = str(uuid.UUID(str(decoded[1])))
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
        raise InvalidInput("The cursor is not one this server issued.") from None
    if issued_for != sort:
        raise InvalidInput(
            "The cursor belongs to another sort order; start again from the first page.",
            detail={"sort": sort},
        )
    return value, session_id


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
    # True: only sessions linked to a task; False: only sessions without one.
    has_task: bool | None = None


def task_link_model() -> Any:
    """tasks_app's TaskSession, or None while that app does not define it."""
    try:
        return apps.get_model("tasks_app", "TaskSession")
    except LookupError:
        return None


def has_task_expression() -> Exists | None:
    """EXISTS(a task link for the outer session): index tasksession_session."""
    link = task_link_model()
    if link is None:
        return None
    return Exists(link.objects.filter(session_id=OuterRef("pk")))


def has_task_flag() -> Coalesce | None:
    """Whether the outer session has a task link, as a column of the rows shown.

    A scalar subquery probing index tasksession_session once per row returned, where an
    EXISTS in the select list may be planned as a hash of the whole link table, built for
    every page (it grows with the links, not with the page).
    """
    link = task_link_model()
    if link is None:
        return None
    first = link.objects.filter(session_id=OuterRef("pk")).values(flag=Value(True))[:1]
    return Coalesce(Subquery(first, output_field=BooleanField()), Value(False))


def filter_sessions(project: Project, filters: SessionFilters) -> QuerySet[Session]:
    qs = sessions_matching_text(project, filters.q) if filters.q else Session.objects.filter(
        project=project
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
            # Cast: compared as plain text on every backend (SQLite would parse it as JSON).
            value = Cast(KeyTextTransform(filters.metadata_key, "metadata"), TextField())
            qs = qs.alias(_meta_value=value).filter(_meta_value=filters.metadata_value)
    if filters.has_task is not None:
        linked = has_task_expression()
        if linked is None:
            qs = qs.none() if filters.has_task else qs
        elif filters.q and connection.vendor == "postgresql":
            # With a text search: a per-row check PostgreSQL runs before the costlier text
            # probe. As EXISTS it would become a semi-join above the scan, and every session
            # walked would be text-probed first (bench/dashboard.py: 120 ms against 12 ms).
            qs = qs.alias(_has_task=has_task_flag()).filter(_has_task=filters.has_task)
        else:
            qs = qs.filter(linked if filters.has_task else ~linked)
    return qs


def page_sessions(
    qs: QuerySet[Session], *, cursor: str | None, limit: int, sort: str = DEFAULT_SESSION_SORT
) -> tuple[list[Session], str | None]:
    """Keyset page on (sort field, id): no OFFSET, steady at any depth.

    The bound is written `field <= v AND (field < v OR id < i)` (mirrored ascending) so the
    first conjunct is an index range condition; the second only drops the rows tied on `v`.
    Sorting by updated_at follows a moving key: a session active meanwhile may move between
    pages (a page is never wrong, only a newer view of the list).
    """
    if limit < 1 or limit > 200:
        raise InvalidInput("limit must be between 1 and 200.", detail={"limit": limit})
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
    page = list(qs.select_related("agent").order_by(*order)[: limit + 1])
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        next_cursor = encode_sort_cursor(sort, getattr(page[-1], field), page[-1].pk)
    return page, next_cursor


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


def waiting_sessions(project: Project, *, limit: int = 5) -> list[Session]:
    """Paused sessions, longest wait first, each with `paused_since`.

    A paused session's latest lifecycle event is the one that paused it: one probe of the
    partial index event_lifecycle_seq per paused session (paused sessions are few).
    """
    paused_at = (
        Event.objects.filter(session_id=OuterRef("pk"), kind=EventKind.LIFECYCLE)
        .order_by("-seq")
        .values("created_at")[:1]
    )
    return list(
        Session.objects.filter(project=project, status=SessionStatus.PAUSED)
        .select_related("agent")
        .annotate(paused_since=Subquery(paused_at))
        .order_by("paused_since", "id")[:limit]
    )


SESSION_CHANGE_ACTIONS = (
    "session.open", "session.fork", "session.paused", "session.resumed", "session.closed",
    "session.archived",
)


CHANGE_VERBS = {
    "session.open": "opened", "session.fork": "forked", "session.paused": "paused",
    "session.resumed": "resumed", "session.closed": "closed", "session.archived": "archived",
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
        AuditEntry.objects.filter(project=project, action__in=SESSION_CHANGE_ACTIONS)
        .order_by("-created_at", "-id")[:limit]
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
