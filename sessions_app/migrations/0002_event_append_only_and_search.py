"""Database-level guards and indexes that Django's schema editor cannot express.

* Events are append-only (invariant 2): a trigger refuses every UPDATE, and every DELETE
  unless the transaction set `switchboard.allow_event_delete` (the retention job's switch,
  see sessions_app.retention.allow_event_deletion). On SQLite the same switch is a row in
  a one-row table, since SQLite has no session settings.
* Full-text search over events' searchable text (PostgreSQL GIN index; the sessions list's `q`).
"""

from django.db import migrations

PG_FORWARD = [
    """
    CREATE FUNCTION sessions_app_event_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'UPDATE' THEN
            RAISE EXCEPTION 'sessions_app_event is append-only: UPDATE refused'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF coalesce(current_setting('switchboard.allow_event_delete', true), '') <> 'on' THEN
            RAISE EXCEPTION 'sessions_app_event is append-only: DELETE only in retention'
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN OLD;
    END;
    $$;
    """,
    """
    CREATE TRIGGER sessions_app_event_append_only
    BEFORE UPDATE OR DELETE ON sessions_app_event
    FOR EACH ROW EXECUTE FUNCTION sessions_app_event_append_only();
    """,
    # Used by the sessions list's full-text filter (queries.sessions_matching_text); partial,
    # because most events (tool calls, state patches) carry no text.
    """
    CREATE INDEX event_text_search ON sessions_app_event
    USING gin (to_tsvector('simple', text)) WHERE text <> '';
    """,
]
PG_REVERSE = [
    "DROP INDEX IF EXISTS event_text_search;",
    "DROP TRIGGER IF EXISTS sessions_app_event_append_only ON sessions_app_event;",
    "DROP FUNCTION IF EXISTS sessions_app_event_append_only();",
]

SQLITE_FORWARD = [
    "CREATE TABLE sessions_app_event_delete_grant (id INTEGER PRIMARY KEY);",
    """
    CREATE TRIGGER sessions_app_event_no_update BEFORE UPDATE ON sessions_app_event
    BEGIN SELECT RAISE(ABORT, 'sessions_app_event is append-only: UPDATE refused'); END;
    """,
    """
    CREATE TRIGGER sessions_app_event_no_delete BEFORE DELETE ON sessions_app_event
    WHEN NOT EXISTS (SELECT 1 FROM sessions_app_event_delete_grant)
    BEGIN SELECT RAISE(ABORT, 'sessions_app_event is append-only: DELETE only in retention'); END;
    """,
]
SQLITE_REVERSE = [
    "DROP TRIGGER IF EXISTS sessions_app_event_no_delete;",
    "DROP TRIGGER IF EXISTS sessions_app_event_no_update;",
    "DROP TABLE IF EXISTS sessions_app_event_delete_grant;",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": PG_REVERSE, "sqlite": SQLITE_REVERSE}),
        ),
    ]
