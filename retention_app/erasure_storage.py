"""Erasure's fixed SQL: the guard's escape hatch (the setting migration 0004's trigger reads),
and removing a subject's sessions with the SHA-256 of every row recorded as it goes.

Each removal is one statement: `DELETE … RETURNING` the row's hash, inserted into the receipt
(ErasedObject) by the same statement, so a row is never gone without its hash nor hashed
without going. A row's hash is that of its JSON form (`row_to_json`), as stored."""

from typing import Any
from uuid import UUID

from django.db import connection, models

from core.storage import table
from sessions_app.models import Event, Session

from .models import ErasedObject
from .storage import cascading_rows

ROW_SHA = "encode(sha256(convert_to(row_to_json({row})::text, 'UTF8')), 'hex')"


def open_erasure_guard(erasure_id: UUID) -> None:
    """Let this transaction delete the events of `erasure_id`'s targets not yet erased, while
    it runs (migration 0004's trigger checks both for each row). Transaction-local: gone at
    commit or rollback whatever happens."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('switchboard.erasure', %s, true)", [str(erasure_id)])


def close_erasure_guard() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('switchboard.erasure', '', true)")


def _counted(cursor: Any) -> dict[str, int]:
    return {str(kind): int(n) for kind, n in cursor.fetchall()}


def erase_events(erasure_id: UUID, session_ids: list[UUID]) -> dict[str, int]:
    """Delete every event of these sessions (open_erasure_guard first), each hashed into the
    receipt as `fact` (a fact event) or `event`; the count per kind."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH gone AS (DELETE FROM {table(Event)} AS e WHERE session_id = ANY(%s)"
            " RETURNING CASE WHEN kind = 'fact' THEN 'fact' ELSE 'event' END AS kind,"
            f" session_id::text || '#' || seq AS ref, {ROW_SHA.format(row='e')} AS sha),"
            f" saved AS (INSERT INTO {table(ErasedObject)} (erasure_id, kind, ref, sha256)"
            " SELECT %s, kind, ref, sha FROM gone RETURNING kind)"
            " SELECT kind, count(*) FROM saved GROUP BY kind",
            [list(session_ids), erasure_id],
        )
        return _counted(cursor)


def _ref(model: type[models.Model], row: str) -> str:
    columns = [f.column for f in model._meta.pk_fields]  # type: ignore[attr-defined]
    parts = [f"{row}.{connection.ops.quote_name(c)}::text" for c in columns]
    return f"concat_ws(':', {', '.join(parts)})"


def erase_session_rows(erasure_id: UUID, session_ids: list[UUID]) -> dict[str, int]:
    """Delete the sessions' rows and every row that cascades from them (snapshots, handoffs
    with their texts, blobs, task links, compactions, … as storage.cascading_rows finds them),
    children before parents, each row hashed into the receipt under its model's name; the
    count per kind. Events must be gone (erase_events); the caller has the forks among them."""
    counts: dict[str, int] = {}
    with connection.cursor() as cursor:
        for model, where in [*cascading_rows(), (Session, f"{table(Session)} WHERE id = ANY(%s)")]:
            name = table(model)
            cursor.execute(
                f"WITH gone AS (DELETE FROM {where}"
                f" RETURNING {_ref(model, name)} AS ref, {ROW_SHA.format(row=name)} AS sha),"
                f" saved AS (INSERT INTO {table(ErasedObject)} (erasure_id, kind, ref, sha256)"
                " SELECT %s, %s, ref, sha FROM gone RETURNING 1) SELECT count(*) FROM saved",
                [list(session_ids), erasure_id, model._meta.model_name],
            )
            (n,) = cursor.fetchone()
            if n:
                counts[str(model._meta.model_name)] = counts.get(str(model._meta.model_name), 0) + n
        # Deferred foreign keys checked now, inside the batch: a dependant missed above fails
        # this batch (rolled back whole), not a later statement of the transaction.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    return counts


def count_session_rows(session_ids: list[UUID]) -> dict[str, int]:
    """What erase_events and erase_session_rows would remove, per kind (the preview)."""
    counts: dict[str, int] = {}
    ids = list(session_ids)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FILTER (WHERE kind <> 'fact'), count(*) FILTER (WHERE kind = 'fact')"
            f" FROM {table(Event)} WHERE session_id = ANY(%s)",
            [ids],
        )
        events, facts = cursor.fetchone()
        counts["event"], counts["fact"] = int(events), int(facts)
        for model, where in cascading_rows():
            cursor.execute(f"SELECT count(*) FROM {where}", [ids])
            (n,) = cursor.fetchone()
            key = str(model._meta.model_name)
            counts[key] = counts.get(key, 0) + int(n)
    counts["session"] = len(ids)
    return counts


def sessions_with_fact(project_id: int, key: str, value_json: str) -> set[UUID]:
    """The project's sessions whose own log holds a `fact` event setting `key` to the JSON
    value `value_json` (any time: an older value of the subject's is data of the subject)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT e.session_id FROM {table(Event)} e JOIN {table(Session)} s"
            " ON s.id = e.session_id WHERE s.project_id = %s AND e.kind = 'fact'"
            " AND e.content -> 'key' = to_jsonb(%s::text) AND e.content -> 'value' = %s::jsonb",
            [project_id, key, value_json],
        )
        return {row[0] for row in cursor.fetchall()}
