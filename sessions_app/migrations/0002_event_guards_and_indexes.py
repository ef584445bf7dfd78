"""Database-level guards and indexes that Django's schema editor cannot express.

* Events are append-only (invariant 2): a trigger refuses every UPDATE, and every DELETE
  unless the transaction set `switchboard.allow_event_delete` (the retention job's switch,
  sessions_app.retention.allow_event_deletion).
* event_text_search_session: full-text search over events' searchable text, keyed by session
  too (storage.EventTextMatch explains both ways the sessions list reads it). The one-element
  array keeps the session column GIN-only (no btree_gin extension, and no B-tree can serve
  `ARRAY[…] @> …`, so a probe never turns into a scan of a long session's primary key).
  Partial: most events (tool calls, state patches) carry no text.
* event_created_brin: the overview's events-per-minute chart reads the last hour by
  created_at (queries.events_per_minute). Events are inserted in time order, so a BRIN index
  (a few pages, next to nothing per insert) narrows that range to the most recent blocks.
"""

from django.db import migrations

FORWARD = [
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
    "CREATE INDEX event_text_search_session ON sessions_app_event"
    " USING gin ((ARRAY[session_id]), to_tsvector('simple', text)) WHERE text <> '';",
    "CREATE INDEX event_created_brin ON sessions_app_event USING brin (created_at)"
    " WITH (autosummarize = on);",
]
REVERSE = [
    "DROP INDEX IF EXISTS event_created_brin;",
    "DROP INDEX IF EXISTS event_text_search_session;",
    "DROP TRIGGER IF EXISTS sessions_app_event_append_only ON sessions_app_event;",
    "DROP FUNCTION IF EXISTS sessions_app_event_append_only();",
]


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
