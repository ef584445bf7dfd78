"""The unique index on (session, idempotency_key) with the pattern operator class on the key,
so reads by key prefix (GET /sessions/{id}/events?key_prefix=) are range scans of it.

Built CONCURRENTLY next to the old one, which is then dropped CONCURRENTLY and the new one takes
its name: appends go on meanwhile, and a key stays unique throughout (one of the two indexes is
always there and valid). The model's state changes only in the constraint's operator classes.
"""

from django.db import migrations, models

_TABLE = "sessions_app_event"
_NAME = "event_unique_idempotency_key"
_WHERE = "WHERE idempotency_key IS NOT NULL"


def _build(name: str, opclass: str) -> str:
    return (
        f'CREATE UNIQUE INDEX CONCURRENTLY "{name}_new" ON "{_TABLE}"'
        f' ("session_id", "idempotency_key" {opclass}) {_WHERE}'
    )


def _swap(name: str, opclass: str) -> list[str]:
    return [
        # A build that failed half-way leaves an INVALID index behind, which must not be the one
        # renamed over the old: start again from nothing.
        f'DROP INDEX CONCURRENTLY IF EXISTS "{name}_new"',
        _build(name, opclass),
        f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"',
        f'ALTER INDEX "{name}_new" RENAME TO "{name}"',
    ]


class Migration(migrations.Migration):
    atomic = False  # CREATE / DROP INDEX CONCURRENTLY

    dependencies = [
        ("sessions_app", "0006_session_metadata_path"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    _swap(_NAME, "varchar_pattern_ops"),
                    reverse_sql=_swap(_NAME, ""),
                ),
            ],
            state_operations=[
                migrations.RemoveConstraint(model_name="event", name=_NAME),
                migrations.AddConstraint(
                    model_name="event",
                    constraint=models.UniqueConstraint(
                        condition=models.Q(("idempotency_key__isnull", False)),
                        fields=("session", "idempotency_key"),
                        name=_NAME,
                        opclasses=["uuid_ops", "varchar_pattern_ops"],
                    ),
                ),
            ],
        ),
    ]
