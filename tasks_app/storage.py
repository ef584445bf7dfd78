"""Fixed SQL of the tasks app (what the ORM would build, for statements on a hot path)."""

from typing import Any

from core.storage import column, server_bound_cursor, table

from .models import TaskSession


def linked_task_ids(session_id: Any) -> list[Any]:
    """The ids of the tasks linked to a session, in id order (the session-first index).

    Every fork asks this of its parent inside its transaction (services.links); built by the
    ORM it cost more server time than the statement takes to run."""
    with server_bound_cursor() as cursor:
        cursor.execute(
            f"SELECT {column(TaskSession, 'task')} FROM {table(TaskSession)}"
            f" WHERE {column(TaskSession, 'session')} = %s ORDER BY 1",
            [session_id],
        )
        return [task_id for (task_id,) in cursor.fetchall()]
