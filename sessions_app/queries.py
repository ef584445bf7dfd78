"""Reads shared by the API, the dashboard and the jobs.

A fork's history is its ancestors' rows up to each fork point plus its own, resolved through
`Session.ancestry`; nothing is copied. Every slice walks the (session_id, seq) primary key.
"""

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from .errors import InvalidInput
from .models import DEFAULT_TIER, Event, Project, Session, Tier

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


def iter_events_json(session: Session, *, chunk: int = 1000) -> Iterator[dict[str, Any]]:
    """Every visible event in seq order, read in keyset chunks so memory stays flat."""
    after = 0
    while True:
        page = slice_events(session, after_seq=after, limit=chunk)
        yield from page.rows
        if not page.has_more:
            return
        after = page.rows[-1]["seq"]


def event_row_to_json(row: dict[str, Any]) -> str:
    """Serialise a slice row, splicing the stored content JSON in rather than re-encoding it."""
    head = {
        "seq": row["seq"],
        "kind": row["kind"],
        "tier": row["tier"],
        "role": row["role"],
        "tokens": row["tokens"],
        "cost": str(row["cost"]),
        "actor": row["actor"],
        "idempotency_key": row["idempotency_key"],
        "created_at": row["created_at"].isoformat(),
        "session_id": str(row["session_id"]),
    }
    encoded = json.dumps(head, separators=(",", ":"), ensure_ascii=False)
    return f'{encoded[:-1]},"content":{row["content_json"]}}}'


# --- Sessions list --------------------------------------------------------------------------


def encode_cursor(created_at: datetime, session_id: object) -> str:
    raw = json.dumps([created_at.isoformat(), str(session_id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, session_id = json.loads(base64.urlsafe_b64decode(padded))
        return datetime.fromisoformat(created), str(session_id)
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError):
        raise InvalidInput("The cursor is not one this server issued.") from None


def sessions_matching_text(project: Project, text: str) -> QuerySet[Session]:
    """Sessions of `project` with an event whose searchable text matches `text`."""
    if connection.vendor == "postgresql":
        # Matches the expression of the GIN index event_text_search (migration 0002).
        matching = RawSQL(
            "SELECT DISTINCT session_id FROM sessions_app_event"
            " WHERE to_tsvector('simple', text) @@ plainto_tsquery('simple', %s)",
            [text],
        )
    else:
        matching = Event.objects.filter(text__icontains=text).values("session_id")
    return Session.objects.filter(project=project, id__in=matching)


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
        qs = qs.filter(metadata__has_key=filters.metadata_key)
    return qs


def page_sessions(
    qs: QuerySet[Session], *, cursor: str | None, limit: int
) -> tuple[list[Session], str | None]:
    """Keyset page, newest first on (created_at, id): no OFFSET, steady at any depth."""
    if limit < 1 or limit > 200:
        raise InvalidInput("limit must be between 1 and 200.", detail={"limit": limit})
    if cursor:
        created_at, session_id = decode_cursor(cursor)
        qs = qs.filter(
            Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=session_id)
        )
    page = list(qs.select_related("agent").order_by("-created_at", "-id")[: limit + 1])
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        next_cursor = encode_cursor(page[-1].created_at, page[-1].pk)
    return page, next_cursor


