"""The one code path allowed to delete events (retention). Everything else is refused by the DB."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def allow_event_deletion() -> Iterator[None]:
    """Open the append-only guard for the current transaction only.

    PostgreSQL: a transaction-local setting (`SET LOCAL`), gone at commit or rollback.
    SQLite: a row in a grant table, removed before the block ends.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("allow_event_deletion() must run inside transaction.atomic()")
    postgresql = connection.vendor == "postgresql"
    # A savepoint of its own: if the block raises, rolling it back also undoes the switch (a
    # transaction-local setting or the grant row), so the guard never stays open for the rest
    # of the transaction, and no clean-up query runs in a failed transaction to mask the error.
    with transaction.atomic():
        with connection.cursor() as cursor:
            if postgresql:
                cursor.execute("SELECT set_config('switchboard.allow_event_delete', 'on', true)")
            else:
                cursor.execute("INSERT INTO sessions_app_event_delete_grant (id) VALUES (1)")
        yield
        with connection.cursor() as cursor:
            if postgresql:
                cursor.execute("SELECT set_config('switchboard.allow_event_delete', '', true)")
            else:
                cursor.execute("DELETE FROM sessions_app_event_delete_grant")
