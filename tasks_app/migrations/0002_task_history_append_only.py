"""Task history is append-only: the database refuses UPDATE of a history row.

DELETE stays possible so that deleting a task (or a project) cascades; no code path deletes
history rows on their own.
"""

from django.db import migrations

FORWARD = [
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
REVERSE = [
    "DROP TRIGGER IF EXISTS tasks_app_taskhistory_append_only ON tasks_app_taskhistory;",
    "DROP FUNCTION IF EXISTS tasks_app_taskhistory_append_only();",
]


class Migration(migrations.Migration):
    dependencies = [("tasks_app", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, REVERSE)]
