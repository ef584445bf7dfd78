"""Fixed SQL of the core app, and the helpers every app's storage module builds rows with.

On this project's machines the ORM spends about 0.7 ms of CPU per query (compiling the SQL,
building instances) for a row the database returns in 0.1 ms; the API's per-request look-ups
(the key, the session) are fixed statements instead, built from the models' own metadata
(table and column names from `_meta`, never typed into strings) and turned into the same model
instances the ORM would build (bench/ingest.py measures the difference).
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.postgresql.base import CursorDebugWrapper
from django.db.backends.postgresql.psycopg_any import register_tzloader
from django.db.backends.utils import CursorWrapper
from django.db.models import Field, Model
from django.db.models.sql import InsertQuery
from psycopg.pq import Format

from .models import (
    ApiKey,
    LiveNotice,
    OutboxMessage,
    Project,
    WebhookDelivery,
    WebhookEndpoint,
)


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


_TIMESTAMPTZ_OID = psycopg.postgres.types["timestamptz"].oid


class _ServerBoundDebugCursor(CursorDebugWrapper):
    """Logs each statement as sent, its parameters apart. Django's wrapper logs the text psycopg
    keeps of the last run, and psycopg keeps none of a prepared statement's run (None)."""

    def execute(self, sql: Any, params: Any = None) -> Any:
        with self.debug_sql(sql, params):
            return CursorWrapper.execute(self, sql, params)


def server_bound_cursor(*, binary: bool = False) -> CursorWrapper:
    """A cursor of the default connection that sends its parameters apart from the statement.

    Django's cursors bind client-side: every parameter quoted into the text in Python, and the
    text parsed and planned by PostgreSQL on every call. This one uses the extended protocol,
    so psycopg prepares a statement once it has run `prepare_threshold` times on a connection
    (settings: DB_PREPARED_STATEMENTS) and PostgreSQL plans it once per connection: a single
    event's append went from 1.4 to 0.9 ms of PostgreSQL CPU (bench/api_ab.py). The same
    wrapper as `connection.cursor()` (errors as Django's, queries logged when they are, with
    their parameters apart).

    Only for fixed SQL whose every parameter PostgreSQL can type from where it stands
    (compared with a column, inserted into one, or cast): `%s IS NULL` cannot be.

    `binary`: results in PostgreSQL's binary format (bytea arrives as its bytes, not as hex
    text twice their size to parse)."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    raw = connection.connection
    cursor = psycopg.Cursor(raw)  # server-side binding (Django's ClientCursor binds client-side)
    if binary:
        cursor.format = Format.BINARY
    # As Django's create_cursor: its time zone where the connection's differs.
    if connection.timezone != raw.adapters.get_loader(_TIMESTAMPTZ_OID, Format.TEXT).timezone:
        register_tzloader(connection.timezone, cursor)
    if connection.queries_logged:
        return _ServerBoundDebugCursor(cursor, connection)
    # (django-stubs name the wrapped cursor's type CursorWrapper; it is the DB-API cursor.)
    return connection.make_cursor(cursor)  # type: ignore[arg-type]


@functools.cache
def select_list(model: type[Model], alias: str) -> tuple[str, list[Field[Any, Any]]]:
    """`alias.col, …` for every concrete field of `model`, and those fields in that order.

    Built once per model and alias (a per-request look-up built it each time: thirty trips
    through the `connection` proxy for the quoting alone). Callers only read the list."""
    fields = list(model._meta.concrete_fields)
    columns = ", ".join(f"{alias}.{connection.ops.quote_name(column_name(f))}" for f in fields)
    return columns, fields


def insert_in_one_statement(instances: list[Model]) -> None:
    """INSERT unsaved instances (of any models) in one statement: one data-modifying WITH per
    row, so they are written together or not at all, in the caller's transaction or, in
    autocommit, as their own (no BEGIN and COMMIT round trips). Each row's INSERT is the ORM's
    own (as its compiler writes it: defaults, auto_now, the columns' preparation); auto primary
    keys are set on the instances, which are then saved ones. No model signals are sent (none of the
    models written this way has receivers)."""
    parts: list[str] = []
    params: list[Any] = []
    auto: list[tuple[Model, Field[Any, Any]]] = []
    for index, instance in enumerate(instances):
        meta = instance._meta
        pk = meta.pk
        if pk is None:
            raise ValueError(f"{type(instance).__name__} has no primary key")
        sql, row_params = _row_insert(instance, with_pk=getattr(instance, pk.attname) is not None)
        quoted_pk = connection.ops.quote_name(column_name(pk))
        parts.append(f"w{index} AS ({sql} RETURNING {quoted_pk})")
        params.extend(row_params)
        if getattr(instance, pk.attname) is None:
            auto.append((instance, pk))
    if not parts:
        return
    ids = ", ".join(f"(SELECT * FROM w{index})" for index in range(len(parts)))
    with server_bound_cursor() as cursor:
        cursor.execute(f"WITH {', '.join(parts)} SELECT {ids}", params)
        row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the INSERT returned no row")
    returned = dict(zip((id(i) for i in instances), row, strict=True))
    for instance, pk in auto:
        setattr(instance, pk.attname, returned[id(instance)])
    for instance in instances:
        instance._state.adding = False
        instance._state.db = connection.alias


def _row_insert(instance: Model, *, with_pk: bool) -> tuple[str, list[Any]]:
    """The ORM's INSERT of one unsaved instance, its SQL built once per model.

    Each value goes through what the compiler applies (the field's pre_save with add=True:
    auto_now and the like; then get_db_prep_save), at a quarter of the compiler's cost (built
    per row, three rows of a fork were a fifth of its server time). A model or a value the
    shortcut does not cover (a field with its own placeholder or a database default, an
    expression as a value) goes through the compiler itself."""
    template = _insert_template(type(instance), with_pk)
    if template is not None:
        sql, fields = template
        params: list[Any] = []
        for f in fields:
            value = f.pre_save(instance, add=True)
            if hasattr(value, "resolve_expression"):
                break
            params.append(f.get_db_prep_save(value, connection))
        else:
            return sql, params
    return _compiled_row_insert(instance, with_pk=with_pk)


def _insert_fields(model: type[Model], with_pk: bool) -> list[Field[Any, Any]]:
    pk = model._meta.pk
    return [f for f in model._meta.local_concrete_fields if with_pk or f is not pk]


@functools.cache
def _insert_template(model: type[Model], with_pk: bool) -> tuple[str, list[Field[Any, Any]]] | None:
    fields = _insert_fields(model, with_pk)
    if not fields or any(
        getattr(f, "get_placeholder", None) is not None or f.has_db_default() for f in fields
    ):
        return None
    columns = ", ".join(connection.ops.quote_name(column_name(f)) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    return f"INSERT INTO {table(model)} ({columns}) VALUES ({placeholders})", fields


def _compiled_row_insert(instance: Model, *, with_pk: bool) -> tuple[str, list[Any]]:
    """The same INSERT as the ORM's compiler writes it."""
    query = InsertQuery(type(instance))
    query.insert_values(_insert_fields(type(instance), with_pk), [instance])
    ((sql, params),) = query.get_compiler(connection=connection).as_sql()
    return sql, list(params)


def instance_from_row[M: Model](
    model: type[M], fields: list[Field[Any, Any]], row: tuple[Any, ...]
) -> M:
    """What the ORM would build from `row` (JSON columns arrive as text and are decoded)."""
    db = connections[DEFAULT_DB_ALIAS]  # once, not through the `connection` proxy per field
    values = []
    for f, value in zip(fields, row, strict=True):
        from_db_value = getattr(f, "from_db_value", None)
        if from_db_value is not None:
            value = from_db_value(value, None, db)
        values.append(value)
    return model.from_db(DEFAULT_DB_ALIAS, [f.attname for f in fields], values)


def active_key_with_project(prefix: str) -> ApiKey | None:
    """The unrevoked key with this prefix, its project loaded, in one statement (per request
    where no key cache is kept: without Redis, or past the cache's epoch)."""
    key_columns, key_fields = select_list(ApiKey, "k")
    project_columns, project_fields = select_list(Project, "p")
    with server_bound_cursor() as cursor:
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


def claim_unsent_outbox_messages(message_ids: list[int], now: Any) -> list[tuple[Any, Any]]:
    """Mark unsent outbox rows sent, in the caller's transaction, in one statement: the
    (groups, payload) of each, in id order, leaving out rows sent already or locked by another
    relay (SKIP LOCKED, as the relay job takes rows). Roll the transaction back if a send then
    fails."""
    t = table(OutboxMessage)
    sent_at = column(OutboxMessage, "relayed_at")
    with server_bound_cursor() as cursor:
        cursor.execute(
            f"UPDATE {t} SET {sent_at} = %s WHERE id IN (SELECT id FROM {t}"
            f" WHERE id = ANY(%s) AND {sent_at} IS NULL FOR UPDATE SKIP LOCKED)"
            f" RETURNING id, {column(OutboxMessage, 'groups')}::text,"
            f" {column(OutboxMessage, 'payload')}::text",
            [now, list(message_ids)],
        )
        rows = sorted(cursor.fetchall())
    return [(json.loads(groups), json.loads(payload)) for _, groups, payload in rows]


def applied_migrations(conn: Any) -> set[tuple[str, str]]:
    """(app, name) of every migration recorded in django_migrations, on a separate connection
    (the readiness check's own psycopg connection, not Django's)."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT app, name FROM django_migrations")
        return {(str(app), str(name)) for app, name in cursor.fetchall()}


# --- Live notices without Redis (core.notify_layer) ------------------------------------------

# One NOTIFY channel per database: deployments on other databases never hear each other.
LIVE_CHANNEL = "switchboard_live"
LISTEN_LIVE = f"LISTEN {LIVE_CHANNEL}"
# How long a stored (oversize) notice is kept for its listeners to read it.
LIVE_NOTICE_KEEP = "5 minutes"


def notify_live(conn: Any, body: str) -> None:
    """NOTIFY the live channel on Django connection `conn`: sent when its transaction commits
    (at once in autocommit), never if it rolls back."""
    with conn.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [LIVE_CHANNEL, body])


def notify_live_stored(conn: Any, body: str) -> None:
    """notify_live for a body too large for NOTIFY: stored in a LiveNotice row, which the
    notice names (`@<id>`); stored ones older than LIVE_NOTICE_KEEP are dropped meanwhile."""
    t = table(LiveNotice)
    with conn.cursor() as cursor:
        cursor.execute(
            f"WITH notice AS (INSERT INTO {t} (body, created_at) VALUES (%s, now())"
            " RETURNING id),"
            f" old AS (DELETE FROM {t} WHERE created_at < now() - %s::interval)"
            " SELECT pg_notify(%s, '@' || id) FROM notice",
            [body, LIVE_NOTICE_KEEP, LIVE_CHANNEL],
        )


# Read by a listener on its own psycopg connection.
STORED_LIVE_NOTICE = f"SELECT body FROM {LiveNotice._meta.db_table} WHERE id = %s"


# --- Webhooks -------------------------------------------------------------------------------


def insert_webhook_deliveries(
    project_id: int, event: str, data: dict[str, Any], *, now: datetime
) -> int:
    """One pending delivery per active endpoint of the project subscribed to `event`, in one
    INSERT … SELECT inside the caller's transaction (the change's). Returns how many.

    On the lifecycle hot path: with no endpoint it is one probe of the partial index
    `webhook_active` that finds nothing (bench/webhooks.py measures the cost)."""
    return insert_webhook_deliveries_of(project_id, event, [data], now=now)


def insert_webhook_deliveries_of(
    project_id: int, event: str, payloads: list[dict[str, Any]], *, now: datetime
) -> int:
    """insert_webhook_deliveries for several changes of one kind (a retention batch's deleted
    sessions) in the same one statement: a delivery per payload and subscribed endpoint."""
    d, e = WebhookDelivery, WebhookEndpoint
    if len(payloads) == 1:  # the lifecycle path: one change
        source, value = "(SELECT %s::jsonb AS payload, 1 AS n)", json.dumps(payloads[0])
    else:
        source, value = "jsonb_array_elements(%s::jsonb) WITH ORDINALITY", json.dumps(payloads)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table(d)} ({column(d, 'id')}, {column(d, 'endpoint')},"
            f" {column(d, 'project')}, {column(d, 'event')}, {column(d, 'payload')},"
            f" {column(d, 'status')}, {column(d, 'attempts')}, {column(d, 'next_attempt_at')},"
            f" {column(d, 'last_error')}, {column(d, 'created_at')})"
            f" SELECT gen_random_uuid(), e.{column(e, 'id')}, e.{column(e, 'project')},"
            " %s, p.payload, 'pending', 0, %s, '', %s"
            f" FROM {table(e)} e CROSS JOIN {source} AS p(payload, n)"
            f" WHERE e.{column(e, 'project')} = %s AND e.{column(e, 'active')}"
            f" AND e.{column(e, 'events')} @> %s::jsonb ORDER BY p.n",
            [event, now, now, value, project_id, json.dumps([event])],
        )
        return int(cursor.rowcount)


@dataclass(frozen=True)
class ClaimedDelivery:
    """A delivery a sender has leased: what one attempt needs, and the attempt number that
    fences its result (a sender whose lease ran out and was re-claimed cannot record)."""

    id: uuid.UUID
    attempt: int
    event: str
    payload: dict[str, Any]
    created_at: datetime
    url: str
    secret: str
    status: str


def _claimed(row: tuple[Any, ...]) -> ClaimedDelivery:
    payload = row[3] if isinstance(row[3], dict) else json.loads(row[3])
    return ClaimedDelivery(row[0], row[1], row[2], payload, row[4], row[5], row[6], row[7])


def _claim_returning() -> str:
    d, e = WebhookDelivery, WebhookEndpoint
    return (
        f" RETURNING d.{column(d, 'id')}, d.{column(d, 'attempts')}, d.{column(d, 'event')},"
        f" d.{column(d, 'payload')}, d.{column(d, 'created_at')}, e.{column(e, 'url')},"
        f" e.{column(e, 'secret')}, d.{column(d, 'status')}"
    )


def claim_due_deliveries(
    *, now: datetime, lease_until: datetime, limit: int
) -> list[ClaimedDelivery]:
    """Lease up to `limit` due deliveries of active endpoints, soonest first, and count the
    attempt. Rows other workers hold are skipped (SKIP LOCKED); the row locks last only for
    this statement's transaction: the lease (next_attempt_at and leased_until moved to
    `lease_until`) is what keeps other senders off while this one POSTs."""
    d, e = WebhookDelivery, WebhookEndpoint
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH due AS (SELECT d.{column(d, 'id')} AS id FROM {table(d)} d"
            f" JOIN {table(e)} e ON e.{column(e, 'id')} = d.{column(d, 'endpoint')}"
            f" WHERE d.{column(d, 'status')} = 'pending' AND d.{column(d, 'next_attempt_at')} <= %s"
            f" AND e.{column(e, 'active')}"
            f" ORDER BY d.{column(d, 'next_attempt_at')} LIMIT %s FOR UPDATE OF d SKIP LOCKED)"
            f" UPDATE {table(d)} d SET {column(d, 'attempts')} = d.{column(d, 'attempts')} + 1,"
            f" {column(d, 'next_attempt_at')} = %s, {column(d, 'leased_until')} = %s"
            f" FROM due, {table(e)} e"
            f" WHERE d.{column(d, 'id')} = due.id"
            f" AND e.{column(e, 'id')} = d.{column(d, 'endpoint')}" + _claim_returning(),
            [now, limit, lease_until, lease_until],
        )
        return [_claimed(row) for row in cursor.fetchall()]


def claim_delivery(
    delivery_id: uuid.UUID, *, now: datetime, lease_until: datetime
) -> ClaimedDelivery | None:
    """Lease one delivery, whatever its status, unless a sender holds it now (None then)."""
    d, e = WebhookDelivery, WebhookEndpoint
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table(d)} d SET {column(d, 'attempts')} = d.{column(d, 'attempts')} + 1,"
            f" {column(d, 'leased_until')} = %s,"
            f" {column(d, 'next_attempt_at')} = CASE WHEN d.{column(d, 'status')} = 'pending'"
            f" THEN %s ELSE d.{column(d, 'next_attempt_at')} END"
            f" FROM {table(e)} e"
            f" WHERE d.{column(d, 'id')} = %s AND e.{column(e, 'id')} = d.{column(d, 'endpoint')}"
            f" AND (d.{column(d, 'leased_until')} IS NULL OR d.{column(d, 'leased_until')} <= %s)"
            + _claim_returning(),
            [lease_until, lease_until, delivery_id, now],
        )
        row = cursor.fetchone()
    return None if row is None else _claimed(row)


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
