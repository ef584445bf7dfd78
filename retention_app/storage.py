"""Retention's fixed SQL: removing events (inside sessions_app.retention.allow_event_deletion
only: the database refuses it anywhere else), what they weigh, and the events table's size."""

import json
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection, models

from core.models import Project
from core.storage import column as quoted_column
from core.storage import instance_from_row, select_list, server_bound_cursor, table
from sessions_app.models import Agent, Event, Session, Snapshot

from .models import LegalHold
from .summarisers import Digest


def commit_without_waiting_for_flush() -> None:
    """This transaction's commit does not wait for its WAL to reach disk (synchronous_commit
    off, for this transaction only). A retention batch only removes what is due and is redone
    by the next run if a PostgreSQL crash loses its last fraction of a second of commits; the
    batch stops queueing behind the disk with the ingestion path's commits, which keep the
    server's setting."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('synchronous_commit', 'off', true)")


def share_project(project_id: int) -> None:
    """Take the project row FOR SHARE for the transaction: a retention batch holds it, and
    placing a legal hold (FOR NO KEY UPDATE on the same row) waits for the batch to end."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {table(Project)} WHERE id = %s FOR SHARE", [project_id])


def transient_events(session_id: UUID, after: int, through: int) -> list[dict[str, Any]]:
    """The session's own transient events in (after, through], in seq order, for the
    summariser (kind, role, seq, text, content). Built by the database as one JSON array and
    decoded in one call: a compaction reads up to a whole session's log, and a Python row and
    a json.loads per event cost more than reading them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(json_agg(json_build_object('seq', seq, 'kind', kind, 'role', role,"
            " 'text', text, 'content', content) ORDER BY seq), '[]')::text"
            f" FROM {table(Event)}"
            " WHERE session_id = %s AND seq > %s AND seq <= %s AND tier = 'transient'",
            [session_id, after, through],
        )
        row = cursor.fetchone()
    events: list[dict[str, Any]] = json.loads(row[0]) if row else []
    return events


def delete_transient_events(session_id: UUID, after: int, through: int) -> tuple[int, int]:
    """Delete the session's own transient events in (after, through]; (count, bytes)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH gone AS (DELETE FROM {table(Event)} AS e WHERE session_id = %s AND seq > %s"
            " AND seq <= %s AND tier = 'transient' RETURNING pg_column_size(e) AS size)"
            " SELECT count(*), coalesce(sum(size), 0) FROM gone",
            [session_id, after, through],
        )
        count, size = cursor.fetchone()
    return int(count), int(size)


def delete_transient_events_digest(
    session_id: UUID, after: int, through: int
) -> tuple[int, int, Digest]:
    """Delete the session's own transient events in (after, through] and digest them in the
    same statement (what the default summariser says of them): (count, bytes, digest).

    One pass over the range, nothing shipped to Python but a row of aggregates: the rows
    deleted are scanned once more each by the small aggregates below, in PostgreSQL's memory.
    Tool names come back as JSON values and become text in Python, exactly as digest_of
    writes them (str() of the decoded value: a missing name is "None")."""
    events = table(Event)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH gone AS (DELETE FROM {events} AS e WHERE session_id = %s AND seq > %s"
            " AND seq <= %s AND tier = 'transient'"
            " RETURNING seq, kind, role, text, content -> 'name' AS name,"
            " pg_column_size(e) AS size),"
            " said AS (SELECT seq, role, text FROM gone"
            " WHERE kind = 'message' AND coalesce(text, '') <> '')"
            " SELECT count(*), coalesce(sum(size), 0), coalesce(min(seq), 0),"
            " coalesce(max(seq), 0),"
            " (SELECT coalesce(json_object_agg(kind, n), '{}') FROM"
            " (SELECT kind, count(*) AS n FROM gone GROUP BY kind) k)::text,"
            " (SELECT json_build_array(seq, role, text) FROM said ORDER BY seq LIMIT 1)::text,"
            " (SELECT json_build_array(seq, role, text) FROM said ORDER BY seq DESC LIMIT 1)::text,"
            " (SELECT coalesce(jsonb_agg(DISTINCT coalesce(name, 'null'::jsonb)), '[]')"
            " FROM gone WHERE kind = 'tool_call')::text,"
            " count(*) FILTER (WHERE kind = 'error')"
            " FROM gone",
            [session_id, after, through],
        )
        row = cursor.fetchone()
    count, size, first_seq, last_seq, kinds, first, last, names, errors = row
    digest = Digest(
        count=int(count),
        first_seq=int(first_seq),
        last_seq=int(last_seq),
        kinds={str(k): int(n) for k, n in json.loads(kinds).items()},
        first_message=tuple(json.loads(first)) if first else None,
        last_message=tuple(json.loads(last)) if last else None,
        tools=sorted({str(name) for name in json.loads(names)}),
        errors=int(errors),
    )
    return int(count), int(size), digest


def upsert_compaction_snapshot(
    session_id: UUID,
    seq: int,
    *,
    state: Any,
    facts: Any,
    summary: str,
    content_hash: str,
    now: datetime,
) -> None:
    """Write the `compaction` snapshot at `seq` (replacing one already there) in one statement
    (Django's update_or_create takes a savepoint, a SELECT and an INSERT)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table(Snapshot)} AS s (session_id, seq, state, facts, summary,"
            " content_hash, reason, created_at)"
            " VALUES (%s, %s, %s::jsonb, %s::jsonb, %s, %s, 'compaction', %s)"
            " ON CONFLICT (session_id, seq) DO UPDATE SET state = excluded.state,"
            " facts = excluded.facts, summary = excluded.summary,"
            " content_hash = excluded.content_hash, reason = excluded.reason",
            [session_id, seq, json.dumps(state), json.dumps(facts), summary, content_hash, now],
        )


def delete_all_events(session_id: UUID) -> tuple[int, int]:
    """Delete every event of the session (its own rows: a fork's inherited ones are its
    ancestors'); (count, bytes)."""
    return delete_all_events_of([session_id]).get(session_id, (0, 0))


def delete_all_events_of(session_ids: list[UUID]) -> dict[UUID, tuple[int, int]]:
    """Delete every event of these sessions in one statement; (count, bytes) per session that
    had any."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH gone AS (DELETE FROM {table(Event)} AS e WHERE session_id = ANY(%s)"
            " RETURNING session_id, pg_column_size(e) AS size)"
            " SELECT session_id, count(*), coalesce(sum(size), 0) FROM gone GROUP BY session_id",
            [list(session_ids)],
        )
        return {sid: (int(n), int(size)) for sid, n, size in cursor.fetchall()}


class SessionStillReferenced(RuntimeError):
    """The session can't be deleted: a row that protects it (a fork) still points at it."""


def _cascade_of(model: type[models.Model]) -> list[tuple[type[models.Model], str]]:
    """(model, column) of each model whose rows Django's cascade deletes with a row of `model`,
    read from the models' metadata (so a model added later is covered without an import of its
    app). Anything but CASCADE is refused: a new kind of dependant can't be skipped silently."""
    found = []
    for rel in model._meta.get_fields(include_hidden=True):
        if not rel.auto_created or rel.concrete or rel.many_to_many:
            continue
        on_delete = rel.on_delete  # type: ignore[union-attr]
        related = rel.related_model
        assert related is not None and not isinstance(related, str)
        if model is Session and (on_delete is models.DO_NOTHING or related is Session):
            continue  # events (deleted before), forks (PROTECT: checked below)
        if on_delete is not models.CASCADE:
            raise SessionStillReferenced(f"{related.__name__}: on_delete {on_delete} not handled")
        found.append((related, connection.ops.quote_name(rel.field.column)))  # type: ignore[union-attr,arg-type]
    return found


def cascading_rows() -> list[tuple[type[models.Model], str]]:
    """(model, `<table> WHERE …` taking the session ids as its one parameter) for every row
    that Django's cascade would delete with a session, the rows of a session's dependants' own
    dependants (a handoff's viewers) before the dependants. Two levels deep at most: a deeper
    chain is refused rather than guessed at. Erasure (erasure_storage) reads them before it
    deletes them, to hash each."""
    rows: list[tuple[type[models.Model], str]] = []
    for model, column in _cascade_of(Session):
        name = table(model)
        for child, child_column in _cascade_of(model):
            if _cascade_of(child):
                raise SessionStillReferenced(f"{child.__name__} has dependants of its own")
            pk = connection.ops.quote_name(model._meta.pk.column)  # type: ignore[arg-type]
            rows.append(
                (
                    child,
                    f"{table(child)} WHERE {child_column} IN"
                    f" (SELECT {pk} FROM {name} WHERE {column} = ANY(%s))",
                )
            )
        rows.append((model, f"{name} WHERE {column} = ANY(%s)"))
    return rows


def _cascading_deletes() -> list[tuple[str, str]]:
    """(table, DELETE statement taking the session ids as its one parameter) of cascading_rows."""
    return [(table(model), f"DELETE FROM {where}") for model, where in cascading_rows()]


def delete_session_rows(session_id: UUID) -> int:
    """delete_sessions_rows for one session; its snapshot count."""
    return delete_sessions_rows([session_id]).get(session_id, 0)


def delete_sessions_rows(session_ids: list[UUID]) -> dict[UUID, int]:
    """Delete the session rows and every row that cascades from them (snapshots, compactions,
    task links, handoffs, holds), one DELETE per table for all of them instead of Django's
    collector (a SELECT per relation and per instance); the snapshot count per session.

    Events must already be gone (delete_all_events_of). A fork still pointing at one of the
    sessions refuses the delete, unless it is deleted with them (one of `session_ids`). The
    deferred foreign keys are checked before returning, inside the caller's savepoint, so a
    dependant missed here fails this call alone, not the batch."""
    sessions = table(Session)
    ids = list(session_ids)
    snapshots: dict[UUID, int] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT parent_id FROM {sessions} WHERE parent_id = ANY(%s) AND id <> ALL(%s) LIMIT 1",
            [ids, ids],
        )
        row = cursor.fetchone()
        if row:
            raise SessionStillReferenced(f"session {row[0]} has forks")
        for name, statement in _cascading_deletes():
            if name == table(Snapshot):
                cursor.execute(
                    f"WITH gone AS ({statement} RETURNING session_id AS sid)"
                    " SELECT sid, count(*) FROM gone GROUP BY sid",
                    [ids],
                )
                snapshots = {sid: int(n) for sid, n in cursor.fetchall()}
            else:
                cursor.execute(statement, [ids])
        cursor.execute(f"DELETE FROM {sessions} WHERE id = ANY(%s)", [ids])
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    return snapshots


def average_event_bytes() -> float:
    """An event row's average size, from the first 1,000 rows (for the preview's estimates;
    the planner's pages-per-tuple ratio is meaningless on a small or freshly loaded table)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT avg(pg_column_size(e)) FROM (SELECT * FROM {table(Event)} LIMIT 1000) e"
        )
        row = cursor.fetchone()
    value = float(row[0]) if row and row[0] else 0.0
    return value if value > 0 else 300.0


def standing_holds_covering(
    project_id: int, agent_ids: list[int], session_ids: list[UUID]
) -> list[LegalHold]:
    """The project's standing holds on the project itself, on one of `agent_ids` or on one of
    `session_ids`, oldest first, each with its agent loaded: one fixed statement. Every page of
    sessions the API serves asks this; the ORM's compiling of the same query took a third of a
    `GET /sessions`' CPU."""
    hold_columns, hold_fields = select_list(LegalHold, "h")
    agent_columns, agent_fields = select_list(Agent, "a")
    scope = quoted_column(LegalHold, "scope")
    agent = quoted_column(LegalHold, "agent")
    session = quoted_column(LegalHold, "session")
    with server_bound_cursor() as cursor:
        cursor.execute(
            f"SELECT {hold_columns}, {agent_columns} FROM {table(LegalHold)} h"
            f" LEFT JOIN {table(Agent)} a ON a.id = h.{agent}"
            f" WHERE h.{quoted_column(LegalHold, 'project')} = %s"
            f" AND h.{quoted_column(LegalHold, 'released_at')} IS NULL"
            f" AND (h.{scope} = 'project' OR (h.{scope} = 'agent' AND h.{agent} = ANY(%s))"
            f" OR (h.{scope} = 'session' AND h.{session} = ANY(%s)))"
            " ORDER BY h.id",
            [project_id, agent_ids, session_ids],
        )
        rows = cursor.fetchall()
    holds = []
    split = len(hold_fields)
    for row in rows:
        hold = instance_from_row(LegalHold, hold_fields, row[:split])
        if hold.agent_id is not None:
            hold.agent = instance_from_row(Agent, agent_fields, row[split:])
        holds.append(hold)
    return holds
