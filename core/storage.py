"""Fixed SQL of the core app, and the helpers every app's storage module builds rows with.

On this project's machines the ORM spends about 0.7 ms of CPU per query (compiling the SQL,
building instances) for a row the database returns in 0.1 ms; the API's per-request look-ups
(the key, the session) are fixed statements instead, built from the models' own metadata
(table and column names from `_meta`, never typed into strings) and turned into the same model
instances the ORM would build (bench/ingest.py measures the difference).
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.db import connection, connections
from django.db.models import Field, Model

from .models import ApiKey, Project


def table(model: type[Model]) -> str:
    """The model's table name, quoted for SQL."""
    return connection.ops.quote_name(model._meta.db_table)


def concrete_field(model: type[Model], field_name: str) -> Field[Any, Any]:
    """The model's field stored in a column of its table (not a reverse relation, not an m2m)."""
    field = model._meta.get_field(field_name)
    if not isinstance(field, Field) or field.column is None:
        raise ValueError(f"{model.__name__}.{field_name} is not stored in a column")
    return field


def column_name(field: Field[Any, Any]) -> str:
    """A concrete field's column name, unquoted (Django's `concrete` is `column is not None`)."""
    if field.column is None:
        raise ValueError(f"{field} is not stored in a column")
    return field.column


def column(model: type[Model], field_name: str) -> str:
    """A model field's column name, quoted for SQL."""
    return connection.ops.quote_name(column_name(concrete_field(model, field_name)))


def select_list(model: type[Model], alias: str) -> tuple[str, list[Field[Any, Any]]]:
    """`alias.col, …` for every concrete field of `model`, and those fields in that order."""
    fields = list(model._meta.concrete_fields)
    columns = ", ".join(f"{alias}.{connection.ops.quote_name(column_name(f))}" for f in fields)
    return columns, fields


def instance_from_row[M: Model](
    model: type[M], fields: list[Field[Any, Any]], row: tuple[Any, ...]
) -> M:
    """What the ORM would build from `row` (JSON columns arrive as text and are decoded)."""
    values = []
    for f, value in zip(fields, row, strict=True):
        from_db_value = getattr(f, "from_db_value", None)
        if from_db_value is not None:
            value = from_db_value(value, None, connection)
        values.append(value)
    return model.from_db(connection.alias, [f.attname for f in fields], values)


def active_key_with_project(prefix: str) -> ApiKey | None:
    """The unrevoked key with this prefix, its project loaded, in one statement (per request)."""
    key_columns, key_fields = select_list(ApiKey, "k")
    project_columns, project_fields = select_list(Project, "p")
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {key_columns}, {project_columns} FROM {table(ApiKey)} k"
            f" JOIN {table(Project)} p ON p.id = k.project_id"
            " WHERE k.prefix = %s AND k.revoked_at IS NULL",
            [prefix],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    api_key = instance_from_row(ApiKey, key_fields, row[: len(key_fields)])
    api_key.project = instance_from_row(Project, project_fields, row[len(key_fields) :])
    return api_key


def applied_migrations(conn: Any) -> set[tuple[str, str]]:
    """(app, name) of every migration recorded in django_migrations, on a separate connection
    (the readiness check's own psycopg connection, not Django's)."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT app, name FROM django_migrations")
        return {(str(app), str(name)) for app, name in cursor.fetchall()}


async def open_async_connection(*, connect_timeout: int = 2) -> psycopg.AsyncConnection[Any]:
    """A new psycopg AsyncConnection to the default database, outside Django's pool.

    For work that must wait on the database without holding a thread (the streamed export):
    the ORM's connections live in the thread-sensitive sync thread. Built from DATABASES with
    Django's own parameters and type adapters (timestamps in UTC, as the ORM returns them), so
    rows read here equal rows read through `connection.cursor()`. Not in a transaction until
    the first statement; closing it ends everything it held (session advisory locks included).
    libpq counts connect_timeout in whole seconds, 2 at least.
    """
    params = connections["default"].get_connection_params()
    params.pop("cursor_factory", None)  # Django's sync cursor class; the async default instead
    params.setdefault("connect_timeout", max(2, connect_timeout))
    return await psycopg.AsyncConnection.connect(**params)
