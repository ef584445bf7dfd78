"""Operability endpoints: /healthz, /readyz and /metrics (wired in config/urls.py).

None of them needs a signed-in user or an API key, and none touches the session or CSRF; they
are GET-only and answer JSON (metrics: Prometheus' text format).
"""

import hmac
from functools import cache

import psycopg
import redis
from django.conf import settings
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from . import metrics, storage
from .http import error_response, json_response
from .models import OutboxMessage


@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    """The process answers. Touches no database, so a database outage does not restart it."""
    return json_response({"status": "ok"})


@cache
def _migrations_on_disk() -> frozenset[tuple[str, str]]:
    """Every migration the code ships (read once: the files do not change under a process)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return frozenset(loader.disk_migrations)


def _check_database() -> tuple[dict[str, object], dict[str, object]]:
    """Connect afresh (not through the pool, whose wait is DB_POOL_TIMEOUT) with a short timeout."""
    timeout = settings.SWITCHBOARD_READYZ_TIMEOUT
    params = connections["default"].get_connection_params()
    # libpq counts connect_timeout in whole seconds, 2 at least.
    params["connect_timeout"] = max(2, int(timeout))
    params["options"] = (
        f"{params.get('options', '')} -c statement_timeout={int(timeout * 1000)}".strip()
    )
    try:
        with psycopg.connect(**params) as conn:
            applied = storage.applied_migrations(conn)
    except psycopg.Error as exc:
        failed = {"ok": False, "error": f"unreachable ({type(exc).__name__})"}
        return failed, {"ok": False, "error": "not checked: the database is unreachable"}
    missing = sorted(f"{app}.{name}" for app, name in _migrations_on_disk() - applied)
    if missing:
        return {"ok": True}, {"ok": False, "error": "not applied", "missing": missing[:20]}
    return {"ok": True}, {"ok": True}


def _check_redis() -> dict[str, object]:
    timeout = settings.SWITCHBOARD_READYZ_TIMEOUT
    client = redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=timeout, socket_timeout=timeout
    )
    try:
        client.ping()
    except redis.RedisError as exc:
        return {"ok": False, "error": f"unreachable ({type(exc).__name__})"}
    finally:
        client.close()
    return {"ok": True}


@require_safe
def readyz(request: HttpRequest) -> HttpResponse:
    """Ready for traffic: PostgreSQL answers with every migration applied; Redis answers (when
    REDIS_URL is set). 200 or 503, both with every check and the names of those that failed."""
    checks: dict[str, dict[str, object]] = {}
    checks["database"], checks["migrations"] = _check_database()
    if settings.REDIS_URL:
        checks["redis"] = _check_redis()
    failed = [name for name, result in checks.items() if not result["ok"]]
    body = {"status": "unavailable" if failed else "ok", "checks": checks, "failed": failed}
    return json_response(body, status=503 if failed else 200)


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus' text format; 404 unless SWITCHBOARD_METRICS_TOKEN is set, then Bearer only."""
    token = settings.SWITCHBOARD_METRICS_TOKEN
    if not token:
        return error_response(404, "not_found", "Metrics are off (SWITCHBOARD_METRICS_TOKEN).")
    given = request.headers.get("Authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        response = error_response(401, "unauthorized", "Send Authorization: Bearer <token>.")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = metrics.render()
    return HttpResponse(body, content_type=content_type)


def refresh_outbox_backlog() -> None:
    # Served by the partial index outbox_unsent: a handful of rows at any time.
    metrics.OUTBOX_BACKLOG.set(OutboxMessage.objects.filter(relayed_at__isnull=True).count())
