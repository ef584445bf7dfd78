"""The one code path allowed to delete events (retention). Everything else is refused by the DB."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

from sessions_app import storage


@contextmanager
def allow_event_deletion() -> Iterator[None]:
    """Open the append-only guard for the current transaction only.

    A transaction-local setting the trigger reads (`SET LOCAL`), gone at commit or rollback.
    Re-entrant: inside a block already open (a retention batch opens it once for all its
    sessions), it only runs the inner block.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("allow_event_deletion() must run inside transaction.atomic()")
    if getattr(connection, "_switchboard_deleting", False):
        yield
        return
    # A savepoint of its own: if the block raises, rolling it back also undoes the switch, so
    # the guard never stays open for the rest of the transaction, and no clean-up query runs in
    # a failed transaction to mask the error.
    with transaction.atomic():
        storage.allow_event_deletion_in_transaction(True)
        connection._switchboard_deleting = True  # type: ignore[attr-defined]
        try:
            yield
        finally:
            connection._switchboard_deleting = False  # type: ignore[attr-defined]
        storage.allow_event_deletion_in_transaction(False)
