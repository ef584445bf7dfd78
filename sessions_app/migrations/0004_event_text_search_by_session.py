"""The full-text index, keyed by session too: event_text_search_session replaces event_text_search.

The sessions list's `q` (queries.sessions_matching_text) either collects the sessions of the few
events matching a rare term, or walks the sessions in the list's order and asks, per session,
whether one of its events matches a common term. The second needs an index that answers "this
session's events matching this term" without reading the term's every match: a GIN index over
(ARRAY[session_id], to_tsvector('simple', text)). The one-element array keeps the session
column GIN-only (no btree_gin extension needed, and no B-tree can serve `ARRAY[…] @> …`, so the
planner never turns a probe into a scan of a long session's primary key). The same index serves
term-only look-ups (the collect form), so the old index goes.

PostgreSQL only, built CONCURRENTLY (appends keep going while it builds; hence atomic = False),
then ANALYZE so the strategy estimate has the index's statistics at once. SQLite's search is a
LIKE scan and has no such index.
"""

from django.db import migrations

INDEX = "event_text_search_session"
CREATE = (
    f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON sessions_app_event"
    " USING gin ((ARRAY[session_id]), to_tsvector('simple', text)) WHERE text <> ''"
)
CREATE_OLD = (
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS event_text_search ON sessions_app_event"
    " USING gin (to_tsvector('simple', text)) WHERE text <> ''"
)


def _drop_if_invalid(cursor, name: str) -> None:  # type: ignore[no-untyped-def]
    """An interrupted CONCURRENTLY build leaves an invalid index: drop it so a rerun builds it."""
    cursor.execute(
        "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [name]
    )
    row = cursor.fetchone()
    if row is not None and not row[0]:
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        _drop_if_invalid(cursor, INDEX)
        cursor.execute(CREATE)
        cursor.execute("DROP INDEX CONCURRENTLY IF EXISTS event_text_search")
        cursor.execute("ANALYZE sessions_app_event")


def backwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        _drop_if_invalid(cursor, "event_text_search")
        cursor.execute(CREATE_OLD)
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("sessions_app", "0003_dashboard_indexes")]

    operations = [migrations.RunPython(forwards, backwards)]
