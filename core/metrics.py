"""Every Prometheus metric Switchboard exposes, defined here and nowhere else.

Faces and services only touch the objects below (an `inc()` or `observe()` on the hot path);
`/metrics` (core.health) renders them. Values computed from the database at scrape time (sessions
by status, paused sessions, outbox backlog) are refreshed by the `on_scrape` hooks just before
rendering: a core hook here, and one registered by sessions_app (which core cannot import).

Label values stay bounded: routes are URL patterns (never raw paths), event kinds and session
statuses are fixed lists, job names are the registered Celery task names.

Processes: each process keeps its own values. The web server's `/metrics` shows its own requests
and websockets; Celery jobs run in the worker's processes. To see job metrics, run the web server
and the workers on one host with PROMETHEUS_MULTIPROC_DIR set to one empty folder (cleared at
each start): prometheus-client then writes every process's values there and `/metrics` adds them
up (its multiprocess mode; gauges below declare how they combine).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _multiprocess

PREFIX = "switchboard_"

REQUEST_SECONDS = Histogram(
    PREFIX + "http_request_duration_seconds",
    "HTTP request latency, by URL route (the pattern, not the path), method and status.",
    ["route", "method", "status"],
)
EVENTS_APPENDED = Counter(
    PREFIX + "events_appended",
    "Events written to session logs (after commit), by kind.",
    ["kind"],
)
SESSIONS = Gauge(
    PREFIX + "sessions",
    "Sessions by lifecycle status, all projects (computed at scrape time).",
    ["status"],
    multiprocess_mode="mostrecent",
)
# There is no handoff model yet: a paused session is what waits for a human (or for its agent),
# so these two stand in for "open handoffs" and "oldest handoff wait" until handoffs exist.
PAUSED_SESSIONS = Gauge(
    PREFIX + "paused_sessions",
    "Sessions paused now (stand-in for open handoffs; computed at scrape time).",
    multiprocess_mode="mostrecent",
)
PAUSED_OLDEST_SECONDS = Gauge(
    PREFIX + "paused_session_oldest_age_seconds",
    "Seconds since the least recently changed paused session last changed "
    "(stand-in for the oldest handoff wait; 0 when none is paused).",
    multiprocess_mode="mostrecent",
)
OUTBOX_BACKLOG = Gauge(
    PREFIX + "outbox_unsent",
    "Outbox rows not yet relayed to live pages (computed at scrape time).",
    multiprocess_mode="mostrecent",
)
WEBSOCKETS = Gauge(
    PREFIX + "websocket_connections",
    "Open dashboard websocket connections (accepted, not yet closed).",
    multiprocess_mode="livesum",
)
HANDOFF_LONGPOLLS_WAITING = Gauge(
    PREFIX + "handoff_longpolls_waiting",
    "Agents' handoff long-polls waiting now (config/longpoll.py: no thread, no connection).",
    multiprocess_mode="livesum",
)
HANDOFF_LONGPOLLS_ENDED = Counter(
    PREFIX + "handoff_longpolls_ended",
    "Handoff long-poll waits ended, by how: resolved, timeout (the wait's S seconds passed), "
    "disconnected (the agent went away; nothing is answered), shutdown (the server began to stop; "
    "the current state is answered, as at a timeout).",
    ["how"],
)
JOB_SECONDS = Histogram(
    PREFIX + "job_duration_seconds",
    "Celery job runs and their durations, by task name and final state.",
    ["task", "state"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600),
)

_scrape_hooks: list[Callable[[], None]] = []


def on_scrape(hook: Callable[[], None]) -> Callable[[], None]:
    """Register a function that sets scrape-time gauges; run before each render."""
    if hook not in _scrape_hooks:
        _scrape_hooks.append(hook)
    return hook


def count_events(kinds: list[str]) -> None:
    # One labels() look-up and one increment per kind, not per event (a batch of 100 spent
    # a fiftieth of its server time here).
    for kind, count in collections.Counter(kinds).items():
        EVENTS_APPENDED.labels(kind).inc(count)


def render() -> tuple[bytes, str]:
    """The exposition (text format) and its content type, after refreshing scrape-time gauges."""
    for hook in _scrape_hooks:
        hook()
    registry: CollectorRegistry = REGISTRY
    if settings.PROMETHEUS_MULTIPROC_DIR:
        registry = CollectorRegistry()
        _multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return generate_latest(registry), CONTENT_TYPE_LATEST


# --- Celery jobs: task_prerun / task_postrun (connected in config/celery.py) -----------------
_job_started: dict[str, float] = {}


def job_started(task_id: str | None = None, **_: Any) -> None:
    if task_id:
        _job_started[task_id] = time.perf_counter()


def job_finished(
    task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any
) -> None:
    started = _job_started.pop(task_id or "", None)
    if started is None:
        return
    name = getattr(task, "name", None) or "unknown"
    JOB_SECONDS.labels(name, state or "UNKNOWN").observe(time.perf_counter() - started)
