"""Retention's fixed SQL: removing events (inside sessions_app.retention.allow_event_deletion
only: the database refuses it anywhere else), what they weigh, and the events table's size."""

import json
from typing import Any
from uuid import UUID

from django.db import connection

from core.models import Project
from core.storage import table
from sessions_app.models import Event


def share_project(project_id: int) -> None:
    """Take the project row FOR SHARE for the transaction: a retention batch holds it, and
    placing a legal hold (FOR NO KEY UPDATE on the same row) waits for the batch to end."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {table(Project)} WHERE id = %s FOR SHARE", [project_id])


def transient_events(session_id: UUID, after: int, through: int) -> list[dict[str, Any]]:
    """The session's own transient events in (after, through], in seq order, for the
    summariser (kind, role, seq, text, content)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT seq, kind, role, text, content FROM {table(Event)}"
            " WHERE session_id = %s AND seq > %s AND seq <= %s AND tier = 'transient'"
            " ORDER BY seq",
            [session_id, after, through],
        )
        return [
            {"seq": s, "kind": k, "role": r, "text": t, "content": json.loads(c)}
            for s, k, r, t, c in cursor.fetchall()
        ]


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
