#!/usr/bin/env python
"""The CPU one API request costs inside the Django process, beside GET /healthz, in one run;
and where it goes (issue 27 §1: "profile the single append end to end, server CPU").

    .venv/bin/python bench/request_cpu.py                      # ~1 min
    .venv/bin/python bench/request_cpu.py --profile append     # and the append's profile
    .venv/bin/python bench/request_cpu.py --smoke              # tiny, one round (CI)

Requests are handed to config.wsgi.application (what the production split's WSGI server
calls, after-response work included: the response is closed as a server closes it) in this
one process: no HTTP client, no server, no sockets but PostgreSQL's and Redis's. So the CPU
measured (time.process_time: this process, waiting for PostgreSQL and Redis excluded) is
Django's, the project's and the drivers' own, with nothing of a load generator sharing the
cores, and it stays put when other work runs on the machine (latency does not; it is printed
for reference). PostgreSQL's own CPU is not in it (bench/ingest.py measures it).

Operations, on a scratch database (default `switchboard_bench_request_cpu`, recreated and
migrated) with Redis (REDIS_URL, default redis://127.0.0.1:6379/0) as in production:

- healthz: GET /healthz, the whole middleware stack and a view that does nothing: the floor
  every figure is divided by;
- append: POST …/events with one message event (the single append);
- batch100: POST …/events with 100 message events (bench/ingest.py's batch);
- last50: GET …/events?order=desc&limit=50 of a session of `--events` events;
- keyed50: the same with key_prefix=oai: (how the OpenAI Agents adapter reads its items);
- open3: GET /sessions by three external_ids with include=state&include=events (how the ADK
  adapter's get_session opens a session and its shared state in one request);
- by_metadata: GET /sessions by metadata values with include=state (the ADK list_sessions);
- state: GET …/state?at_seq=<a random seq> of the read session (time travel);
- fork: POST …/fork at a random seq of the read session (copy-on-write: no event copied);
- lookup_json / lookup_bytes: POST …/blobs/lookup of `--blobs` blobs of about 330 bytes with
  their data (a fresh process opening a LangGraph thread of that many messages), answered as
  JSON with base64, or as bytes (Accept: application/vnd.switchboard.blobs); `--n` / 50 calls
  a round;
- api_noop: a plain Django view that answers `{}` through the API's own handler (its shorter
  middleware stack): what any API request costs before it does anything;
- floor_append: the least a single append can cost on the required stack (Django, the API's
  middleware, django-ninja, psycopg): a django-ninja endpoint defined here, with a body schema
  of events, that runs one INSERT … RETURNING on a table of its own and answers its seq in
  JSON; no key, no rate count, no text checks, no live push. The real append's ratio to it is
  what the project itself adds; floor_append's ratio to healthz is what the stack costs.

Rounds alternate the operations (so a burst of other work spreads over all of them); the
figures are the median round's CPU per request and its ratio to healthz's. With --profile OP,
cProfile (timer: process CPU) then runs OP `--n` times more and prints the functions with the
most CPU of their own and the most in all (`--top`). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import itertools
import json
import os
import pstats
import random
import statistics
import sys
import time
import uuid
from base64 import b64encode
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, add_smoke_flag, pg_url, scratch_database, scratch_name, smoke  # noqa: E402

SECRET_KEY = "bench-only-secret-key-not-for-production-0123456789"
OPERATIONS = (
    "healthz",
    "api_noop",
    "floor_append",
    "append",
    "batch100",
    "last50",
    "keyed50",
    "open3",
    "by_metadata",
    "state",
    "fork",
    "lookup_json",
    "lookup_bytes",
)
# Each of these reads `--blobs` blobs, so a round makes fewer of them: `--n` / this.
HEAVY = {"lookup_json": 50, "lookup_bytes": 50}
FLOOR_URLCONF = "bench_request_cpu_floor_urls"


class InProcess:
    """config.wsgi.application called as a WSGI server calls it, with one API key."""

    def __init__(self, application: Callable[..., object], key: str) -> None:
        self.application = application
        self.key = key

    def call(
        self, method: str, path: str, body: object = None, query: str = "", accept: str = "*/*"
    ) -> bytes:
        data = b"" if body is None else json.dumps(body).encode()
        environ = {
            "HTTP_ACCEPT": accept,
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "HTTP_HOST": "127.0.0.1:8000",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_AUTHORIZATION": f"Bearer {self.key}",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(data)),
            "wsgi.input": io.BytesIO(data),
            "wsgi.errors": sys.stderr,
            "wsgi.url_scheme": "http",
        }
        status: list[str] = []

        def start_response(line: str, headers: object, exc_info: object = None) -> None:
            status.append(line)

        response = self.application(environ, start_response)
        try:
            content = b"".join(response)  # type: ignore[call-overload]
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                close()  # request_finished and the after-response work, as a server does
        if not status[0].startswith("2"):
            raise RuntimeError(f"{method} {path}?{query}: {status[0]} {content[:300]!r}")
        return content


def floor_application() -> Callable[..., object]:
    """The API's handler (config.handlers.ApiWSGIHandler: its middleware, its settings) routing
    to FLOOR_URLCONF, a module built here: the floor endpoints exist only in this process."""
    import types

    from django.db import connection
    from django.http import HttpRequest, HttpResponse
    from django.urls import path
    from ninja import NinjaAPI, Schema

    from config.handlers import ApiWSGIHandler

    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS bench_floor_event (seq bigserial PRIMARY KEY, "
            "session_id uuid NOT NULL, kind text NOT NULL, role text, content jsonb NOT NULL)"
        )

    class FloorEvent(Schema):
        kind: str
        role: str | None = None
        content: dict[str, object] = {}

    class FloorAppend(Schema):
        events: list[FloorEvent]

    FloorAppend.model_rebuild(_types_namespace={"FloorEvent": FloorEvent})

    floor_api = NinjaAPI(urls_namespace="bench-floor", docs_url=None, openapi_url=None)

    def floor_append(request: HttpRequest, session_id: uuid.UUID, body: FloorAppend) -> object:
        event = body.events[0]
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO bench_floor_event (session_id, kind, role, content) "
                "VALUES (%s, %s, %s, %s) RETURNING seq",
                [session_id, event.kind, event.role, json.dumps(event.content)],
            )
            (seq,) = cursor.fetchone()
        return {"events": [{"seq": seq}]}

    # This module's annotations are strings (from __future__), and the schemas are local:
    # pydantic and django-ninja read the types, so give them as objects.
    floor_append.__annotations__ = {
        "request": HttpRequest,
        "session_id": uuid.UUID,
        "body": FloorAppend,
        "return": object,
    }
    floor_api.post("/sessions/{session_id}/events")(floor_append)

    def api_noop(request: HttpRequest) -> HttpResponse:
        return HttpResponse(b"{}", content_type="application/json")

    module = types.ModuleType(FLOOR_URLCONF)
    module.urlpatterns = [  # type: ignore[attr-defined]
        path("api/v1/noop", api_noop),
        path("api/v1/floor/", floor_api.urls),
    ]
    sys.modules[FLOOR_URLCONF] = module

    class FloorHandler(ApiWSGIHandler):
        def get_response(self, request: HttpRequest) -> HttpResponse:
            request.urlconf = FLOOR_URLCONF
            return super().get_response(request)

    return FloorHandler()


def set_up(args: argparse.Namespace) -> tuple[InProcess, dict[str, Callable[[], bytes]]]:
    os.environ.update(
        {
            "DATABASE_URL": pg_url(args.db),
            "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "false",
            "SECRET_KEY": SECRET_KEY,
            "LOG_LEVEL": "WARNING",
            "CACHE_KEY_PREFIX": f"switchboard-bench-{args.db}",
            # Counted on every request (its real cost), never refused.
            "SWITCHBOARD_API_RATE_PER_MINUTE": "1000000000",
        }
    )
    print(f"  · database {args.db} (recreated, migrated)", file=sys.stderr, flush=True)
    scratch_database(args.db)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from config.wsgi import application
    from core.actors import Actor
    from core.services.projects import create_api_key, create_project

    project = create_project(f"request cpu {uuid.uuid4().hex[:6]}")
    _, key = create_api_key(project, name="bench", actor=Actor.system("bench"))
    api = InProcess(application, key)
    floor = InProcess(floor_application(), key)

    def new_session(**fields: object) -> str:
        body = api.call("POST", "/api/v1/sessions", {"agent": "bench", **fields})
        return str(json.loads(body)["id"])

    message = {"kind": "message", "role": "user", "content": {"text": "where is my order? " * 8}}
    appended = new_session(title="appends")
    read = new_session(title="reads")
    for start in range(0, args.events, 100):
        events = [
            {
                **message,
                "idempotency_key": f"oai:item:{n}",
                "content": {"item": {"role": "user", "content": f"message {n} " * 12}},
            }
            for n in range(start, min(start + 100, args.events))
        ]
        api.call("POST", f"/api/v1/sessions/{read}/events", {"events": events})
    refs = [f"bench:{uuid.uuid4().hex[:8]}:{n}" for n in range(3)]
    for ref in refs:
        new_session(external_id=ref, metadata={"adk": "session", "app_name": "bench"})
    batch = [
        {**message, "content": {"text": f"message {n}: " + "where is my order? " * 8}}
        for n in range(100)
    ]
    blobs = [f"message {n}: {'where is my order? ' * 16}".encode() for n in range(args.blobs)]
    for start in range(0, len(blobs), 1000):
        api.call(
            "POST",
            f"/api/v1/sessions/{read}/blobs",
            {"blobs": [{"data": b64encode(b).decode()} for b in blobs[start : start + 1000]]},
        )
    names = [hashlib.sha256(b).hexdigest() for b in blobs]
    lookup = {"sha256": names, "data": True}
    by_refs = "&".join(f"external_id={ref}" for ref in refs)
    events = f"/api/v1/sessions/{read}/events"
    # Random seqs of the read session, drawn in turn (seeded: runs compare).
    seqs = itertools.cycle(
        random.Random(3).sample(range(1, args.events + 1), min(args.events, 500))
    )
    operations: dict[str, Callable[[], bytes]] = {
        "healthz": lambda: api.call("GET", "/healthz"),
        "api_noop": lambda: floor.call("GET", "/api/v1/noop"),
        "floor_append": lambda: floor.call(
            "POST", f"/api/v1/floor/sessions/{appended}/events", {"events": [message]}
        ),
        "append": lambda: api.call(
            "POST", f"/api/v1/sessions/{appended}/events", {"events": [message]}
        ),
        "batch100": lambda: api.call(
            "POST", f"/api/v1/sessions/{appended}/events", {"events": batch}
        ),
        "last50": lambda: api.call("GET", events, query="order=desc&limit=50"),
        "keyed50": lambda: api.call("GET", events, query="key_prefix=oai:&order=desc&limit=58"),
        "open3": lambda: api.call(
            "GET", "/api/v1/sessions", query=by_refs + "&include=state&include=events"
        ),
        "by_metadata": lambda: api.call(
            "GET",
            "/api/v1/sessions",
            query="metadata.adk=session&metadata.app_name=bench&include=state&limit=200",
        ),
        "state": lambda: api.call(
            "GET", f"/api/v1/sessions/{read}/state", query=f"at_seq={next(seqs)}"
        ),
        "fork": lambda: api.call("POST", f"/api/v1/sessions/{read}/fork", {"at_seq": next(seqs)}),
        "lookup_json": lambda: api.call("POST", f"/api/v1/sessions/{read}/blobs/lookup", lookup),
        "lookup_bytes": lambda: api.call(
            "POST",
            f"/api/v1/sessions/{read}/blobs/lookup",
            lookup,
            accept="application/vnd.switchboard.blobs",
        ),
    }
    return api, operations


def calls(name: str, n: int) -> int:
    return max(1, n // HEAVY.get(name, 1))


def measure(operation: Callable[[], bytes], n: int) -> tuple[float, float]:
    """CPU and wall ms per call over `n` calls."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(n):
        operation()
    return (time.process_time() - cpu) * 1000 / n, (time.perf_counter() - wall) * 1000 / n


def profile(operation: Callable[[], bytes], n: int, top: int) -> None:
    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    for _ in range(n):
        operation()
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    rows = []
    for (filename, line, name), (_, calls, own, inclusive, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = filename.replace(str(ROOT) + "/", "")
        where = where.split("site-packages/")[-1]
        rows.append((own, inclusive, calls, f"{name} ({where}:{line})"))
    print(f"\nPROFILE ({n} calls; % of the CPU profiled; the profiler itself inflates it)")
    print("  most CPU of their own:")
    for own, _, calls, label in sorted(rows, reverse=True)[:top]:
        print(f"    {100 * own / total:5.1f}%  {calls / n:6.1f}/call  {label}")
    print("  most CPU in all (inclusive):")
    for _, inclusive, calls, label in sorted(rows, key=lambda r: -r[1])[:top]:
        print(f"    {100 * inclusive / total:5.1f}%  {calls / n:6.1f}/call  {label}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default=scratch_name("switchboard_bench_request_cpu"))
    parser.add_argument("--events", type=int, default=1000, help="events of the read session")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--n", type=int, default=300, help="calls per operation and round")
    parser.add_argument("--blobs", type=int, default=5000, help="blobs one lookup reads")
    parser.add_argument("--profile", choices=OPERATIONS, action="append", default=[])
    parser.add_argument("--top", type=int, default=25)
    add_smoke_flag(parser)
    args = parser.parse_args()
    smoke(args, events=120, rounds=1, n=5, top=5, blobs=20)
    _, operations = set_up(args)
    for name, operation in operations.items():  # warm: prepared statements, the key cache
        for _ in range(min(calls(name, args.n), 20)):
            operation()
    load = os.getloadavg()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in operations}
    for _ in range(args.rounds):
        for name, operation in operations.items():
            samples[name].append(measure(operation, calls(name, args.n)))
    load_after = os.getloadavg()

    def median_cpu(name: str) -> float:
        return statistics.median(cpu for cpu, _ in samples[name])

    floor = median_cpu("healthz")
    print(
        f"\nCPU per request in the Django process (config.wsgi.application, Redis on), "
        f"{args.rounds} rounds x {args.n} calls; read session {args.events} events; "
        f"load average {load[0]:.1f} before, {load_after[0]:.1f} after "
        f"({os.cpu_count()} cores)"
    )
    print(f"{'operation':<12}{'CPU ms':>9}{'best':>8}{'x healthz':>11}{'wall ms':>10}")
    for name in operations:
        cpu = median_cpu(name)
        best = min(c for c, _ in samples[name])
        wall = statistics.median(w for _, w in samples[name])
        print(f"{name:<12}{cpu:>9.3f}{best:>8.3f}{cpu / floor:>10.2f}x{wall:>10.3f}")
    for name in args.profile:
        profile(operations[name], calls(name, args.n), args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
