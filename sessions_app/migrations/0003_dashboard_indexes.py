"""Indexes the operator dashboard reads through.

* event_lifecycle_seq: a session's lifecycle timeline, and when a paused session was paused
  (queries.lifecycle_changes, queries.waiting_sessions).
* event_created_brin (PostgreSQL only): the overview's events-per-minute chart reads the last
  hour by created_at (queries.events_per_minute). Events are inserted in time order, so a BRIN
  index (a few pages, next to nothing per insert: the append hot path stays as it is) narrows
  that range to the most recent blocks. SQLite has no BRIN; the embedded default is small.
"""

from django.db import migrations, models

PG_FORWARD = [
    "CREATE INDEX event_created_brin ON sessions_app_event USING brin (created_at)"
    " WITH (autosummarize = on);",
]
PG_REVERSE = ["DROP INDEX IF EXISTS event_created_brin;"]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0002_event_append_only_and_search")]

    operations = [
        migrations.AddIndex(
            model_name="event",
            index=models.Index(
                condition=models.Q(("kind", "lifecycle")),
                fields=["session", "seq"],
                name="event_lifecycle_seq",
            ),
        ),
        migrations.RunPython(_run({"postgresql": PG_FORWARD}), _run({"postgresql": PG_REVERSE})),
    ]
