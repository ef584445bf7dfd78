"""Retention's fixed SQL: removing events (inside sessions_app.retention.allow_event_deletion
only: the database refuses it anywhere else), what they weigh, and the events table's size."""

import json
from typing import Any
from uuid import UUID

from django.db import connection, models

from core.models import Project
from core.storage import table
from sessions_app.models import Event, Session, Snapshot


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


def delete_all_events(session_id: UUID) -> tuple[int, int]:
    """Delete every event of the session (its own rows: a fork's inherited ones are its
    ancestors'); (count, bytes)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH gone AS (DELETE FROM {table(Event)} AS e WHERE session_id = %s"
            " RETURNING pg_column_size(e) AS size)"
            " SELECT count(*), coalesce(sum(size), 0) FROM gone",
            [session_id],
        )
        count, size = cursor.fetchone()
    return int(count), int(size)


class SessionStillReferenced(RuntimeError):
    """The session can't be deleted: a row that protects it (a fork) still points at it."""


def _cascading_tables() -> list[tuple[str, str]]:
    """(table, column) of every model whose rows Django's cascade would delete with a session,
    read from the models' metadata (so a model added later is covered without an import of its
    app). Only direct CASCADE relations to models with no cascades of their own: anything else
    is refused below, so a new kind of dependant can't be skipped silently."""
    found = []
    for rel in Session._meta.get_fields(include_hidden=True):
        if not rel.auto_created or rel.concrete or rel.many_to_many:
            continue
        on_delete = rel.on_delete  # type: ignore[union-attr]
        model = rel.related_model
        assert model is not None and not isinstance(model, str)
        if on_delete is models.DO_NOTHING or model is Session:
            continue  # events (deleted before), forks (PROTECT: checked below)
        if on_delete is not models.CASCADE:
            raise SessionStillReferenced(f"{model.__name__}: on_delete {on_delete} not handled")
        for child in model._meta.get_fields(include_hidden=True):
            if child.auto_created and not child.concrete and not child.many_to_many:
                raise SessionStillReferenced(f"{model.__name__} has dependants of its own")
        found.append((table(model), connection.ops.quote_name(rel.field.column)))  # type: ignore[union-attr,arg-type]
    return found


def delete_session_rows(session_id: UUID) -> int:
    """Delete the session row and every row that cascades from it (snapshots, compactions,
    task links, handoffs, holds), one DELETE per table by session id instead of Django's
    collector (a SELECT per relation and per instance); the session's snapshot count.

    Events must already be gone (delete_all_events). A fork still pointing at the session
    refuses the delete. The deferred foreign keys are checked before returning, inside the
    caller's savepoint, so a dependant missed here fails this session alone, not the batch."""
    sessions = table(Session)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {sessions} WHERE parent_id = %s LIMIT 1", [session_id])
        if cursor.fetchone():
            raise SessionStillReferenced(f"session {session_id} has forks")
        snapshots = 0
        for name, column in _cascading_tables():
            cursor.execute(f"DELETE FROM {name} WHERE {column} = %s", [session_id])
            if name == table(Snapshot):
                snapshots = cursor.rowcount
        cursor.execute(f"DELETE FROM {sessions} WHERE id = %s", [session_id])
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
