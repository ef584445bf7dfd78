"""Every fixed SQL statement of the session store, and nothing else.

The hot paths (append, slice, state at a seq, the session look-up) are fixed statements: built
through the ORM they cost more client CPU than the database spends answering them
(bench/ingest.py). Table and column names come from the models' `_meta`; values are always
bound parameters. Services call these functions; nothing above this module writes SQL.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson
import psycopg
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BooleanField, F, Field, Func, JSONField, TextField
from django.db.models.sql.compiler import SQLCompiler

from core.storage import (
    column,
    column_name,
    concrete_field,
    instance_from_row,
    select_list,
    server_bound_cursor,
    table,
)
from core.text import loads_stored
from sessions_app.models import Agent, Artifact, Blob, Event, Session, Snapshot

EVENT_FIELDS = (
    "session_id",
    "seq",
    "kind",
    "tier",
    "role",
    "tokens",
    "cost",
    "actor",
    "idempotency_key",
    "created_at",
)
SLICE_KEYS = (*EVENT_FIELDS, "content_json")
_SEGMENT_COLUMNS = ", ".join(f'"{name}"' for name in EVENT_FIELDS) + ", content::text"


def _session_db(field_name: str, value: Any) -> Any:
    return concrete_field(Session, field_name).get_db_prep_value(value, connection)


# --- Look-ups -------------------------------------------------------------------------------


@functools.cache
def _session_in_project_sql(lock: bool) -> tuple[str, list[Field[Any, Any]], list[Field[Any, Any]]]:
    columns, fields = select_list(Session, "s")
    agent_columns, agent_fields = select_list(Agent, "a")
    sql = (
        f"SELECT {columns}, {agent_columns} FROM {table(Session)} s"
        f" JOIN {table(Agent)} a ON a.id = s.agent_id"
        " WHERE s.id = %s AND s.project_id = %s" + (" FOR NO KEY UPDATE OF s" if lock else "")
    )
    return sql, fields, agent_fields


def session_in_project(session_id: UUID, project_id: int, *, lock: bool = False) -> Session | None:
    """The project's session with this id and its agent, as the ORM would build them
    (`select_related("agent")`), in one statement: rendering a session names its agent.
    With `lock`, the session's row is locked FOR NO KEY UPDATE (in the caller's transaction)."""
    sql, fields, agent_fields = _session_in_project_sql(lock)
    with server_bound_cursor() as cursor:
        cursor.execute(sql, [session_id, project_id])
        row = cursor.fetchone()
    if row is None:
        return None
    session = instance_from_row(Session, fields, row[: len(fields)])
    session.agent = instance_from_row(Agent, agent_fields, row[len(fields) :])
    return session


@functools.cache
def _sessions_matching_sql(
    by_external_id: bool, documents_per_condition: tuple[int, ...]
) -> tuple[str, list[Field[Any, Any]], list[Field[Any, Any]]]:
    columns, fields = select_list(Session, "s")
    agent_columns, agent_fields = select_list(Agent, "a")
    metadata = f"s.{column(Session, 'metadata')}"
    where = ["s.project_id = %s"]
    if by_external_id:
        where.append(f"s.{column(Session, 'external_id')} = ANY(%s)")
    for count in documents_per_condition:
        where.append("(" + " OR ".join([f"{metadata} @> %s::jsonb"] * count) + ")")
    sql = (
        f"SELECT {columns}, {agent_columns} FROM {table(Session)} s"
        f" JOIN {table(Agent)} a ON a.id = s.agent_id"
        f" WHERE {' AND '.join(where)}"
        f" ORDER BY s.{column(Session, 'created_at')} DESC, s.id DESC LIMIT %s"
    )
    return sql, fields, agent_fields


def sessions_matching(
    project_id: int,
    *,
    external_ids: Sequence[str] | None,
    metadata_documents: Sequence[Sequence[str]],
    limit: int,
) -> list[Session]:
    """The project's sessions with one of `external_ids` (None: any) whose metadata contains,
    for each entry of `metadata_documents`, one of its JSON documents (sessions_app.queries
    metadata_matches), newest first (the sessions list's default order: created_at, then id,
    both descending), at most `limit`, each with its agent, in one statement."""
    sql, fields, agent_fields = _sessions_matching_sql(
        external_ids is not None, tuple(len(documents) for documents in metadata_documents)
    )
    params: list[Any] = [project_id]
    if external_ids is not None:
        params.append(list(external_ids))
    for documents in metadata_documents:
        params.extend(documents)
    params.append(limit)
    with server_bound_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    sessions = []
    for row in rows:
        session = instance_from_row(Session, fields, row[: len(fields)])
        session.agent = instance_from_row(Agent, agent_fields, row[len(fields) :])
        sessions.append(session)
    return sessions


def share_session(session_id: UUID, project_id: int) -> str | None:
    """The status of the project's session, its row locked FOR KEY SHARE until the caller's
    transaction ends (None: no such session): a whole-session deletion (FOR UPDATE) waits for
    the caller, or the caller for it and then finds nothing; appends (FOR NO KEY UPDATE) go on."""
    with server_bound_cursor() as cursor:
        cursor.execute(
            f"SELECT status FROM {table(Session)} WHERE id = %s AND project_id = %s FOR KEY SHARE",
            [session_id, project_id],
        )
        row = cursor.fetchone()
    return None if row is None else str(row[0])


# --- Appending ------------------------------------------------------------------------------
#
# Seqs are allocated by one UPDATE … RETURNING on the session row: it takes the row lock and
# moves head_seq in the same statement, so concurrent appends queue on the lock and the seqs
# they get are gap-free (invariant 1). Usage counters ride in the same UPDATE.


def _allocation_sql(
    *, writable_only: bool, unbudgeted_only: bool, check_head: bool, agent_write: bool = False
) -> str:
    session = table(Session)
    sql = (
        f"UPDATE {session} SET head_seq = head_seq + %s, tokens_used = tokens_used + %s,"
        " cost_used = cost_used + %s, updated_at = %s WHERE id = %s AND project_id = %s"
    )
    if writable_only:
        sql += " AND status IN (%s, %s, %s)"
    if agent_write:
        # A session a person has taken over refuses the agent (sessions_app.errors
        # .SessionTakenOver), checked under the row lock so no append slips past a take-over.
        sql += f" AND {column(Session, 'taken_over_by')} = ''"
    if unbudgeted_only:
        sql += " AND budget_max_tokens IS NULL AND budget_max_cost IS NULL"
    if check_head:
        sql += " AND head_seq = %s"
    return sql


def _allocation_params(
    session_id: Any,
    project_id: int,
    *,
    count: int,
    tokens: int,
    cost: Decimal,
    now: datetime,
    writable_statuses: Sequence[str] | None,
    expected_head_seq: int | None,
) -> list[Any]:
    params: list[Any] = [
        count,
        tokens,
        _session_db("cost_used", cost),
        _session_db("updated_at", now),
        _session_db("id", session_id),
        project_id,
    ]
    if writable_statuses is not None:
        params.extend(str(s) for s in writable_statuses)
    if expected_head_seq is not None:
        params.append(expected_head_seq)
    return params


def allocate_seqs(
    session_id: Any,
    project_id: int,
    *,
    count: int,
    tokens: int,
    cost: Decimal,
    now: datetime,
    writable_statuses: Sequence[str] | None,
    expected_head_seq: int | None,
    agent_write: bool = False,
) -> tuple[int, str, int, Decimal, int | None, Decimal | None] | None:
    """Lock the session row and reserve `count` seqs: (head, status, usage…, budget…).

    None when the WHERE clause refused (no such session in the project, a status outside
    `writable_statuses`, a head other than `expected_head_seq`, an `agent_write` to a session
    a person has taken over). The caller holds a transaction.
    """
    sql = _allocation_sql(
        writable_only=writable_statuses is not None,
        unbudgeted_only=False,
        check_head=expected_head_seq is not None,
        agent_write=agent_write,
    )
    sql += " RETURNING head_seq, status, tokens_used, cost_used, budget_max_tokens, budget_max_cost"
    params = _allocation_params(
        session_id,
        project_id,
        count=count,
        tokens=tokens,
        cost=cost,
        now=now,
        writable_statuses=writable_statuses,
        expected_head_seq=expected_head_seq,
    )
    with server_bound_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    head, status, tokens_used, cost_used, max_tokens, max_cost = row
    return (
        head,
        status,
        tokens_used,
        Decimal(str(cost_used)),
        max_tokens,
        (None if max_cost is None else Decimal(str(max_cost))),
    )


# From this many rows a batch goes in with COPY: the rows are sent as they are, where a
# multi-row INSERT has every one of the ~12 values per row quoted into the SQL text in Python
# (Django's client-side binding); about half the client CPU of a batch of 100 (bench/ingest.py).
COPY_FROM_ROWS = 8


_PLAIN = (str, int, UUID)


def _copy_converter(field: Field[Any, Any]) -> Any:
    """A COPY (text format) value for `field` at less than `get_db_prep_save`'s cost, which
    is about a tenth of a 100-event batch's server time: JSON is encoded as Django would
    (json.dumps, no encoder) and read by PostgreSQL from the text; a str, int, UUID, aware
    datetime or None goes as it is (what the field's preparation returns for those); anything
    else takes the field's own preparation."""
    if isinstance(field, JSONField) and field.encoder is None:
        return lambda value: None if value is None else json.dumps(value)

    def prepared(value: Any) -> Any:
        if value is None or type(value) in _PLAIN:
            return value
        if type(value) is datetime and value.tzinfo is not None:
            return value
        return field.get_db_prep_save(value, connection)

    return prepared


def insert_events(events: list[Event]) -> None:
    """Write events that have their seqs: what `bulk_create` does, without its compilation.

    A few rows: one multi-row INSERT. More: one COPY in the same transaction. Either way a
    constraint violation (a concurrent append with the same idempotency key) raises Django's
    IntegrityError and nothing is written.
    """
    fields = Event._meta.concrete_fields
    columns = ", ".join(connection.ops.quote_name(column_name(f)) for f in fields)
    if len(events) >= COPY_FROM_ROWS:
        with (
            connection.cursor() as cursor,
            connection.wrap_database_errors,
            cursor.cursor.copy(f"COPY {table(Event)} ({columns}) FROM STDIN") as copy,
        ):
            converters = [(f.attname, _copy_converter(f)) for f in fields]
            for event in events:
                copy.write_row([convert(getattr(event, name)) for name, convert in converters])
        return
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params = [
        f.get_db_prep_save(getattr(event, f.attname), connection)
        for event in events
        for f in fields
    ]
    with server_bound_cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table(Event)} ({columns}) VALUES {', '.join([row] * len(events))}",
            params,
        )


def _cast(field: Field[Any, Any]) -> str:
    """The cast a VALUES placeholder needs so INSERT … SELECT sees the column's type.

    Text columns get none: the INSERT's assignment then checks varchar lengths as usual.
    """
    db_type = field.db_type(connection)
    if db_type is None:
        raise ValueError(f"{field} has no column type")
    if db_type.startswith("varchar") or db_type == "text":
        return ""
    return "::numeric" if db_type.startswith("numeric") else f"::{db_type}"


@functools.cache
def _one_statement_fields() -> list[Field[Any, Any]]:
    return [f for f in Event._meta.concrete_fields if f.attname != "seq"]


@functools.cache
def _one_statement_sql(count: int, check_head: bool, agent_write: bool) -> str:
    """The text of append_in_one_statement for `count` events (built once per shape: it was a
    few percent of a single-event append, rebuilt from the models' metadata every time)."""
    fields = _one_statement_fields()
    row = "(%s, " + ", ".join(f"%s{_cast(f)}" for f in fields) + ")"
    aliases = ", ".join(f"c{i}" for i in range(len(fields)))
    return _allocate_and_insert_sql(
        check_head,
        agent_write,
        values=", ".join(f"v.c{i}" for i in range(len(fields))),
        rows=f"(VALUES {', '.join([row] * count)}) AS v(ord, {aliases})",
    )


def _allocate_and_insert_sql(check_head: bool, agent_write: bool, *, values: str, rows: str) -> str:
    """The one-statement append: allocate on the session row, insert `rows` (aliased v, with
    v.ord numbering them from 1) as the events' columns `values`, return the session's head."""
    columns = ", ".join(connection.ops.quote_name(column_name(f)) for f in _one_statement_fields())
    allocate = _allocation_sql(
        writable_only=True, unbudgeted_only=True, check_head=check_head, agent_write=agent_write
    )
    return (
        f"WITH s AS ({allocate} RETURNING head_seq, status, tokens_used, cost_used),"
        f" w AS (INSERT INTO {table(Event)} ({column(Event, 'seq')}, {columns})"
        f" SELECT s.head_seq - %s + v.ord, {values} FROM s CROSS JOIN {rows})"
        " SELECT head_seq, status, tokens_used, cost_used FROM s"
    )


def _json_value(field: Field[Any, Any]) -> Any:
    """A row value as JSON for _append_rows_as_json: JSON content as it is, anything else as
    the text PostgreSQL casts back (what the COPY's text format sends)."""
    if isinstance(field, JSONField) and field.encoder is None:
        return lambda value: value

    def prepared(value: Any) -> Any:
        if value is None or type(value) in (str, int, bool):
            return value
        if type(value) is datetime and value.tzinfo is not None:
            return value.isoformat()
        if type(value) in (UUID, Decimal):
            return str(value)
        prepped = field.get_db_prep_save(value, connection)
        return prepped if prepped is None or type(prepped) in (str, int, bool) else str(prepped)

    return prepared


@functools.cache
def _rows_as_json_shape(check_head: bool, agent_write: bool) -> tuple[str, list[Any]]:
    fields = _one_statement_fields()
    extract = []
    for i, f in enumerate(fields):
        if isinstance(f, JSONField) and f.encoder is None:
            extract.append(f"v.e->'c{i}'")
        else:
            extract.append(f"(v.e->>'c{i}'){_cast(f)}")
    sql = _allocate_and_insert_sql(
        check_head,
        agent_write,
        values=", ".join(extract),
        rows="jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS v(e, ord)",
    )
    return sql, [(f"c{i}", f.attname, _json_value(f)) for i, f in enumerate(fields)]


def _json_array(rows: list[dict[str, Any]]) -> str:
    """`rows` as JSON text: orjson, five to ten times faster than json.dumps (which took a
    tenth of a batch of 100's server time). Content that orjson refuses and PostgreSQL takes
    (an integer beyond 64 bits, a key that is not text from a Python caller) goes through
    json.dumps. A number that is not finite never gets here (services refuse it before:
    core.text), so orjson never writes one as null."""
    try:
        return orjson.dumps(rows).decode()
    except orjson.JSONEncodeError:
        return json.dumps(rows, ensure_ascii=False, separators=(",", ":"))


def _append_rows_as_json(
    session_id: Any,
    project_id: int,
    events: list[Event],
    *,
    tokens: int,
    cost: Decimal,
    now: datetime,
    writable_statuses: Sequence[str],
    expected_head_seq: int | None,
    agent_write: bool,
) -> tuple[int, str, int, Decimal] | None:
    """append_in_one_statement for a larger batch: its rows as one JSON array that PostgreSQL
    unpacks (jsonb_array_elements), one parameter where a VALUES list would have a dozen per
    row. One round trip, where the transactional path's COPY takes five (BEGIN, UPDATE, COPY
    and its data, COMMIT)."""
    sql, shape = _rows_as_json_shape(expected_head_seq is not None, agent_write)
    rows = [{key: convert(getattr(e, name)) for key, name, convert in shape} for e in events]
    params = _allocation_params(
        session_id,
        project_id,
        count=len(events),
        tokens=tokens,
        cost=cost,
        now=now,
        writable_statuses=writable_statuses,
        expected_head_seq=expected_head_seq,
    )
    params.append(len(events))
    params.append(_json_array(rows))
    with server_bound_cursor() as cursor:
        cursor.execute(sql, params)
        result = cursor.fetchone()
    if result is None:
        return None
    head, status, tokens_used, cost_used = result
    return head, status, tokens_used, Decimal(str(cost_used))


def append_in_one_statement(
    session_id: Any,
    project_id: int,
    events: list[Event],
    *,
    tokens: int,
    cost: Decimal,
    now: datetime,
    writable_statuses: Sequence[str],
    expected_head_seq: int | None,
    agent_write: bool = False,
) -> tuple[int, str, int, Decimal] | None:
    """Allocate and insert as one statement in its own transaction: one round trip.

    The UPDATE … RETURNING that locks the row and allocates and the INSERT that uses the seqs
    are one data-modifying WITH, so they commit together or not at all, and concurrent appends
    still queue on the row lock. Only for sessions without a budget (a budgeted append may have
    to pause the session in the same transaction). `events` carry no seq yet. Returns (head,
    status, tokens_used, cost_used), or None when the WHERE clause refused and nothing was
    written.
    """
    if len(events) >= COPY_FROM_ROWS:
        return _append_rows_as_json(
            session_id,
            project_id,
            events,
            tokens=tokens,
            cost=cost,
            now=now,
            writable_statuses=writable_statuses,
            expected_head_seq=expected_head_seq,
            agent_write=agent_write,
        )
    fields = _one_statement_fields()
    params = _allocation_params(
        session_id,
        project_id,
        count=len(events),
        tokens=tokens,
        cost=cost,
        now=now,
        writable_statuses=writable_statuses,
        expected_head_seq=expected_head_seq,
    )
    params.append(len(events))
    for position, event in enumerate(events, start=1):
        params.append(position)
        params.extend(f.get_db_prep_save(getattr(event, f.attname), connection) for f in fields)
    sql = _one_statement_sql(len(events), expected_head_seq is not None, agent_write)
    with server_bound_cursor() as cursor:
        cursor.execute(sql, params)
        result = cursor.fetchone()
    if result is None:
        return None
    head, status, tokens_used, cost_used = result
    return head, status, tokens_used, Decimal(str(cost_used))


def allow_event_deletion_in_transaction(allowed: bool) -> None:
    """Open (or close) the append-only trigger's gate for the current transaction only.

    A transaction-local setting the trigger of migration sessions_app 0002 reads: it is gone
    at commit or rollback whatever happens.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('switchboard.allow_event_delete', %s, true)",
            ["on" if allowed else ""],
        )


# --- Reading the log ------------------------------------------------------------------------


def segment_rows(
    segment_id: Any,
    low: int,
    high: int | None,
    *,
    kinds: list[str] | None,
    tier: str | None,
    newest_first: bool,
    limit: int,
    as_json: bool = False,
    keys: Sequence[str] | None = None,
    key_prefix: str | None = None,
    by_position: bool = False,
) -> list[Any]:
    """Rows of one lineage segment with low < seq <= high, along the primary key.

    Each row is a dict of the fields of EVENT_FIELDS plus "content_json": the stored JSON text,
    undecoded, so it can be spliced into a response as it is. With `as_json`, each row is the
    event's JSON as the API sends it, made by PostgreSQL (_EVENT_LINE, the export's lines): a
    1,000-event slice spent more of its server time formatting rows in Python than reading them.

    With `keys` or `key_prefix`, only events whose idempotency_key is one of `keys` or starts
    with `key_prefix`: see _key_condition for the plan. `by_position`: (low, high] is a short
    window, read along the primary key whatever the statistics say of the key prefix.
    """
    selected = _EVENT_LINE if as_json else _SEGMENT_COLUMNS
    sql = [f"SELECT {selected} FROM {table(Event)} WHERE session_id = %s AND seq > %s"]
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
    by_key = keys is not None or key_prefix is not None
    if by_key and by_position and key_prefix is not None:
        # A short window of positions (queries._window_first): the prefix as an expression no
        # index holds, so the plan is the window's range of the primary key, never the whole
        # session's range of the key index filtered by seq. COALESCE is not strict, so the
        # condition does not imply `idempotency_key IS NOT NULL`, the key index's predicate:
        # that index cannot serve the window by its session_id alone either.
        sql.append(" AND COALESCE(left(idempotency_key, %s), '') = %s")
        params.extend([len(key_prefix), key_prefix])
    elif by_key:
        condition, condition_params = _key_condition(keys, key_prefix)
        sql.append(f" AND {condition}")
        params.extend(condition_params)
    sql.append(f" ORDER BY seq {'DESC' if newest_first else 'ASC'} LIMIT %s")
    params.append(limit)
    # A read by key is planned with its values (Django's client-side binding), never prepared:
    # a prepared statement's generic plan cannot turn `LIKE $n` into the index range the
    # prefix bounds, and PostgreSQL picks it after five runs when it looks cheaper than the
    # custom plans (a walk of the whole log along the primary key, filtering by key).
    with connection.cursor() if by_key else server_bound_cursor() as cursor:
        cursor.execute("".join(sql), params)
        if as_json:
            return [line for (line,) in cursor.fetchall()]
        return [dict(zip(SLICE_KEYS, row, strict=True)) for row in cursor.fetchall()]


def last_events_json(windows: Sequence[tuple[UUID, int]], limit: int) -> dict[UUID, list[str]]:
    """Per (session id, after_seq): the session's own events after after_seq, at most `limit`,
    newest first, each as the API's JSON line (_EVENT_LINE); every session in one statement.

    The caller bounds each walk by after_seq (the head less the events wanted): without it,
    PostgreSQL plans a LATERAL read from statistics that may say a session holds a handful of
    rows, fetching all of a long session's rows and sorting them (3,334 rows each for the last
    109 of an ADK session)."""
    if not windows:
        return {}
    sql = (
        "SELECT s.id, e.seq, e.line FROM unnest(%s::uuid[], %s::int[]) AS s(id, after_seq)"
        f" CROSS JOIN LATERAL (SELECT seq, {_EVENT_LINE} AS line FROM {table(Event)}"
        " WHERE session_id = s.id AND seq > s.after_seq ORDER BY seq DESC LIMIT %s) e"
        " ORDER BY s.id, e.seq DESC"
    )
    found: dict[UUID, list[str]] = {session_id: [] for session_id, _ in windows}
    with server_bound_cursor() as cursor:
        cursor.execute(sql, [[w[0] for w in windows], [w[1] for w in windows], limit])
        for session_id, _seq, line in cursor.fetchall():
            found[session_id].append(line)
    return found


def escape_like(text: str) -> str:
    """`text` as a LIKE pattern matching itself (backslash is LIKE's default escape)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _key_condition(keys: Sequence[str] | None, key_prefix: str | None) -> tuple[str, list[Any]]:
    """Events whose idempotency_key is one of `keys` (equality), or starts with `key_prefix`.

    Both are range scans of the unique index on (session_id, idempotency_key) when few events
    match (migration sessions_app 0007 gives the key the pattern operator class, so a prefix is
    a range of it under any collation): one probe per key, or the prefix's range, then the rows
    sorted by seq. When many match, the planner walks the primary key in seq order instead,
    filtering, and stops at the page's LIMIT: either way a page costs about what it returns.
    """
    if keys is not None:
        return "idempotency_key = ANY(%s)", [list(keys)]
    if key_prefix is None:
        raise ValueError("keys or key_prefix")
    return "idempotency_key LIKE %s", [escape_like(key_prefix) + "%"]


def events_with_keys(
    segments: list[tuple[UUID, int, int | None]], keys: Sequence[str]
) -> list[Event]:
    """The events of a lineage whose idempotency_key is one of `keys`, oldest first: a
    session's own and, for a fork, each ancestor's up to where the fork took it.

    One statement, one branch per segment (UNION ALL), each one probe of the unique index on
    (session_id, idempotency_key) per key. A root session's is one branch without a seq range:
    the look-up every keyed append made before forks were looked through.
    """
    columns, fields = select_list(Event, "e")
    branches: list[str] = []
    params: list[Any] = []
    select = f"SELECT {columns} FROM {table(Event)} e WHERE e.session_id = %s"
    for segment_id, lower, upto in segments:
        branch = select
        params.append(segment_id)
        if lower:
            branch += " AND e.seq > %s"
            params.append(lower)
        if upto is not None:
            branch += " AND e.seq <= %s"
            params.append(upto)
        branches.append(branch + " AND e.idempotency_key = ANY(%s)")
        params.append(list(keys))
    with server_bound_cursor() as cursor:
        cursor.execute(" UNION ALL ".join(branches), params)
        rows = cursor.fetchall()
    events = [instance_from_row(Event, fields, row) for row in rows]
    events.sort(key=lambda event: event.seq)
    return events


def _lineage_where(
    segments: list[tuple[UUID, int, int | None]], *, after: int, upto: int
) -> tuple[str, list[Any]]:
    """One `session_id = … AND seq range` per lineage segment overlapping (after, upto]."""
    parts: list[str] = []
    params: list[Any] = []
    for segment_id, lower, segment_upto in segments:
        low = max(lower, after)
        high = upto if segment_upto is None else min(upto, segment_upto)
        if high <= low:
            continue
        parts.append("(session_id = %s AND seq > %s AND seq <= %s)")
        params.extend([segment_id, low, high])
    return (" OR ".join(parts) or "FALSE"), params


def nearest_snapshot_row(
    segments: list[tuple[UUID, int, int | None]], at_seq: int
) -> tuple[int, Any, Any, str] | None:
    """(seq, state, facts, summary) of the latest snapshot at or before `at_seq` in the lineage.

    Walks the unique index (session_id, seq) backwards. JSON is decoded here, as the ORM would.
    """
    where, params = _lineage_where(segments, after=0, upto=at_seq)
    with server_bound_cursor() as cursor:
        cursor.execute(
            f"SELECT seq, state, facts, summary FROM {table(Snapshot)}"
            f" WHERE {where} ORDER BY seq DESC LIMIT 1",
            params,
        )
        row = cursor.fetchone()
    if row is None:
        return None
    seq, state, facts, summary = row
    what = f"The snapshot at seq {seq}"
    return seq, loads_stored(state, what=what), loads_stored(facts, what=what), summary


def events_of_kinds(
    segments: list[tuple[UUID, int, int | None]],
    *,
    after: int,
    upto: int,
    kinds: Sequence[str],
) -> list[tuple[int, str, Any]]:
    """(seq, kind, content) of the lineage's events of `kinds` in (after, upto], in seq order."""
    where, params = _lineage_where(segments, after=after, upto=upto)
    with server_bound_cursor() as cursor:
        cursor.execute(
            f"SELECT seq, kind, content FROM {table(Event)} WHERE ({where})"
            f" AND kind IN ({', '.join(['%s'] * len(kinds))}) ORDER BY seq",
            [*params, *kinds],
        )
        return [
            (seq, kind, loads_stored(content, what=f"The {kind} event at seq {seq}"))
            for seq, kind, content in cursor.fetchall()
        ]


# --- Several sessions at once: the API list's include=state ----------------------------------
#
# A window is (k, session_id, low, high): the events or snapshots of `session_id` with
# low < seq <= high, on behalf of the k-th session asked about (a lineage segment, clipped).
# The windows travel as four arrays, so the statement's text is the same for any page.

_WINDOWS = "unnest(%s::int[], %s::uuid[], %s::int[], %s::int[]) AS w(k, session_id, low, high)"
Window = tuple[int, UUID, int, int]


def _window_arrays(windows: Sequence[Window]) -> list[list[Any]]:
    return [[window[i] for window in windows] for i in range(4)]


def nearest_snapshots_in_windows(windows: Sequence[Window]) -> dict[int, tuple[int, str, str, str]]:
    """For each k of `windows`, its latest snapshot in any of its windows: k -> (seq, state,
    facts, summary), the JSON as stored (text: each session's decoded apart, so one that cannot
    be read spoils no other). One statement: per window a backward probe of the unique index
    (session_id, seq), then only each k's winner is read whole."""
    if not windows:
        return {}
    snapshot = table(Snapshot)
    with server_bound_cursor() as cursor:
        cursor.execute(
            f"SELECT best.k, s.seq, s.state, s.facts, s.summary FROM ("
            f"SELECT DISTINCT ON (w.k) w.k, w.session_id, found.seq FROM {_WINDOWS}"
            f" CROSS JOIN LATERAL (SELECT seq FROM {snapshot} WHERE session_id = w.session_id"
            f" AND seq > w.low AND seq <= w.high ORDER BY seq DESC LIMIT 1) found"
            f" ORDER BY w.k, found.seq DESC) best"
            f" JOIN {snapshot} s ON s.session_id = best.session_id AND s.seq = best.seq",
            _window_arrays(windows),
        )
        return {k: (seq, state, facts, summary) for k, seq, state, facts, summary in cursor}


def events_of_kinds_in_windows(
    windows: Sequence[Window], *, kinds: Sequence[str]
) -> list[tuple[int, int, str, str]]:
    """(k, seq, kind, content as stored) of the events of `kinds` in `windows`, by k then seq.
    One statement: a primary-key range scan per window, whatever the planner guesses of the
    arrays' length. The OFFSET 0 keeps it so: a LATERAL subquery without one is pulled up
    into a plain join, and the generic plan PostgreSQL keeps for this prepared statement then
    hash-joined a sequential scan of the whole events table (6.8 ms where the range scans take
    0.3, for a session of 10,000 events; more as the table grows)."""
    if not windows:
        return []
    with server_bound_cursor() as cursor:
        cursor.execute(
            f"SELECT w.k, e.seq, e.kind, e.content FROM {_WINDOWS}"
            f" CROSS JOIN LATERAL (SELECT seq, kind, content FROM {table(Event)}"
            f" WHERE session_id = w.session_id AND seq > w.low AND seq <= w.high"
            f" AND kind = ANY(%s::text[]) OFFSET 0) e ORDER BY w.k, e.seq",
            [*_window_arrays(windows), list(kinds)],
        )
        return list(cursor.fetchall())


# --- Exports: their own connection, a slot each, a server-side cursor ----------------------
#
# An export reads through its own psycopg AsyncConnection (core.storage.open_async_connection),
# not the ORM's thread, so a long download holds no thread while it waits on the client or the
# database. Each running export holds one of its project's slots: a session-level advisory lock
# on that connection, so a crashed server process or a dropped connection frees it by itself.

EXPORT_LOCK_SPACE = 0x5342  # "SB": the top 16 bits of every export slot's advisory-lock key
# The key space of a project's artifact quota lock: one 16-bit tag below the export slots'.
ARTIFACT_QUOTA_LOCK_SPACE = 0x5341  # "SA"


def export_slot_key(project_id: int, slot: int) -> int:
    """The advisory-lock key (one bigint) of a project's export slot: space, slot, project."""
    if not 0 <= slot < 1 << 8 or not 0 <= project_id < 1 << 40:
        raise ValueError(f"no export slot key for project {project_id}, slot {slot}")
    return (EXPORT_LOCK_SPACE << 48) | (slot << 40) | project_id


async def take_export_slot(
    conn: psycopg.AsyncConnection[Any], project_id: int, *, slots: int
) -> int | None:
    """Take the first free one of the project's `slots` export slots on `conn`, or None.

    One `pg_try_advisory_lock` per slot, in order: never waits. The slot is held until `conn`
    closes (or unlocks it).
    """
    for slot in range(slots):
        cursor = await conn.execute(
            "SELECT pg_try_advisory_lock(%s)", [export_slot_key(project_id, slot)]
        )
        row = await cursor.fetchone()
        if row is not None and row[0]:
            return slot
    return None


# One event as its JSON, built by PostgreSQL, for the export's lines and the API's slices: byte
# for byte what json.dumps would make of the loaded row (tests/sessions_app/event_json.py;
# test_export_limits.py and test_slicing.py compare the two). to_json escapes text as
# json.dumps(ensure_ascii=False) does; the timestamp is written as Python's isoformat() writes
# a UTC datetime (microseconds only when non-zero); numeric(12, 6) and uuid print as str() of
# their Python values. Built in the database, a row costs the server process about 1.3 us
# instead of 7.5 us (decoding a timestamp, a Decimal and a UUID per row, then formatting them
# again), which is what made exports starve other requests.
_EVENT_LINE = " || ".join(
    [
        """'{"seq":'""",
        "seq",
        """',"kind":'""",
        "to_json(kind)",
        """',"tier":'""",
        "to_json(tier)",
        """',"role":'""",
        "to_json(role)",
        """',"tokens":'""",
        "tokens",
        """',"cost":"'""",
        "cost",
        """'","actor":'""",
        "to_json(actor)",
        """',"idempotency_key":'""",
        "COALESCE(to_json(idempotency_key)::text, 'null')",
        """',"created_at":"'""",
        """to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')""",
        "CASE WHEN date_trunc('second', created_at, 'UTC') = created_at THEN ''"
        " ELSE to_char(created_at AT TIME ZONE 'UTC', '.US') END",
        """'+00:00","session_id":"'""",
        "session_id",
        """'","content":'""",
        "content::text",
        "'}'",
    ]
)


async def export_lines(
    conn: psycopg.AsyncConnection[Any],
    segments: list[tuple[UUID, int, int | None]],
    *,
    upto: int,
    batch: int,
) -> AsyncIterator[list[str]]:
    """The lineage's events with seq <= upto as JSON Lines lines (no newline), in seq order,
    `batch` at a time.

    One server-side cursor per lineage segment (DECLARE, then FETCH `batch` at a time), along
    the primary key; each FETCH is awaited, so the event loop serves others meanwhile.
    """
    sql = (
        f"SELECT {_EVENT_LINE} FROM {table(Event)}"
        " WHERE session_id = %s AND seq > %s AND seq <= %s ORDER BY seq"
    )
    for segment_id, low, segment_upto in segments:
        high = upto if segment_upto is None else min(upto, segment_upto)
        if high <= low:
            continue
        async with conn.cursor(name="switchboard_export") as cursor:
            await cursor.execute(sql, [segment_id, low, high])
            while rows := await cursor.fetchmany(batch):
                yield [row[0] for row in rows]


# --- Full-text search (the sessions list's `q`) ---------------------------------------------
#
# A session matches when one of its own events has searchable text matching `q` (a fork's
# inherited prefix is its parent's). The GIN index event_text_search_session (migration
# sessions_app 0002) holds, for every event with text, its session (as a one-element array)
# and its tsvector, and the list is read one of two ways, picked from the index's statistics:
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


def search_term_statistics(text: str) -> tuple[Any, Any, Any, Any] | None:
    """(most common lexemes, their frequencies, indexed rows, the lexemes of `text`).

    From pg_stats on the search index's tsvector column; None without the index.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples,"
            " tsvector_to_array(to_tsvector('simple', %s))"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname"
            " AND s.attname = 'to_tsvector'"
            " WHERE c.oid = to_regclass(%s)",
            [text, SEARCH_INDEX],
        )
        row: tuple[Any, Any, Any, Any] | None = cursor.fetchone()
    return row


class EventTextMatch(Func):
    """True for a session with an own event whose searchable text matches `text`.

    The outer session's id and head_seq are source expressions, so they follow the query's
    aliases wherever the queryset ends up. The tsvector expression and the `text <> ''`
    condition are the index's (migration sessions_app 0002).
    """

    output_field = BooleanField()

    def __init__(self, text: str, strategy: str) -> None:
        if strategy not in ("walk", "collect"):
            raise ValueError(f"unknown search strategy {strategy!r}")
        super().__init__(F("pk"), F("head_seq"))
        self.text = text
        self.strategy = strategy

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, tuple[str | int, ...]]:
        (id_sql, id_params), (head_sql, head_params) = (
            compiler.compile(expression) for expression in self.get_source_expressions()
        )
        events = table(Event)
        match = "to_tsvector('simple', {0}.text) @@ plainto_tsquery('simple', %s)"
        if self.strategy == "collect":
            sql = (
                f"{id_sql} = ANY(ARRAY(SELECT DISTINCT sb_m.session_id FROM {events} sb_m"
                f" WHERE sb_m.text <> '' AND {match.format('sb_m')}))"
            )
            return sql, (*id_params, self.text)
        sql = (
            f"(({head_sql} > {SEARCH_WINDOW} AND EXISTS (SELECT 1 FROM {events} sb_w"
            f" WHERE sb_w.session_id = {id_sql} AND sb_w.seq > {head_sql} - {SEARCH_WINDOW}"
            f" AND {match.format('sb_w')}))"
            f" OR EXISTS (SELECT 1 FROM {events} sb_m"
            f" WHERE ARRAY[sb_m.session_id] @> ARRAY[{id_sql}]"
            f" AND sb_m.text <> '' AND {match.format('sb_m')}))"
        )
        return sql, (*head_params, *id_params, *head_params, self.text, *id_params, self.text)


class EventMatchingText(Func):
    """The text of the outer session's newest own event matching `text` (the search snippet's
    source; sessions_app.snippets marks the words), or NULL when none matches.

    A short session (head_seq <= SEARCH_WINDOW) asks the search index for its matching events
    (one probe) and takes the newest. A longer one first reads its newest SEARCH_WINDOW events
    by primary key, newest first, stopping at the first that matches (the index would read
    every entry of the term for that session), and only if none does asks the index for any
    one. OFFSET 0 keeps that window a scan of the primary key: with the text match pushed into
    it the planner ANDs in the index's bitmap of every event holding the term, a common word's
    tens of thousands, for each row (bench/dashboard.py: 1.2 s a page). A select-list
    expression: PostgreSQL computes it for the rows the page returns, after the LIMIT.
    """

    output_field = TextField()

    def __init__(self, text: str) -> None:
        super().__init__(F("pk"), F("head_seq"))
        self.text = text

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, tuple[str | int, ...]]:
        (id_sql, id_params), (head_sql, head_params) = (
            compiler.compile(expression) for expression in self.get_source_expressions()
        )
        events = table(Event)
        match = "to_tsvector('simple', {0}.text) @@ plainto_tsquery('simple', %s)"
        indexed = (
            f"SELECT sb_ti.text FROM {events} sb_ti"
            f" WHERE ARRAY[sb_ti.session_id] @> ARRAY[{id_sql}]"
            f" AND sb_ti.text <> '' AND {match.format('sb_ti')}"
        )
        sql = (
            f"CASE WHEN {head_sql} > {SEARCH_WINDOW} THEN COALESCE("
            f"(SELECT sb_tw.text FROM (SELECT sb_w.seq, sb_w.text FROM {events} sb_w"
            f" WHERE sb_w.session_id = {id_sql} AND sb_w.seq > {head_sql} - {SEARCH_WINDOW}"
            " AND sb_w.text <> '' ORDER BY sb_w.seq DESC OFFSET 0) sb_tw"
            f" WHERE {match.format('sb_tw')} LIMIT 1),"
            f" ({indexed} LIMIT 1))"
            f" ELSE ({indexed} ORDER BY sb_ti.seq DESC LIMIT 1) END"
        )
        params = (
            *head_params,
            *id_params,
            *head_params,
            self.text,
            *id_params,
            self.text,
            *id_params,
            self.text,
        )
        return sql, params


# --- Artifacts ------------------------------------------------------------------------------


def lock_artifact_quota(project_id: int) -> None:
    """Hold the project's artifact-quota lock until the caller's transaction ends: two uploads
    of one project each check the quota with the other's bytes counted, never both under it
    and together over. A transaction-level advisory lock: nothing to release, nothing held by
    a crashed process."""
    if not 0 <= project_id < 1 << 48:
        raise ValueError(f"no artifact quota lock for project {project_id}")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s)", [(ARTIFACT_QUOTA_LOCK_SPACE << 48) | project_id]
        )


def artifact_bytes_stored(project_id: int) -> int:
    """The project's stored artifact bytes (deleted versions' not counted): an index-only sum
    (artifact_project_stored)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT coalesce(sum(size), 0) FROM {table(Artifact)}"
            " WHERE project_id = %s AND deleted_at IS NULL",
            [project_id],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


# Each asked name (distinct) in order, with the size and bytes of the blob of that name the
# sessions of the lineage hold, if any (one row: a fork and its parent may both hold it), and
# the window `running` that adds up their sizes in that order.
_NAMES_FOUND = (
    " FROM unnest(string_to_array(%s::text, ',')) WITH ORDINALITY AS w(sha256, position)"
    f" LEFT JOIN LATERAL (SELECT size, data FROM {table(Blob)}"
    " WHERE session_id = ANY(%s::uuid[]) AND sha256 = w.sha256 LIMIT 1) b ON true"
    " WINDOW running AS (ORDER BY w.position)"
)
# Whether a found blob's bytes fit in the answer's byte budget (the first found always does).
_WITHIN_BUDGET = "(count(b.size) OVER running = 1 OR sum(b.size) OVER running <= %s::bigint)"


def blob_lookup_rows(
    lineage_ids: Sequence[UUID], digests: Sequence[str], *, with_data: bool, byte_budget: int
) -> list[tuple[str, int | None, str | None]]:
    """(sha256, size, base64 of the bytes) for each of `digests` (distinct), in their order:
    size None when none of the sessions `lineage_ids` holds it; base64 only if `with_data` and
    while the bytes found so far stay within `byte_budget` (the first found always).

    One statement, PostgreSQL encoding the base64 (newlines removed): two ORM reads (sizes,
    then data), the bytes parsed from hex and encoded again in Python, took 17 ms of the server
    process's CPU for 1,000 blobs of 1 KiB; this takes 4 ms, PostgreSQL's time about the same
    (a fresh process opening a LangGraph thread reads thousands).

    The names go as one comma-separated string that PostgreSQL splits: as a text[] parameter,
    psycopg quoted each element in Python (a regular expression per name), half of this
    statement's server-process CPU for 5,000 names (14.5 against 7.4 ms). The API validates
    every name as 64 hex digits; a name with a comma is refused here all the same."""
    sql = (
        f"SELECT w.sha256, b.size, CASE WHEN %s::boolean AND {_WITHIN_BUDGET}"
        " THEN replace(encode(b.data, 'base64'), E'\\n', '') END"
        + _NAMES_FOUND
        + " ORDER BY w.position"
    )
    with server_bound_cursor() as cursor:
        cursor.execute(sql, [with_data, byte_budget, _joined_names(digests), list(lineage_ids)])
        rows: list[tuple[str, int | None, str | None]] = cursor.fetchall()
    return rows


def blob_records(lineage_ids: Sequence[UUID], digests: Sequence[str], *, byte_budget: int) -> bytes:
    """blob_lookup_rows' answer with data, as the bytes the API sends for it (blob_api:
    BLOBS_MEDIA_TYPE): for each of `digests` (distinct) in order, its size as 4 bytes
    (big-endian) then its bytes; 0xFFFFFFFF alone when none of `lineage_ids` holds it,
    0xFFFFFFFE alone when it is past `byte_budget`. PostgreSQL joins them into one value: read
    as 5,000 rows of 330 bytes and joined in Python, the whole request took 20.5 ms of the
    server process's CPU; as one bytea, 9.7 ms (bench/request_cpu.py, lookup_bytes)."""
    sql = (
        "SELECT string_agg(CASE WHEN size IS NULL THEN '\\xffffffff'::bytea"
        " WHEN sent THEN int4send(size) || data ELSE '\\xfffffffe'::bytea END,"
        " ''::bytea ORDER BY position)"
        f" FROM (SELECT w.position, b.size, b.data, {_WITHIN_BUDGET} AS sent"
        + _NAMES_FOUND
        + ") found"
    )
    with server_bound_cursor(binary=True) as cursor:
        cursor.execute(sql, [byte_budget, _joined_names(digests), list(lineage_ids)])
        row = cursor.fetchone()
    return bytes(row[0]) if row and row[0] is not None else b""


def _joined_names(digests: Sequence[str]) -> str:
    names = ",".join(digests)
    if names.count(",") != max(len(digests) - 1, 0):
        raise ValueError("a blob name holds a comma")
    return names
