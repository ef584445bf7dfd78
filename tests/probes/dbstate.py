"""What "nothing changed" means for the probes: a checksum of every table in the database.

Each table's rows are read as JSON (`to_jsonb(row)`), hashed, and the hashes combined in sorted
order, so the checksum changes with any insert, update or delete anywhere, whatever the model.
A few columns that a refused request may legitimately touch are left out (VOLATILE, each with
its reason).
"""

from django.db import connection

# Columns a refused request may change without changing anything it was refused.
VOLATILE = {
    # An API key is "used" when it authenticates, also on a request then refused for the
    # object it names (another project's key): touched at most once a minute.
    "core_apikey": ("last_used_at",),
    # Django's sign-in sessions: a signed-in request may refresh its own session row.
    "django_session": ("expire_date", "session_data"),
}


def _tables() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
        )
        return [row[0] for row in cursor.fetchall()]


def _query() -> str:
    parts = []
    for table in _tables():
        quoted = connection.ops.quote_name(table)
        row = "to_jsonb(t)"
        for column in VOLATILE.get(table, ()):
            row = f"({row} - '{column}')"
        parts.append(
            f"SELECT '{table}' AS name, count(*) AS n, "
            f"md5(coalesce(string_agg(md5({row}::text), '' ORDER BY md5({row}::text)), '')) "
            f"FROM {quoted} t"
        )
    return " UNION ALL ".join(parts)


def checksums() -> dict[str, tuple[int, str]]:
    """Every table → (row count, checksum of its rows)."""
    with connection.cursor() as cursor:
        cursor.execute(_query())
        return {name: (n, digest) for name, n, digest in cursor.fetchall()}


def changed_tables(before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]):
    """The tables whose rows differ (with their row counts before and after)."""
    return {
        name: (before.get(name, (0, ""))[0], after.get(name, (0, ""))[0])
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    }
