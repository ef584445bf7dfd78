"""Switchboard settings: one module, every value from the environment (12-factor).

With no DATABASE_URL / REDIS_URL the embedded defaults apply (a PostgreSQL server from a pip
wheel with its data in .pgdata/, see config/embedded_postgres.py; a channel layer on that
PostgreSQL's LISTEN/NOTIFY; a filesystem Celery broker), so a fresh clone runs with no services
installed. Reading these settings starts nothing: `bash scripts/run` starts the embedded server.
"""

import contextlib
import ipaddress
import os
import re
import secrets
from pathlib import Path

import dj_database_url
import redis.connection
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from config import embedded_postgres

BASE_DIR = Path(__file__).resolve().parent.parent

DEV_SECRET_KEY = "dev-only-insecure-switchboard-key-do-not-use-in-production"


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {raw!r}") from None


def env_secret(name: str, default: str = "") -> str:
    """Read NAME, or the contents of the file named by NAME_FILE (Docker/K8s secrets)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    return os.environ.get(name, default)


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if not raw:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_networks(name: str) -> list[str]:
    """A comma-separated list of IP addresses and CIDR networks (`10.0.0.5, 10.1.0.0/16`),
    each checked: a typo must not quietly trust nobody, or everybody."""
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(str(ipaddress.ip_network(item)))
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not an IP address or network ({exc})"
            ) from None
    return networks


def channel_layer_prefix(explicit: str, redis_url: str) -> str:
    """The Redis channel layer's prefix: `explicit` (CHANNEL_LAYER_PREFIX) when set, else one
    derived from the Redis database number, `switchboard.db<n>.`.

    Redis pub/sub ignores the database number: two deployments sharing one Redis on different
    databases (their cache, Celery queues and keys apart) would otherwise hear each other's
    live notices, under the same group names (`project-1-sessions`). Derived from the number,
    not from the PostgreSQL database's name: every process of one deployment uses the same
    Redis database (its Celery broker and cache must match), while it may reach PostgreSQL
    under different names (a pooler's alias), and a prefix that differs between a worker and a
    server would lose their notices silently.
    """
    if explicit:
        prefix = explicit
    else:
        try:
            db = redis.connection.parse_url(redis_url).get("db") or 0
        except ValueError as exc:
            raise ImproperlyConfigured(f"REDIS_URL: {exc}") from None
        prefix = f"switchboard.db{db}."
    # It begins every channel name the layer makes (`<prefix>specific.<32 hex>`), and channels
    # allows ASCII letters, digits, hyphens, underscores and periods, under 100 characters.
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,50}", prefix):
        raise ImproperlyConfigured(
            "CHANNEL_LAYER_PREFIX must be 1 to 50 ASCII letters, digits, '.', '_' or '-', "
            f"not {prefix!r}"
        )
    return prefix


def local_secret_key(path: Path) -> str:
    """A random key kept in a git-ignored file of this checkout (created on first use, mode 600):
    DEBUG off with no SECRET_KEY still never signs with a key everybody knows. Several servers
    behind one load balancer need the same SECRET_KEY: set it."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        key = secrets.token_urlsafe(50)
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(key + "\n")
        return path.read_text().strip()


# Off unless asked for (scripts/run turns it on for the demo): DEBUG's technical pages list every
# URL pattern and setting.
DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_secret("SECRET_KEY", "")
if not SECRET_KEY:
    SECRET_KEY = DEV_SECRET_KEY if DEBUG else local_secret_key(BASE_DIR / ".secret_key")
if not DEBUG and SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must not be the development key when DEBUG is off.")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",  # first, so `runserver` serves ASGI (websockets included)
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django.contrib.postgres",  # GinIndex and the jsonb operator classes of the models
    "django_htmx",
    "channels",
    "django_celery_beat",
    "ninja",
    # The floors, lowest first: each app imports only the ones above it in this list.
    "core",
    "sessions_app",
    "tasks_app",
    "handoffs_app",
    "retention_app",
    "switchboard",
]

MIDDLEWARE = [
    # First: every log line of a request carries its id, and latency counts the whole stack.
    "config.middleware.RequestIdMiddleware",
    "config.middleware.RequestMetricsMiddleware",
    # Then these, so their headers land on every answer, the API's early refusals included.
    "config.middleware.RateLimitHeadersMiddleware",
    "config.middleware.ContentSecurityPolicyMiddleware",
    "config.middleware.PermissionsPolicyMiddleware",
    "config.middleware.ApiBodyLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files from the ASGI server itself (no separate web server needed to run it).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Before CommonMiddleware: the friendly 404 page with DEBUG on too, after APPEND_SLASH.
    "config.middleware.FriendlyNotFoundMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.DashboardDomainErrorMiddleware",
]
# Left out of the stack that serves the agent API (config/handlers.py): an API request carries
# an API key, not a session, is exempt from CSRF, and is answered in JSON, never a page.
# Nothing that sets a header is here.
SWITCHBOARD_DASHBOARD_ONLY_MIDDLEWARE = [
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "config.middleware.FriendlyNotFoundMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.DashboardDomainErrorMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
# Plain HTTP behind a WSGI server in production (README, "Production"); config/asgi.py runs the
# same handler inside the ASGI server for the one-process run.
WSGI_APPLICATION = "config.wsgi.application"
# HTTP paths (regexes, matched from the start of the path) served by Django's ASGI handler, not
# its WSGI one: responses that stream or wait, which must hold no thread while they do.
# Everything else over HTTP goes through WSGI, a third of the server CPU per request. A reverse
# proxy in front of separate ASGI and WSGI servers must route the same paths (README).
SWITCHBOARD_ASYNC_HTTP_PATHS = [
    # The session export (a million-event session streams for seconds).
    r"^/api/v1/sessions/[^/]+/export$",
    r"^/sessions/[^/]+/export\.jsonl$",
    # The handoff long-poll (GET with ?wait=): a waiting agent holds no thread. config.asgi's
    # dispatcher sends it to config.longpoll first (Django's ASGI handler keeps a thread per
    # request); this entry is for a reverse proxy in front of separate WSGI/ASGI servers.
    r"^/api/v1/handoffs/[^/]+$",
]
# Threads per process running WSGI requests inside the ASGI server (config/asgi.py). As many
# as granian's blocking threads in the production split: more only contend for the GIL with
# each other and the event loop (10 threads served a 32-agent fleet 0.77x as fast as the split,
# at 1.28x the CPU per append; 4, within a few percent of it: bench/api_ab.py
# --baseline-server granian-wsgi). Long polls and streaming exports hold none of them; an
# artifact's upload over the buffered body size, or its download, holds one while it streams.
SWITCHBOARD_WSGI_THREADS = env_int("SWITCHBOARD_WSGI_THREADS", 4)

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "switchboard.context_processors.handoff_nav",
                "core.context_processors.live_feed",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------------------------
# PostgreSQL always. With DATABASE_URL unset: the embedded server (config/embedded_postgres.py),
# over its Unix socket in .pgdata/, database `switchboard`, user postgres. Settings only point at
# it; `bash scripts/run` (or `python -m config.embedded_postgres start`) starts it.
DATABASE_URL = env_str("DATABASE_URL") or embedded_postgres.database_url()
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend with a pool that fails fast while the server is unreachable (a 503 at
    # once, not after DB_POOL_TIMEOUT) and resumes with it: config/db/base.py.
    DATABASES["default"]["ENGINE"] = "config.db"
    # Set beside the URL's own query options (the embedded URL names its socket folder as ?host=).
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    # Django's psycopg pool: no connection set-up per request (DESIGN.md, performance).
    _options["pool"] = {
        "min_size": env_int("DB_POOL_MIN", 2),
        "max_size": env_int("DB_POOL_MAX", 20),
        "timeout": env_int("DB_POOL_TIMEOUT", 10),
    }
    # Statements run through core.storage.server_bound_cursor (the API's hot fixed SQL) are
    # prepared on their second run on a connection: PostgreSQL plans them once per connection.
    # Django's own queries are never prepared (they bind client-side). DB_PREPARED_STATEMENTS=off
    # behind a pooler that cannot keep them (PgBouncer before 1.21 in transaction mode).
    _options["prepare_threshold"] = 2 if env_bool("DB_PREPARED_STATEMENTS", True) else None
    # No JIT compilation: every query here is short, and a plan with a large estimated cost (the
    # sessions list's text search with another filter) would spend ~0.5 s compiling before
    # answering in 30 ms (bench/dashboard.py). DB_JIT=on restores it.
    _options["options"] = f"-c jit={'on' if env_bool('DB_JIT', False) else 'off'}"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: channel layer, Celery broker, cache ------------------------------------------
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            # Redis pub/sub: a group send is one PUBLISH (0.23 ms of CPU for a session's two
            # groups, against 1.04 ms for the list-based layer's ZREMRANGEBYSCORE, ZRANGE and
            # script per group; every append sends one). Live notices are courtesies to open
            # pages, which catch up from the database; nothing needs them kept for a
            # consumer that is not listening.
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [{"address": REDIS_URL, "socket_timeout": 30}],
                # One deployment's channel names apart from another's on the same Redis
                # (core.realtime's publisher reads it from here too).
                "prefix": channel_layer_prefix(env_str("CHANNEL_LAYER_PREFIX"), REDIS_URL),
            },
        }
    }
    # The cache answers in well under a millisecond; its users (the API rate limit, the sign-in
    # throttle, the overview's chart) carry on without it when it fails. A Redis that accepts
    # connections but never answers (hung, paused, a black-holed network) must fail them fast
    # too, not hang every request: redis-py waits forever by default.
    _cache_timeout = env_int("REDIS_CACHE_TIMEOUT_MS", 500) / 1000
    CACHES = {
        "default": {
            # Django's Redis cache with one connection pool per process (core/cache.py).
            "BACKEND": "core.cache.SharedPoolRedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "switchboard"),
            "OPTIONS": {
                "socket_connect_timeout": _cache_timeout,
                "socket_timeout": _cache_timeout,
            },
        }
    }
    CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
else:
    # No Redis (the embedded default): live notices travel through PostgreSQL's LISTEN/NOTIFY
    # (core/notify_layer.py), so what the Celery worker and beat change (a lapsed claim, an
    # overdue handoff, an archived session, a retention run) reaches pages served by another
    # process. Chosen over relaying the workers' outbox rows from the server process, which
    # would carry outboxed events only (not a job's appended events or audit entries, nor
    # wake an agent's long-poll) and needs a poll or a NOTIFY anyway; and over channels-postgres
    # (a table row per member per send, a second database alias: core/notify_layer.py says
    # why). Each send is one NOTIFY on the sender's connection; each server process holds one
    # more connection, listening. SWITCHBOARD_CHANNEL_LAYER=memory keeps every notice in the
    # process that made it (a database behind a pooler that cannot LISTEN, such as PgBouncer in
    # transaction mode): pages then say they are only partly live.
    _layer = env_str("SWITCHBOARD_CHANNEL_LAYER", "postgres")
    if _layer == "postgres":
        CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "core.notify_layer.PostgresNotifyChannelLayer",
                "CONFIG": {"database": "default"},
            }
        }
    elif _layer == "memory":
        CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    else:
        raise ImproperlyConfigured(
            f"SWITCHBOARD_CHANNEL_LAYER must be postgres or memory, not {_layer!r}"
        )
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
    _broker_dir = Path(env_str("CELERY_FILESYSTEM_BROKER_DIR", str(BASE_DIR / ".celery-broker")))
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # The same folder in and out: producer and worker run on one machine.
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
    if CELERY_BROKER_URL == "filesystem://":
        for _folder in ("queue", "processed", "control"):
            (_broker_dir / _folder).mkdir(parents=True, exist_ok=True)
        # kombu's filesystem transport, polling the folder every 0.1 s and letting a worker
        # that is asked to stop leave its loop within 0.25 s (config/celery_shutdown.py).
        CELERY_BROKER_TRANSPORT = "config.celery_shutdown:Transport"

# --- Celery ---------------------------------------------------------------------------------
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True  # our jobs are idempotent: redeliver after a crash (invariant 9)
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 600)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 540)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's timer, woken when the worker stops, not up to 1 s later (config/celery_shutdown.py).
CELERY_WORKER_TIMER = "config.celery_shutdown:Timer"
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# The Celery queue core.deliver_webhooks runs on (its on-commit kicks and its beat entry).
SWITCHBOARD_WEBHOOK_QUEUE = env_str("SWITCHBOARD_WEBHOOK_QUEUE", "celery")
# The Celery queue the retention jobs run on (beat's entries and the page's "Run retention now").
SWITCHBOARD_RETENTION_QUEUE = env_str("SWITCHBOARD_RETENTION_QUEUE", "celery")
# A run queued from the retention page that no worker has taken for this long is flagged there
# (no worker consumes the retention queue, or they are all busy).
SWITCHBOARD_RETENTION_UNCLAIMED_SECONDS = env_int("SWITCHBOARD_RETENTION_UNCLAIMED_SECONDS", 120)
# Declared here, in code; django-celery-beat's DatabaseScheduler copies these entries into its
# PeriodicTask rows when beat starts (admins can still pause one in the admin).
CELERY_BEAT_SCHEDULE = {
    # A waiting step's deadline is honoured to within this interval.
    "tasks_app: expire step deadlines": {
        "task": "tasks_app.expire_step_deadlines",
        "schedule": env_int("SWITCHBOARD_DEADLINE_CHECK_SECONDS", 30),
    },
    # A lapsed claim returns its handoff to the queue within this interval.
    "handoffs_app: expire leases": {
        "task": "handoffs_app.expire_leases",
        "schedule": env_int("SWITCHBOARD_HANDOFF_LEASE_CHECK_SECONDS", 15),
    },
    # Overdue marking, priority raise and expiry of unanswered handoffs.
    "handoffs_app: SLA": {
        "task": "handoffs_app.enforce_sla",
        "schedule": env_int("SWITCHBOARD_HANDOFF_SLA_SECONDS", 30),
    },
    # The digests of waiting handoffs (handoffs_app.services.digest): each project's own
    # interval (15 min, hourly, daily) is honoured to within this check.
    "handoffs_app: digests": {
        "task": "handoffs_app.send_digests",
        "schedule": env_int("SWITCHBOARD_HANDOFF_DIGEST_CHECK_SECONDS", 60),
    },
    # Webhook deliveries are kicked on commit; this picks up retries and any missed kick.
    "core: deliver webhooks": {
        "task": "core.deliver_webhooks",
        "schedule": env_int("SWITCHBOARD_WEBHOOK_POLL_SECONDS", 5),
        "options": {"queue": SWITCHBOARD_WEBHOOK_QUEUE},
    },
    # Outbox rows a crash or a Redis outage left unsent reach live pages within this interval.
    "core: relay outbox": {
        "task": "core.relay_outbox",
        "schedule": env_int("SWITCHBOARD_OUTBOX_RELAY_SECONDS", 10),
    },
    # Close idle, archive closed, delete expired sessions (retention_app, per project policy).
    "retention_app: enforce retention": {
        "task": "retention_app.enforce_retention",
        "schedule": env_int("SWITCHBOARD_RETENTION_SECONDS", 600),
        "options": {"queue": SWITCHBOARD_RETENTION_QUEUE},
    },
    # Compact the transient events of old closed/archived sessions.
    "retention_app: compact sessions": {
        "task": "retention_app.compact_sessions",
        "schedule": env_int("SWITCHBOARD_COMPACTION_SECONDS", 900),
        "options": {"queue": SWITCHBOARD_RETENTION_QUEUE},
    },
}
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# --- Auth, i18n, static -------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"
# An invitation's link (core.services.invitations) is a Django password-reset token: it works
# once and expires this many seconds after its e-mail was sent (Django's default: 3 days).
PASSWORD_RESET_TIMEOUT = env_int("PASSWORD_RESET_TIMEOUT", 3 * 24 * 3600)

# --- E-mail (invitations) -------------------------------------------------------------------
# EMAIL_HOST set: SMTP through it. Unset: with DEBUG on (scripts/run) the console backend, which
# prints each e-mail in the server's output; with DEBUG off SMTP to localhost:25 (a local mail
# server), so a deployment that forgot EMAIL_HOST says the e-mail could not be sent rather than
# printing links into its logs. EMAIL_BACKEND overrides either (the tests' servers use Django's
# file-based backend, with EMAIL_FILE_PATH).
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)  # STARTTLS, usually port 587
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)  # TLS from the start, usually port 465
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("Set EMAIL_USE_TLS or EMAIL_USE_SSL, not both")
EMAIL_PORT = env_int("EMAIL_PORT", 587 if EMAIL_USE_TLS else 465 if EMAIL_USE_SSL else 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD")
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)  # seconds: the admin's request waits for the send
EMAIL_BACKEND = env_str("EMAIL_BACKEND") or (
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG and not env_str("EMAIL_HOST")
    else "django.core.mail.backends.smtp.EmailBackend"
)
EMAIL_FILE_PATH = env_str("EMAIL_FILE_PATH") or None
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "Switchboard <switchboard@localhost>")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy on every response (config.middleware.ContentSecurityPolicyMiddleware,
# which adds this request's ws:// or wss:// origin to connect-src for the live updates). Strict:
# no inline script, style or event handler anywhere (static/js and static/css hold them; htmx's
# own indicator <style> is turned off in the htmx-config meta tag). data: is for the favicon
# placeholder and Swagger UI's icons on /api/v1/docs.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}
# Powerful browser features the dashboard never uses, off for it and anything it could frame
# (config.middleware.PermissionsPolicyMiddleware). Only names Chromium knows: an unknown one is
# logged as an error in the console.
PERMISSIONS_POLICY: dict[str, list[str]] = {
    feature: []
    for feature in (
        "accelerometer",
        "autoplay",
        "camera",
        "display-capture",
        "encrypted-media",
        "geolocation",
        "gyroscope",
        "hid",
        "idle-detection",
        "magnetometer",
        "microphone",
        "midi",
        "payment",
        "publickey-credentials-get",
        "screen-wake-lock",
        "serial",
        "usb",
        "xr-spatial-tracking",
    )
}
# Behind a load balancer that terminates TLS: trust its X-Forwarded-Proto, so request.scheme is
# https and CSRF's origin check matches (also list the https origin in CSRF_TRUSTED_ORIGINS).
if env_bool("BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# The reverse proxies and load balancers whose X-Forwarded-For is believed (IPs and CIDR
# networks); empty, the default: none is, and the client is the connection's other end. Read by
# core.client_address, the one place that decides a request's client address (the sign-in
# throttle counts by it); uvicorn runs with --no-proxy-headers so that it decides nothing.
SWITCHBOARD_TRUSTED_PROXIES = env_networks("SWITCHBOARD_TRUSTED_PROXIES")
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)

# --- Switchboard ----------------------------------------------------------------------------
# Bodies over these limits are refused with 413 before they are parsed.
SWITCHBOARD_MAX_BODY_BYTES = env_int("SWITCHBOARD_MAX_BODY_BYTES", 1024 * 1024)
SWITCHBOARD_MAX_EVENT_BYTES = env_int("SWITCHBOARD_MAX_EVENT_BYTES", 256 * 1024)
SWITCHBOARD_MAX_BATCH_EVENTS = env_int("SWITCHBOARD_MAX_BATCH_EVENTS", 1000)
# One blob (POST /sessions/{id}/blobs, sent base64 in a JSON body: 4 bytes per 3, so the
# default leaves room under SWITCHBOARD_MAX_BODY_BYTES). Larger values are stored in pieces.
SWITCHBOARD_MAX_BLOB_BYTES = env_int("SWITCHBOARD_MAX_BLOB_BYTES", 512 * 1024)
# A snapshot is taken automatically every N events, so state at any seq folds at most N events.
SWITCHBOARD_SNAPSHOT_EVERY = env_int("SWITCHBOARD_SNAPSHOT_EVERY", 200)
# Automatic snapshots are taken by a background thread of the appending process, after the
# append's response (sessions_app/services/snapshots.py); false takes them after commit inside
# the request. At most SWITCHBOARD_SNAPSHOT_BACKLOG wait per process: past that the request
# takes its own, so a snapshot never lags the log by more than that many intervals.
SWITCHBOARD_SNAPSHOT_IN_BACKGROUND = env_bool("SWITCHBOARD_SNAPSHOT_IN_BACKGROUND", True)
SWITCHBOARD_SNAPSHOT_BACKLOG = env_int("SWITCHBOARD_SNAPSHOT_BACKLOG", 32)
# The overview calls a task stuck when a step of it failed for good, waits past its deadline,
# or has run (or waited for its retry) this many minutes without an update.
SWITCHBOARD_TASK_STUCK_MINUTES = env_int("SWITCHBOARD_TASK_STUCK_MINUTES", 30)


# Retention: the policy of a project that has not saved one (seconds; None = never).
# Per deployment: SWITCHBOARD_RETENTION_<FIELD>_SECONDS, "" or "never" for never.
def _retention_default(name: str, default: int | None) -> int | None:
    raw = os.environ.get(f"SWITCHBOARD_RETENTION_{name.upper()}_SECONDS")
    if raw is None:
        return default
    if raw.strip().lower() in {"", "never"}:
        return None
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"SWITCHBOARD_RETENTION_{name.upper()}_SECONDS: {exc}") from exc


_DAY = 24 * 3600
SWITCHBOARD_RETENTION_DEFAULTS: dict[str, int | None] = {
    "close_idle_after": _retention_default("close_idle_after", _DAY),
    "close_paused_after": _retention_default("close_paused_after", 7 * _DAY),
    "archive_closed_after": _retention_default("archive_closed_after", 7 * _DAY),
    "compact_after": _retention_default("compact_after", 30 * _DAY),
    "delete_after": _retention_default("delete_after", None),
    "outcome_compact_after": _retention_default("outcome_compact_after", 90 * _DAY),
    "outcome_delete_after": _retention_default("outcome_delete_after", None),
    "artifact_max_age": _retention_default("artifact_max_age", None),
}
# The compaction summariser: a dotted path to a callable (previous_summary, events) -> str.
SWITCHBOARD_SUMMARISER = env_str(
    "SWITCHBOARD_SUMMARISER", "retention_app.summarisers.deterministic_summary"
)
# Sessions per batch (each batch one short transaction) and batches per run of each job.
SWITCHBOARD_RETENTION_BATCH = env_int("SWITCHBOARD_RETENTION_BATCH", 100)
SWITCHBOARD_RETENTION_MAX_BATCHES = env_int("SWITCHBOARD_RETENTION_MAX_BATCHES", 50)
# Requests per minute per API key; 0 turns throttling off. 60000 (1,000/s on average): one
# busy agent process makes thousands a minute (a LangGraph process checkpointing every step made
# about 8,500), and one key often serves many such processes, so the limit sits well above a
# busy key's real traffic; what it stops is a runaway loop or a leaked key flooding the server
# for minutes. One key at the limit keeps about three cores busy (~3 ms of server CPU per
# request, bench/ingest.py): deployments that share a server between teams set it lower.
SWITCHBOARD_API_RATE_PER_MINUTE = env_int("SWITCHBOARD_API_RATE_PER_MINUTE", 60000)
# Requests per minute per task made with the task's signal token (no API key); 0 = off. A
# webhook sender delivers a handful of signals per task, with retries; 60 leaves room for those
# and keeps a leaked token (it may travel in a URL) from flooding the task's signal table.
SWITCHBOARD_SIGNAL_RATE_PER_MINUTE = env_int("SWITCHBOARD_SIGNAL_RATE_PER_MINUTE", 60)
# Dashboard sign-in: failed attempts allowed per account and per client address in each window
# (clock-aligned, SWITCHBOARD_LOGIN_WINDOW_SECONDS); past either, the sign-in page answers 429
# until the window ends. Only failures count, so an office behind one address signs in freely.
SWITCHBOARD_LOGIN_FAILURES_PER_ACCOUNT = env_int("SWITCHBOARD_LOGIN_FAILURES_PER_ACCOUNT", 5)
SWITCHBOARD_LOGIN_FAILURES_PER_ADDRESS = env_int("SWITCHBOARD_LOGIN_FAILURES_PER_ADDRESS", 20)
SWITCHBOARD_LOGIN_WINDOW_SECONDS = env_int("SWITCHBOARD_LOGIN_WINDOW_SECONDS", 15 * 60)
# Exports running at once per project (across all server processes); past it, 429 with
# Retry-After. Each holds a database connection of its own while it streams, and a 300,000-event
# export keeps a core busy: without a bound, four of them made other requests 16x slower.
SWITCHBOARD_EXPORTS_PER_PROJECT = env_int("SWITCHBOARD_EXPORTS_PER_PROJECT", 2)
if not 1 <= SWITCHBOARD_EXPORTS_PER_PROJECT <= 255:
    raise ImproperlyConfigured("SWITCHBOARD_EXPORTS_PER_PROJECT must be between 1 and 255")
# An API key's last_used_at is written at most this often (never per request: hot path).
SWITCHBOARD_KEY_TOUCH_SECONDS = env_int("SWITCHBOARD_KEY_TOUCH_SECONDS", 60)
# Seconds a process may keep an API key it looked up (core/keycache.py): each request confirms
# it against the keys' epoch in Redis, so a revocation reaches every process at its next
# request; this bounds only a change whose epoch never reached Redis. 0: no cache.
SWITCHBOARD_API_KEY_CACHE_SECONDS = env_int("SWITCHBOARD_API_KEY_CACHE_SECONDS", 10)
DATA_UPLOAD_MAX_MEMORY_SIZE = SWITCHBOARD_MAX_BODY_BYTES
# Artifacts (PUT /api/v1/sessions/{id}/artifacts/{name}, sessions_app/services/artifacts.py):
# one file's bytes at most (its upload is refused with 413 past it, before or while it
# streams), and a project's stored artifact bytes at most (507 past it).
SWITCHBOARD_ARTIFACT_MAX_BYTES = env_int("SWITCHBOARD_ARTIFACT_MAX_BYTES", 100 * 1024 * 1024)
SWITCHBOARD_ARTIFACT_QUOTA_BYTES = env_int("SWITCHBOARD_ARTIFACT_QUOTA_BYTES", 10 * 1024**3)
# /metrics answers only with `Authorization: Bearer <this>`; unset, /metrics is 404 (off).
SWITCHBOARD_METRICS_TOKEN = env_secret("SWITCHBOARD_METRICS_TOKEN")
# Read by prometheus-client itself too: one shared folder for the web and worker processes.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR")
# /readyz gives PostgreSQL and Redis this long (seconds; PostgreSQL's connect takes 2 at least).
SWITCHBOARD_READYZ_TIMEOUT = float(env_int("SWITCHBOARD_READYZ_TIMEOUT", 2))

# Webhooks (core/webhooks.py, core/services/webhooks.py). A failed attempt is retried after
# BACKOFF_MS * 2^(attempt-1), capped at BACKOFF_MAX_MS, of which a random half is jitter; the
# delivery fails for good after MAX_ATTEMPTS attempts (defaults: 10 s, 20 s, … over ~3.5 h).
SWITCHBOARD_WEBHOOK_MAX_ATTEMPTS = env_int("SWITCHBOARD_WEBHOOK_MAX_ATTEMPTS", 12)
SWITCHBOARD_WEBHOOK_BACKOFF_MS = env_int("SWITCHBOARD_WEBHOOK_BACKOFF_MS", 10_000)
SWITCHBOARD_WEBHOOK_BACKOFF_MAX_MS = env_int("SWITCHBOARD_WEBHOOK_BACKOFF_MAX_MS", 3_600_000)
# Seconds one POST may take (connect and read); a worker's claim on a delivery outlives it.
SWITCHBOARD_WEBHOOK_TIMEOUT = float(env_int("SWITCHBOARD_WEBHOOK_TIMEOUT", 5))
# How long a sender's claim on a delivery lasts (at least twice the timeout, plus 5 s): a
# worker that dies mid-send leaves the delivery to be sent again this long after it started.
SWITCHBOARD_WEBHOOK_LEASE_SECONDS = env_int("SWITCHBOARD_WEBHOOK_LEASE_SECONDS", 60)
# Off (the default): endpoints on loopback, private, link-local or reserved addresses are
# refused, when created and again when a delivery resolves the host. On for development/tests.
SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS = env_bool(
    "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE_TARGETS", False
)

# Where people reach this Switchboard: the links of the handoff digests (e-mail, chat) and of
# invitations sent from a shell start with it (a beat job or a command has no request's host).
SWITCHBOARD_PUBLIC_URL = env_str("SWITCHBOARD_PUBLIC_URL", "http://127.0.0.1:8000")

NINJA_PAGINATION_MAX_LIMIT = 500

# text (default, for people) or json (one object per line, for a log pipeline). Either way each
# line logged during a request carries its X-Request-ID, and in a Celery job the task id.
LOG_FORMAT = env_str("LOG_FORMAT", "text")
if LOG_FORMAT not in {"text", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "core.logging.RequestIdFilter"}},
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {"()": "core.logging.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["request_id"],
            "formatter": LOG_FORMAT,
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        # httpx logs every webhook POST at INFO; deliveries and their attempts are in the database.
        "httpx": {"level": "WARNING"},
    },
}
# A worker replaces the root logger's handlers with its own text ones unless told not to.
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"
# Serve straight from the app folders while developing; from collectstatic output otherwise.
WHITENOISE_USE_FINDERS = DEBUG
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
# Artifacts' bytes: a folder under the project (the run command's default), or an S3-compatible
# bucket through django-storages (`pip install django-storages[s3]`) when a bucket is named; the
# credentials are boto3's own (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, or the instance role).
SWITCHBOARD_ARTIFACTS_S3_BUCKET = env_str("SWITCHBOARD_ARTIFACTS_S3_BUCKET")
if SWITCHBOARD_ARTIFACTS_S3_BUCKET:
    STORAGES["artifacts"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": SWITCHBOARD_ARTIFACTS_S3_BUCKET,
            "endpoint_url": env_str("SWITCHBOARD_ARTIFACTS_S3_ENDPOINT_URL") or None,
            "region_name": env_str("SWITCHBOARD_ARTIFACTS_S3_REGION") or None,
            "location": env_str("SWITCHBOARD_ARTIFACTS_S3_PREFIX"),
            # Every key is new (services.artifacts names them): no existence check per save.
            "file_overwrite": True,
            "default_acl": None,
            "querystring_auth": False,
        },
    }
else:
    STORAGES["artifacts"] = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {
            "location": env_str("SWITCHBOARD_ARTIFACTS_DIR", str(BASE_DIR / ".artifacts")),
        },
    }
