"""Task history is append-only: the database refuses UPDATE of a history row.

DELETE stays possible so that deleting a task (or a project) cascades; no code path deletes
history rows on their own.
"""

from django.db import migrations

PG_FORWARD = [
    """
    CREATE FUNCTION tasks_app_taskhistory_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'tasks_app_taskhistory is append-only: UPDATE refused'
            USING ERRCODE = 'insufficient_privilege';
    END;
    $$;
    """,
    """
    CREATE TRIGGER tasks_app_taskhistory_append_only
    BEFORE UPDATE ON tasks_app_taskhistory
    FOR EACH ROW EXECUTE FUNCTION tasks_app_taskhistory_append_only();
    """,
]
PG_REVERSE = [
    "DROP TRIGGER IF EXISTS tasks_app_taskhistory_append_only ON tasks_app_taskhistory;",
    "DROP FUNCTION IF EXISTS tasks_app_taskhistory_append_only();",
]
SQLITE_FORWARD = [
    """
    CREATE TRIGGER tasks_app_taskhistory_no_update BEFORE UPDATE ON tasks_app_taskhistory
    BEGIN SELECT RAISE(ABORT, 'tasks_app_taskhistory is append-only: UPDATE refused'); END;
    """,
]
SQLITE_REVERSE = ["DROP TRIGGER IF EXISTS tasks_app_taskhistory_no_update;"]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("tasks_app", "0001_workflows_tasks_steps_history")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": PG_REVERSE, "sqlite": SQLITE_REVERSE}),
        ),
    ]
