"""The one code path allowed to delete events (retention). Everything else is refused by the DB."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


@contextmanager
def allow_event_deletion() -> Iterator[None]:
    """Open the append-only guard for the current transaction only.

    PostgreSQL: a transaction-local setting (`SET LOCAL`), gone at commit or rollback.
    SQLite: a row in a grant table, removed before the block ends.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("allow_event_deletion() must run inside transaction.atomic()")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT set_config('switchboard.allow_event_delete', 'on', true)")
            yield
            cursor.execute("SELECT set_config('switchboard.allow_event_delete', '', true)")
        else:
            cursor.execute("INSERT INTO sessions_app_event_delete_grant (id) VALUES (1)")
            try:
                yield
            finally:
                cursor.execute("DELETE FROM sessions_app_event_delete_grant")
