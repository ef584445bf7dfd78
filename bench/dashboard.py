#!/usr/bin/env python
"""Switchboard dashboard benchmark: the operator pages at scale, over HTTP, in one run.

    .venv/bin/python bench/dashboard.py            # full run: 100,000 sessions + a 1,000,000-event
                                                   # session, ~6-9 min on 2 cores
    .venv/bin/python bench/dashboard.py --quick    # 20,000 sessions + 100,000 events, ~1-2 min
    .venv/bin/python bench/dashboard.py --smoke    # tiny, one round: that it runs (CI)
    .venv/bin/python bench/dashboard.py --help     # sizes, rounds, database, ...

What it does, in one process (plus the server it starts):

1. Drops and recreates a scratch database (default `switchboard_bench_dash`) on the local
   PostgreSQL (127.0.0.1:5432, user postgres) and migrates it.
2. Loads, with COPY, 100,000 sessions (statuses, agents, metadata and created_at spread over
   eight weeks, a few events each with realistic message text, some linked to tasks) and one
   1,000,000-event session with its automatic snapshots (bench/ingest.py's loader).
3. Creates a user (operator member of the project) and an API key, starts the real ASGI server
   (uvicorn, DEBUG=false, Redis channel layer) and signs in with httpx (CSRF handled).
4. Measures, over several rounds: the sessions list under common filters, the session page of
   the 1,000,000-event session (first render, "load more" fragment, time-travel inspector), and
   live latency from an API append to the websocket frame of the open session page.
5. Baselines from the same run: a trivial Django view over the same HTTP client, and the raw
   SQL of each page (the page's SELECTs re-run with plain psycopg), for the ratios.
6. Prints the figures with the targets (PASS/MISS is information, nothing is asserted) and
   writes them as JSON to bench/results/ (git-ignored).

Timing: "client" is wall time of one request on a keep-alive httpx connection over loopback;
"server" is the Server-Timing header a bench-only ASGI wrapper adds (time from the request
reaching the Django application until it starts the response; the body is small and follows).
The client, the server and PostgreSQL share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import html
import json
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import _common as common  # noqa: E402
import ingest as ib  # noqa: E402  (bench/ingest.py: database set-up, content, COPY loader)

VENV_BIN = Path(sys.executable).parent
DEFAULT_DB = ib.scratch_name("switchboard_bench_dash")
USERNAME, PASSWORD = "bench-operator", "bench-operator-password-91"

TARGETS = {"list": 100.0, "page": 150.0, "live": 100.0}  # p95, ms

REFERENCE = (
    "Google ADK's session listing was reported to take 40-74 s at 5,000-10,000 "
    "sessions (issue material; other machine, not measured here)"
)

AGENTS = [
    "support-agent",
    "billing-agent",
    "research-agent",
    "triage-bot",
    "sales-assistant",
    "onboarding-guide",
    "refund-processor",
    "qa-reviewer",
    "scheduler",
    "translator",
    "data-analyst",
    "escalation-handler",
]
TOPICS = [
    "Refund request",
    "Password reset",
    "Invoice question",
    "Shipment delayed",
    "Plan upgrade",
    "Research brief",
    "Contract renewal",
    "Bug report",
    "Data export",
    "Account closure",
    "Quarterly report",
    "Onboarding call",
]
CHANNELS = ["email", "chat", "chat", "chat", "voice", "api"]
REGIONS = ["eu-west", "us-east", "us-west", "ap-south"]
RARE_WORD = "xylophone"  # not in ingest.WORDS: only where this script puts it
COMMON_WORD = "refund"  # in ingest.WORDS: in about a fifth of the messages


# --------------------------------------------------------------------------------------------
# Server with a Server-Timing header (bench-only wrapper around config.asgi.application)
# --------------------------------------------------------------------------------------------


def timing_app():  # type: ignore[no-untyped-def]
    """uvicorn --factory bench.dashboard:timing_app — the product's ASGI app, unchanged, with a
    `Server-Timing: app;dur=<ms>` header: time from the request reaching the application until
    it starts its response (Django sends the start once the view has rendered)."""
    from config.asgi import application

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return await application(scope, receive, send)
        t0 = time.perf_counter()

        async def timed_send(message):  # type: ignore[no-untyped-def]
            if message["type"] == "http.response.start":
                timing = f"app;dur={(time.perf_counter() - t0) * 1000:.3f}".encode()
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"server-timing", timing)],
                }
            await send(message)

        return await application(scope, receive, timed_send)

    return app


def dash_env(db: str) -> dict[str, str]:
    env = ib.server_env(db)
    env.update(
        {
            "ALLOWED_HOSTS": "127.0.0.1",
            # Plain http on loopback: the cookies must not be Secure-only (DEBUG=false defaults).
            "SESSION_COOKIE_SECURE": "false",
            "CSRF_COOKIE_SECURE": "false",
            "REDIS_URL": ib.REDIS_URL,
            "CACHE_KEY_PREFIX": f"switchboard-bench-dash-{os.getpid()}",
            "PYTHONPATH": str(ROOT),
        }
    )
    return env


class Server:
    def __init__(self, db: str, port: int, workers: int) -> None:
        self.port = port
        self.label = (
            f"uvicorn --workers {workers} --http httptools --loop uvloop "
            "(config.asgi:application behind a Server-Timing wrapper)"
        )
        cmd = [
            str(VENV_BIN / "uvicorn"),
            "--factory",
            "bench.dashboard:timing_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--http",
            "httptools",
            "--loop",
            "uvloop",
            "--lifespan",
            "off",
            "--no-access-log",
            "--log-level",
            "warning",
        ]
        self.log_path = ROOT / "bench" / "results" / f"dash-server-{port}.log"
        self.log_file = open(self.log_path, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=dash_env(db),
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout: float = 60) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited; see {self.log_path}:\n" + self.log_path.read_text()[-2000:]
                )
            with contextlib.suppress(httpx.HTTPError):
                if (
                    httpx.get(
                        f"http://127.0.0.1:{self.port}/accounts/login/", timeout=5
                    ).status_code
                    == 200
                ):
                    return
            time.sleep(0.2)
        raise RuntimeError(f"server not ready after {timeout}s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)  # its own process group only
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.log_file.close()
        with contextlib.suppress(OSError):
            if not self.log_path.read_text().strip():
                self.log_path.unlink()


def busy_cpu_seconds() -> float:
    """CPU seconds every process of the machine has used so far (/proc/stat, all cores)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class Interference:
    """Cores used by other work (not this script, its server, their database backends) while
    the HTTP figures were taken: what competed with them for the machine."""

    def __init__(self, server: Server, conn, db: str) -> None:  # type: ignore[no-untyped-def]
        self.server, self.conn, self.db = server, conn, db

    def _ours(self) -> float:
        t = os.times()
        return (
            t.user
            + t.system
            + ib.tree_cpu(self.server.proc.pid)
            + ib.pg_backends_cpu(self.conn, self.db)
        )

    def __enter__(self) -> Interference:
        self.t0, self.busy0, self.ours0 = time.perf_counter(), busy_cpu_seconds(), self._ours()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.t0
        other = (busy_cpu_seconds() - self.busy0) - (self._ours() - self.ours0)
        self.cores = max(other, 0.0) / wall


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


SESSION_COLUMNS = (
    "id, project_id, agent_id, external_id, title, status, metadata, head_seq,"
    " tokens_used, cost_used, budget_max_tokens, budget_max_cost, parent_id,"
    " fork_seq, ancestry, created_at, updated_at, closed_at, archived_at, taken_over_by,"
    " compacted_through_seq"
)

LIFECYCLE_PATHS = {
    "open": [],
    "paused": [("open", "paused", "handoff requested: needs approval")],
    "resumed": [("open", "paused", "handoff requested"), ("paused", "resumed", "answered")],
    "closed": [("open", "closed", "done")],
    "archived": [("open", "closed", "done"), ("closed", "archived", "retention")],
}


def _status_for(age: dt.timedelta, rng: random.Random) -> str:
    r = rng.random()
    if age < dt.timedelta(hours=2):
        return "open" if r < 0.65 else "paused" if r < 0.77 else "resumed" if r < 0.87 else "closed"
    if age < dt.timedelta(days=2):
        return "open" if r < 0.12 else "paused" if r < 0.17 else "resumed" if r < 0.22 else "closed"
    return "closed" if r < 0.55 else "archived" if r < 0.95 else "paused" if r < 0.97 else "open"


def load_sessions(
    conn,
    factory: ib.ContentFactory,
    *,
    project_id: int,
    agents: dict[str, int],  # type: ignore[no-untyped-def]
    n: int,
    now: dt.datetime,
    seed: int,
) -> dict[str, Any]:
    """COPY `n` sessions and their (few) events. Returns what the measurements pick from."""
    rng = random.Random(seed)
    agent_names = list(agents)
    agent_weights = [1 / (i + 1) for i in range(len(agent_names))]
    rows = []
    for i in range(n):
        age = dt.timedelta(days=56) * (rng.random() ** 1.6)  # more sessions recently
        created = now - age - dt.timedelta(minutes=5)
        duration = dt.timedelta(minutes=min(rng.lognormvariate(2.5, 1.4), 3 * 24 * 60))
        updated = min(created + duration, now - dt.timedelta(seconds=rng.randint(1, 300)))
        status = _status_for(age, rng)
        customer = f"cust-{int(5000 * rng.random() ** 3):04d}"
        metadata: dict[str, Any] = {
            "customer": customer,
            "channel": rng.choice(CHANNELS),
            "region": rng.choice(REGIONS),
            "priority": rng.choice(["low", "normal", "normal", "high"]),
        }
        if rng.random() < 0.1:
            metadata["experiment"] = rng.choice(["A", "B"])
        agent = rng.choices(agent_names, agent_weights)[0]
        own = min(int(rng.expovariate(1 / 5)), 150)
        rows.append(
            {
                "id": uuid.UUID(int=rng.getrandbits(128), version=4),
                "agent": agent,
                "external_id": f"run-{i:07d}" if rng.random() < 0.6 else None,
                "title": f"{rng.choice(TOPICS)} — {customer}",
                "status": status,
                "metadata": metadata,
                "own": own,
                "created": created,
                "updated": updated,
                "budget": rng.choice([None, None, None, 200_000, 1_000_000]),
            }
        )
    rows.sort(key=lambda r: r["created"])  # events then arrive roughly in time order
    rare_sessions = set(rng.sample(range(n), min(25, n)))
    rendered: dict[int, str] = {}
    esc = ib.copy_escape
    event_count = 0
    with conn.cursor() as cur:
        with cur.copy(f"COPY sessions_app_event ({ib.EVENT_COLUMNS}) FROM STDIN") as copy:
            chunk: list[str] = []
            for index, row in enumerate(rows):
                sid = str(row["id"])
                tokens_total = 0
                paths = LIFECYCLE_PATHS[row["status"]]
                head = row["own"] + len(paths)
                span = (row["updated"] - row["created"]) / max(head, 1)
                rare = index in rare_sessions
                for seq in range(1, head + 1):
                    ts = (row["created"] + span * seq).isoformat()
                    if seq <= row["own"]:
                        kind, role, content, text, tokens = factory.event(rng, seq)
                        if rare and kind == "message":
                            content = {**content, "text": f"{text} The {RARE_WORD} came up."}
                            text = content["text"]
                            rare = False
                            content_json = esc(json.dumps(content, separators=(",", ":")))
                        elif kind in ("state", "fact"):
                            content_json = esc(json.dumps(content, separators=(",", ":")))
                        else:
                            content_json = rendered.get(id(content))
                            if content_json is None:
                                content_json = esc(json.dumps(content, separators=(",", ":")))
                                rendered[id(content)] = content_json
                        actor = f"key:{row['agent']}"
                    else:
                        frm, to, reason = paths[seq - row["own"] - 1]
                        kind, role, text, tokens = "lifecycle", "", "", 0
                        content_json = esc(json.dumps({"from": frm, "to": to, "reason": reason}))
                        actor = "user:operator" if to in ("resumed",) else "system"
                    tokens_total += tokens
                    tier = "durable" if kind in ib.DURABLE else "transient"
                    chunk.append(
                        f"{sid}\t{seq}\t{kind}\t{tier}\t{role}\t{content_json}\t"
                        f"{esc(text)}\t{tokens}\t0.000000\t{actor}\t\\N\t{ts}\n"
                    )
                row["head"] = head
                row["tokens"] = tokens_total
                event_count += head
                if len(chunk) >= 5000:
                    copy.write("".join(chunk))
                    chunk.clear()
            if chunk:
                copy.write("".join(chunk))
        with cur.copy(f"COPY sessions_app_session ({SESSION_COLUMNS}) FROM STDIN") as copy:
            chunk = []
            for row in rows:
                status = row["status"]
                closed = row["updated"].isoformat() if status in ("closed", "archived") else "\\N"
                archived = (
                    (row["updated"] + dt.timedelta(days=30)).isoformat()
                    if status == "archived"
                    else "\\N"
                )
                chunk.append(
                    f"{row['id']}\t{project_id}\t{agents[row['agent']]}\t"
                    f"{row['external_id'] or '\\N'}\t{esc(row['title'])}\t{status}\t"
                    f"{esc(json.dumps(row['metadata']))}\t{row['head']}\t{row['tokens']}\t"
                    f"0.000000\t{row['budget'] if row['budget'] else '\\N'}\t\\N\t\\N\t\\N\t[]\t"
                    f"{row['created'].isoformat()}\t{row['updated'].isoformat()}\t{closed}\t"
                    f"{archived}\t\t0\n"  # taken_over_by: nobody; never compacted
                )
                if len(chunk) >= 5000:
                    copy.write("".join(chunk))
                    chunk.clear()
            if chunk:
                copy.write("".join(chunk))
    conn.commit()
    return {"rows": rows, "events": event_count}


def link_tasks(
    conn,
    rows: list[dict[str, Any]],
    task_ids: list[uuid.UUID],
    extra: list[uuid.UUID],  # type: ignore[no-untyped-def]
    now: dt.datetime,
    seed: int,
    share: float = 0.06,
) -> int:
    """COPY task links for about `share` of the sessions (and every session in `extra`)."""
    rng = random.Random(seed)
    links = [
        (rng.choice(task_ids), row["id"], row["created"]) for row in rows if rng.random() < share
    ]
    links += [(task_ids[0], sid, now) for sid in extra]
    with (
        conn.cursor() as cur,
        cur.copy(
            "COPY tasks_app_tasksession (task_id, session_id, linked_by, created_at) FROM STDIN"
        ) as copy,
    ):
        copy.write("".join(f"{t}\t{s}\tkey:bench\t{c.isoformat()}\n" for t, s, c in links))
    conn.commit()
    return len(links)


# --------------------------------------------------------------------------------------------
# Measurement helpers
# --------------------------------------------------------------------------------------------


def stats(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": statistics.median(values) if values else float("nan"),
        "p95": ib.pct(values, 0.95),
        "max": max(values) if values else float("nan"),
    }


def server_ms(response: Any) -> float:
    header = response.headers.get("server-timing", "")
    match = re.search(r"dur=([0-9.]+)", header)
    return float(match.group(1)) if match else float("nan")


class Sampler:
    """Client wall time and server time per named case, collected over interleaved rounds."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.client_ms: dict[str, list[float]] = {}
        self.server_ms: dict[str, list[float]] = {}
        self.bytes: dict[str, int] = {}
        self.cpu_ms: dict[str, float] = {}  # server + PostgreSQL CPU per request

    def get(
        self,
        name: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        record: bool = True,
        expect: int = 200,
    ) -> Any:
        t0 = time.perf_counter_ns()
        response = self.client.get(url, headers=headers)
        elapsed = (time.perf_counter_ns() - t0) / 1e6
        if response.status_code != expect:
            raise RuntimeError(
                f"{name}: GET {url} -> HTTP {response.status_code}: {response.text[:400]!r}"
            )
        if record:
            self.client_ms.setdefault(name, []).append(elapsed)
            self.server_ms.setdefault(name, []).append(server_ms(response))
            self.bytes[name] = len(response.content)
        return response

    def summary(self, name: str) -> dict[str, Any]:
        return {
            "client": stats(self.client_ms[name]),
            "server": stats(self.server_ms[name]),
            "bytes": self.bytes.get(name, 0),
            "cpu_ms": self.cpu_ms.get(name),
        }


def sign_in(client: Any) -> None:
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    if page.status_code != 200 or not token:
        raise RuntimeError(f"login page: HTTP {page.status_code}")
    response = client.post(
        "/accounts/login/",
        data={
            "username": USERNAME,
            "password": PASSWORD,
            "csrfmiddlewaretoken": token.group(1),
            "next": "/",
        },
    )
    if response.status_code != 302 or "sessionid" not in client.cookies:
        raise RuntimeError(f"sign-in failed: HTTP {response.status_code} {response.text[:300]!r}")


def next_page_query(page_html: str) -> str:
    match = re.search(r'href="\?([^"]*cursor=[^"]*)"', page_html)
    if not match:
        raise RuntimeError("page 1 has no next-page link")
    return html.unescape(match.group(1))


@dataclass(frozen=True)
class Statement:
    """One statement a page ran, as it was sent: its text with placeholders, its parameters
    apart, and how they were bound (Django's cursors quote them into the text client-side;
    core.storage.server_bound_cursor sends them apart, and psycopg prepares the statement)."""

    sql: str
    params: Any
    server_bound: bool


def _cursor(conn, statement: Statement):  # type: ignore[no-untyped-def]
    import psycopg

    return conn.cursor() if statement.server_bound else psycopg.ClientCursor(conn)


def raw_sql_timings(conn, statements: list[Statement], repeat: int) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Re-run a page's SELECTs with plain psycopg, each bound as the page bound it: median per
    statement, summed per page."""
    per_stmt = []
    for statement in statements:
        samples = []
        with _cursor(conn, statement) as cur:
            for _ in range(repeat):
                t0 = time.perf_counter_ns()
                cur.execute(statement.sql, statement.params)
                cur.fetchall()
                samples.append((time.perf_counter_ns() - t0) / 1e6)
        per_stmt.append(statistics.median(samples))
    conn.rollback()
    return {
        "total_ms": sum(per_stmt),
        "statements": len(statements),
        "max_ms": max(per_stmt, default=0),
        "per_statement_ms": [round(v, 3) for v in per_stmt],
    }


def explain(conn, statement: Statement) -> str:  # type: ignore[no-untyped-def]
    with _cursor(conn, statement) as cur:
        cur.execute(f"EXPLAIN (ANALYZE, BUFFERS) {statement.sql}", statement.params)
        plan = "\n".join(r[0] for r in cur.fetchall())
    conn.rollback()
    return plan


def page_queries(client: Any, url: str, headers: dict[str, str] | None = None) -> list[Statement]:
    """The SELECTs one in-process render of `url` runs (Django's test client, same database),
    taken before binding: Django's query log holds the server-bound ones' text without their
    parameters, and an execute wrapper sees every statement with them."""
    import psycopg
    from django.db import connection

    statements: list[Statement] = []

    def record(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if not many and sql.lstrip().upper().startswith(("SELECT", "WITH")):
            bound = not isinstance(context["cursor"].cursor, psycopg.ClientCursor)
            statements.append(Statement(sql, params, bound))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        response = client.get(url, headers=headers or {})
    if response.status_code != 200:
        raise RuntimeError(f"in-process {url}: HTTP {response.status_code}")
    return statements


# --------------------------------------------------------------------------------------------
# Live: append through the API, wait for the websocket frame
# --------------------------------------------------------------------------------------------


async def live_latency(
    port: int, session_id: str, cookie: str, api_key: str, head: int, n: int, warm: int
) -> dict[str, Any]:
    import httpx
    import websockets

    origin = f"http://127.0.0.1:{port}"
    url = f"ws://127.0.0.1:{port}/ws/sessions/{session_id}/?order=desc&after_seq={head}&rows=1"
    total, after_response, append_ms = [], [], []
    rng = random.Random(5)
    async with (
        httpx.AsyncClient(base_url=origin, headers={"Authorization": f"Bearer {api_key}"}) as api,
        websockets.connect(
            url,
            additional_headers={"Cookie": f"sessionid={cookie}", "Origin": origin},
            max_size=None,
        ) as ws,
    ):
        # Frames for events appended before the connection: none expected; drain anyway.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ws.recv(), 0.5)
        for i in range(warm + n):
            text = ib._text(rng, 80, 300)
            body = {
                "events": [
                    {
                        "kind": "message",
                        "role": "assistant",
                        "content": {"text": text},
                        "tokens": len(text) // 4,
                    }
                ]
            }
            t0 = time.perf_counter_ns()
            response = await api.post(f"/api/v1/sessions/{session_id}/events", json=body)
            t1 = time.perf_counter_ns()
            if response.status_code != 201:
                raise RuntimeError(f"append: HTTP {response.status_code} {response.text[:300]}")
            seq = response.json()["events"][0]["seq"]
            marker = f'id="event-{seq}"'
            while True:
                frame = await asyncio.wait_for(ws.recv(), 10)
                if marker in frame:
                    break
            t2 = time.perf_counter_ns()
            if i >= warm:
                total.append((t2 - t0) / 1e6)
                after_response.append((t2 - t1) / 1e6)
                append_ms.append((t1 - t0) / 1e6)
            await asyncio.sleep(0.02)  # a realistic pace, and no overlap between samples
    return {
        "total": stats(total),
        "after_response": stats(after_response),
        "append": stats(append_ms),
    }


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def verdict(value: float, target: float) -> str:
    return "PASS" if value <= target else "MISS"


def render(results: dict[str, Any]) -> str:
    L: list[str] = []
    w = L.append
    cfg = results["config"]
    bar = "=" * 118
    w(bar)
    w(
        f"Switchboard dashboard benchmark  {results['started_at']}  git {cfg['git']}  "
        f"{'QUICK' if cfg['quick'] else 'FULL'} run"
    )
    w(
        f"PostgreSQL {cfg['postgres']} · Python {cfg['python']} · {cfg['cpus']} CPUs shared by "
        "the client, the server and PostgreSQL: they compete for the cores, so client times "
        "include waiting for one"
    )
    la, other = results["loadavg"], results["other_cores"]
    w(
        f"other work on the machine during the HTTP part: {other:.2f} cores on average (load "
        f"average before/after {la['before'][0]:.2f} / {la['after'][0]:.2f})"
        + (
            "  << latencies are inflated by it; cpu/req is the steadier figure"
            if other > 0.3
            else ""
        )
    )
    w(f"server: {cfg['server']}, DEBUG=false, REDIS_URL set")
    w(
        f"data: {cfg['sessions']:,} sessions ({results['load']['small_events']:,} events between "
        f"them, {results['load']['task_links']:,} task links) + one {cfg['big']:,}-event session "
        f"({results['load']['snapshots']:,} snapshots)"
    )
    w(
        "client: httpx, one keep-alive connection, one request at a time, "
        f"{cfg['rounds']} rounds x "
        f"{cfg['per_round']} per case, interleaved. client = wall time on loopback; server = "
        "Server-Timing (app start to response start)"
    )
    w(
        "PASS/MISS is judged on the client p95 (what a browser on the same host would wait). "
        "Times in ms."
    )
    w(bar)
    base = results["baseline"]["trivial"]["client"]["p50"]

    def header(title: str) -> None:
        w("")
        w(title)
        w(
            f"  {'':44}{'client p50':>11}{'p95':>8}{'server p50':>12}{'p95':>8}"
            f"{'cpu/req':>9}{'raw SQL':>10}{'x SQL':>7}{'x triv':>8}   target"
        )

    def line(
        label: str,
        s: dict[str, Any],
        sql: dict[str, Any] | None,
        target: float | None,
        note: str = "",
    ) -> None:
        c, sv = s["client"], s["server"]
        sql_ms = sql["total_ms"] if sql else None
        sql_col = f"{sql_ms:8.2f}ms{c['p50'] / sql_ms:6.1f}x" if sql_ms else f"{'':10}{'':7}"
        tgt = f"p95 <= {target:.0f} ms  {verdict(c['p95'], target)}" if target else ""
        cpu = f"{s['cpu_ms']:9.2f}" if s.get("cpu_ms") is not None else f"{'':9}"
        w(
            f"  {label:<44}{c['p50']:11.2f}{c['p95']:8.2f}{sv['p50']:12.2f}{sv['p95']:8.2f}"
            f"{cpu}{sql_col}{c['p50'] / base:7.1f}x   {tgt}{note}"
        )

    header(
        f"SESSIONS LIST, {cfg['sessions']:,} sessions, 50 per page  (ms; raw SQL = the "
        "page's SELECTs re-run with psycopg)"
    )
    for name, label in results["list_labels"].items():
        line(label, results["list"][name], results["sql"].get(name), TARGETS["list"])
    header(f"SESSION PAGE of the {cfg['big']:,}-event session")
    for name, label in results["page_labels"].items():
        line(label, results["page"][name], results["sql"].get(name), TARGETS["page"])

    lv = results["live"]
    w("")
    w(
        "LIVE: append one event through the API -> its row arrives on the session page's "
        "websocket "
        f"({lv['total']['n']} appends)"
    )
    w(f"  {'':44}{'p50':>11}{'p95':>8}")
    w(
        f"  {'append request -> websocket frame':<44}{lv['total']['p50']:11.2f}"
        f"{lv['total']['p95']:8.2f}{'':45}p95 <= {TARGETS['live']:.0f} ms  "
        f"{verdict(lv['total']['p95'], TARGETS['live'])}"
    )
    w(
        f"  {'  of which the append request (HTTP 201)':<44}{lv['append']['p50']:11.2f}"
        f"{lv['append']['p95']:8.2f}"
    )
    w(
        f"  {'  of which response -> frame':<44}{lv['after_response']['p50']:11.2f}"
        f"{lv['after_response']['p95']:8.2f}"
    )

    w("")
    w("BASELINES (same run, same client)")
    for name, label in (
        ("trivial", "trivial Django view: GET /accounts/login/"),
        ("openapi", "GET /api/v1/openapi.json"),
    ):
        s = results["baseline"][name]
        w(
            f"  {label:<44}{s['client']['p50']:11.2f}{s['client']['p95']:8.2f}"
            f"{s['server']['p50']:12.2f}{s['server']['p95']:8.2f}{s['cpu_ms']:9.2f}"
        )
    w(
        "  cpu/req = CPU ms the server processes and their PostgreSQL backends spent per request;"
        " x SQL = client p50 / raw SQL;"
    )
    w("  x triv = client p50 / the trivial view's client p50")
    w("")
    w("Load: " + results["load"]["summary"])
    w(f"REFERENCE: {REFERENCE}")
    w(bar)
    return "\n".join(L)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="small run: 20,000 sessions, a 100,000-event session, 3 rounds",
    )
    p.add_argument("--sessions", type=int, help="sessions in the list (default 100,000)")
    p.add_argument("--big", type=int, help="events in the big session (default 1,000,000)")
    p.add_argument("--rounds", type=int, help="rounds (default 5; quick 3)")
    p.add_argument(
        "--per-round", type=int, help="requests per case per round (default 10; quick 5)"
    )
    p.add_argument("--appends", type=int, help="live appends measured (default 50; quick 20)")
    p.add_argument("--workers", type=int, default=2, help="uvicorn workers (default 2)")
    p.add_argument("--db", default=DEFAULT_DB, help="scratch database (dropped first)")
    p.add_argument(
        "--explain", action="store_true", help="print EXPLAIN ANALYZE of each list query"
    )
    p.add_argument("--keep-server", action="store_true", help="leave the server running")
    p.add_argument(
        "--load-only",
        action="store_true",
        help="create and load the database, then stop (for EXPLAIN / profiling)",
    )
    p.add_argument("--seed", type=int, default=11)
    ib.add_smoke_flag(p)
    args = p.parse_args()
    ib.smoke(args, quick=True, sessions=300, big=2_000, rounds=1, per_round=1, appends=3, workers=1)

    quick = args.quick
    n_sessions = args.sessions or (20_000 if quick else 100_000)
    big = args.big or (100_000 if quick else 1_000_000)
    rounds = args.rounds or (3 if quick else 5)
    per_round = args.per_round or (5 if quick else 10)
    n_appends = args.appends or (20 if quick else 50)

    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).replace(microsecond=0)
    t_start = time.perf_counter()

    # -- database ---------------------------------------------------------------------------
    ib.log(f"recreating database {args.db} and migrating")
    env = dash_env(args.db)
    os.environ.update(env)
    ib.scratch_database(args.db, env)
    # DEBUG=false serves static files from collectstatic's manifest (as scripts/run does).
    common.collect_static(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from core.actors import Actor
    from core.cursors import encode_cursor
    from core.models import Role
    from core.services.projects import add_member, create_api_key, create_project
    from sessions_app.models import Agent
    from sessions_app.services.sessions import open_session
    from tasks_app.services.tasks import create_task

    every = settings.SWITCHBOARD_SNAPSHOT_EVERY
    now = dt.datetime.now(dt.UTC)
    actor = Actor.system("bench")
    project = create_project("bench-dashboard")
    user = get_user_model().objects.create_user(USERNAME, password=PASSWORD)
    add_member(project, user, Role.OPERATOR)
    _, api_key = create_api_key(project, name="bench", actor=actor)
    agents = {name: Agent.objects.create(project=project, name=name).pk for name in AGENTS}

    factory = ib.ContentFactory(seed=args.seed)
    conn = ib.pg_connect(args.db)
    pg_version = conn.execute("SHOW server_version").fetchone()[0]
    # Loading only (this connection): flush the GIN pending list in larger, cheaper batches.
    conn.execute("SET gin_pending_list_limit = '64MB'")
    conn.execute("SET work_mem = '64MB'")
    conn.execute("SET synchronous_commit = off")
    conn.commit()
    notes = []
    with ib.Timer() as t:
        loaded = load_sessions(
            conn,
            factory,
            project_id=project.pk,
            agents=agents,
            n=n_sessions,
            now=now,
            seed=args.seed,
        )
    notes.append(f"{n_sessions:,} sessions + {loaded['events']:,} events in {t.seconds:.1f}s")
    ib.log(notes[-1])

    big_session, _ = open_session(
        project,
        agent_name="support-agent",
        actor=actor,
        title=f"Long-running support agent ({big:,} events)",
        metadata={"customer": "cust-0001", "channel": "chat"},
    )
    with ib.Timer() as t:
        _, snapshots = ib.load_session_events(
            conn, factory, big_session.pk, big, every=every, seed=args.seed + 1
        )
    notes.append(f"{big:,} events + {snapshots:,} snapshots in {t.seconds:.1f}s")
    ib.log(notes[-1])

    with ib.Timer() as t:
        task_ids = [
            create_task(
                project, workflow="research_report", actor=actor, params={"topic": f"topic {i}"}
            ).task.pk
            for i in range(40 if quick else 150)
        ]
        links = link_tasks(conn, loaded["rows"], task_ids, [big_session.pk], now, args.seed)
    notes.append(f"{len(task_ids)} tasks, {links:,} session links in {t.seconds:.1f}s")
    ib.log(notes[-1])
    conn.execute("RESET gin_pending_list_limit")
    conn.execute("RESET work_mem")
    conn.execute("RESET synchronous_commit")
    # The raw-SQL baselines run with the app's connection settings (config/settings.py).
    options = settings.DATABASES["default"].get("OPTIONS", {}).get("options", "")
    for name, value in re.findall(r"-c\s*(\w+)=(\S+)", options):
        conn.execute(f"SET {name} = '{value}'")
    conn.commit()
    conn.autocommit = True
    with ib.Timer() as t:
        for table in (
            "sessions_app_event",
            "sessions_app_snapshot",
            "sessions_app_session",
            "tasks_app_tasksession",
            "tasks_app_task",
        ):
            conn.execute(f"VACUUM ANALYZE {table}")
    conn.autocommit = False
    notes.append(f"VACUUM ANALYZE {t.seconds:.1f}s")
    ib.log(notes[-1])

    if args.load_only:
        print(f"loaded {args.db}: " + "; ".join(notes))
        return 0

    # -- the cases --------------------------------------------------------------------------
    rows = loaded["rows"]
    by_agent: dict[str, int] = {}
    by_customer: dict[str, int] = {}
    for row in rows:
        by_agent[row["agent"]] = by_agent.get(row["agent"], 0) + 1
        by_customer[row["metadata"]["customer"]] = (
            by_customer.get(row["metadata"]["customer"], 0) + 1
        )
    agent_x = sorted(by_agent, key=by_agent.get, reverse=True)[3]  # type: ignore[arg-type]
    # A specific customer: what an operator looks up (about 0.1% of the sessions).
    customer = min(
        (c for c in by_customer if by_customer[c] >= 0.0008 * n_sessions),
        key=lambda c: by_customer[c],
    )
    week_ago, two_weeks = now - dt.timedelta(days=7), now - dt.timedelta(days=14)
    fmt = "%Y-%m-%dT%H:%M"
    ordered = sorted(rows, key=lambda r: (r["created"], str(r["id"])), reverse=True)
    deep = ordered[int(len(ordered) * 0.6)]
    deep_cursor = encode_cursor(deep["created"], deep["id"])
    base = f"/p/{project.pk}/sessions/"
    list_cases: dict[str, tuple[str, str]] = {
        "none": ("no filter (newest first)", ""),
        "paused": ("status=paused", "status=paused"),
        "agent": (f"agent={agent_x} ({by_agent[agent_x] / n_sessions:.0%})", f"agent={agent_x}"),
        "tag": (
            f"tag customer={customer} ({by_customer[customer]} sessions)",
            f"tag=customer%3D{customer}",
        ),
        "has_task": ("has_task=yes", "has_task=yes"),
        "created": (
            "created in a one-week range",
            f"created_after={two_weeks.strftime(fmt)}&created_before={week_ago.strftime(fmt)}",
        ),
        "updated": ("sort=recently active", "sort=-updated"),
        "page2": ("page 2 via cursor", None),  # filled from page 1's next link
        "deep": (
            f"deep page via cursor (row {int(len(ordered) * 0.6):,})",
            f"cursor={deep_cursor}",
        ),
        "q_rare": (f"q={RARE_WORD} (rare: {min(25, n_sessions)} sessions)", f"q={RARE_WORD}"),
        "q_common": (f"q={COMMON_WORD} (common word)", f"q={COMMON_WORD}"),
        "q_task": (f"q={COMMON_WORD} + has_task=yes (combined)", f"q={COMMON_WORD}&has_task=yes"),
    }
    sid = str(big_session.pk)
    page_base = f"/sessions/{sid}/"
    htmx = {"HX-Request": "true"}

    results: dict[str, Any] = {
        "started_at": started.isoformat(),
        "config": {
            "quick": quick,
            "sessions": n_sessions,
            "big": big,
            "rounds": rounds,
            "per_round": per_round,
            "appends": n_appends,
            "snapshot_every": every,
            "postgres": pg_version,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "git": subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
            ).stdout.strip()
            + (
                "+dirty"
                if subprocess.run(
                    ["git", "status", "--porcelain", "sessions_app", "config", "templates"],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                ).stdout.strip()
                else ""
            ),
        },
        "load": {
            "summary": "; ".join(notes),
            "small_events": loaded["events"],
            "task_links": links,
            "snapshots": snapshots,
        },
        "list_labels": {k: v[0] for k, v in list_cases.items()},
        "page_labels": {
            "first": "first render (newest 50 events)",
            "more": "load-more fragment (50 older, random seq)",
            "inspector": "time-travel inspector (random seq)",
        },
    }

    # -- raw SQL baselines (in-process render to capture the page's SELECTs) -----------------
    ib.log("raw SQL of each page (in-process capture, psycopg re-run)")
    local = Client(SERVER_NAME="127.0.0.1")
    local.force_login(user)
    page1 = local.get(base)
    list_cases["page2"] = (list_cases["page2"][0], next_page_query(page1.content.decode()))
    rng = random.Random(args.seed)
    sql: dict[str, Any] = {}
    plans: dict[str, str] = {}
    for name, (_, query) in list_cases.items():
        statements = page_queries(local, f"{base}?{query}")
        sql[name] = raw_sql_timings(conn, statements, 5)
        main_sql = max(
            statements,
            key=lambda s: ("sessions_app_session" in s.sql and "LIMIT 51" in s.sql, len(s.sql)),
        )
        plans[name] = explain(conn, main_sql)
        sql[name]["list_query_ms"] = float(
            re.search(r"Execution Time: ([0-9.]+)", plans[name]).group(1)
        )  # type: ignore[union-attr]
    big_head = big
    for name, url, headers in (
        ("first", page_base, {}),
        ("more", f"{page_base}events/?order=desc&before_seq={rng.randint(1000, big_head)}", htmx),
        ("inspector", f"{page_base}inspector/?at_seq={rng.randint(1, big_head)}", htmx),
    ):
        sql[name] = raw_sql_timings(conn, page_queries(local, url, headers), 5)
    results["sql"] = sql
    results["plans"] = plans
    from django.db import connection as django_connection

    django_connection.close()

    # -- the server -------------------------------------------------------------------------
    import httpx

    server = None
    load_before = os.getloadavg()
    try:
        port = ib.free_port()
        server = Server(args.db, port, args.workers)
        results["config"]["server"] = server.label
        ib.log(f"starting {server.label} on port {port}")
        server.wait_ready()
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
        sign_in(client)
        cookie = client.cookies["sessionid"]
        sampler = Sampler(client)

        def list_url(name: str) -> str:
            return f"{base}?{list_cases[name][1]}"

        # Warm-up: every case twice (templates, statement plans, the pool's connections).
        # A case slower than half a second is sampled once per round (the run stays short).
        ib.log("warm-up")
        reps = dict.fromkeys(list_cases, per_round)
        for _ in range(1 if args.smoke else 2):
            sampler.get("trivial", "/accounts/login/", record=False)
            sampler.get("openapi", "/api/v1/openapi.json", record=False)
            for name in list_cases:
                t0 = time.perf_counter()
                sampler.get(name, list_url(name), record=False)
                if time.perf_counter() - t0 > 0.5:
                    reps[name] = 1
            sampler.get("first", page_base, record=False)
            sampler.get(
                "more",
                f"{page_base}events/?order=desc&before_seq={min(5000, big)}",
                headers=htmx,
                record=False,
            )
            sampler.get(
                "inspector",
                f"{page_base}inspector/?at_seq={min(5000, big)}",
                headers=htmx,
                record=False,
            )

        ib.log(f"measuring: {rounds} rounds x {per_round} per case")
        rng = random.Random(args.seed + 2)
        cpu: dict[str, list[float]] = {}

        def batch(name: str, url: Any, n: int, headers: dict[str, str] | None = None) -> None:
            """`n` requests of one case in a row, with the CPU the server and its database
            backends spent on them (robust where wall time is not: cores are shared)."""
            s0, p0 = ib.tree_cpu(server.proc.pid), ib.pg_backends_cpu(conn, args.db)
            for _ in range(n):
                sampler.get(name, url() if callable(url) else url, headers=headers)
            spent = (ib.tree_cpu(server.proc.pid) - s0) + (ib.pg_backends_cpu(conn, args.db) - p0)
            acc = cpu.setdefault(name, [0.0, 0])
            acc[0] += spent
            acc[1] += n

        with Interference(server, conn, args.db) as others:
            for r in range(rounds):
                batch("trivial", "/accounts/login/", per_round)
                batch("openapi", "/api/v1/openapi.json", per_round)
                for name in list_cases:
                    batch(name, list_url(name), reps[name])
                batch("first", page_base, per_round)
                batch(
                    "more",
                    lambda: (
                        f"{page_base}events/?order=desc&before_seq={rng.randint(1000, big_head)}"
                    ),
                    per_round,
                    htmx,
                )
                batch(
                    "inspector",
                    lambda: f"{page_base}inspector/?at_seq={rng.randint(1, big_head)}",
                    per_round,
                    htmx,
                )
                ib.log(f"round {r + 1}/{rounds} done")
        results["other_cores"] = others.cores
        sampler.cpu_ms = {name: 1000 * spent / n for name, (spent, n) in cpu.items()}
        results["baseline"] = {k: sampler.summary(k) for k in ("trivial", "openapi")}
        results["list"] = {k: sampler.summary(k) for k in list_cases}
        results["page"] = {k: sampler.summary(k) for k in ("first", "more", "inspector")}
        client.close()

        ib.log(f"live latency: {n_appends} appends")
        results["live"] = asyncio.run(
            live_latency(port, sid, cookie, api_key, big_head, n_appends, warm=5)
        )
    finally:
        if server is not None:
            if args.keep_server:
                print(f"server left running on port {server.port} (pid {server.proc.pid})")
            else:
                server.stop()
    results["loadavg"] = {"before": load_before, "after": os.getloadavg()}
    conn.close()
    results["elapsed_s"] = round(time.perf_counter() - t_start, 1)

    text = render(results)
    if args.explain:
        for name, plan in plans.items():
            print(f"\n--- EXPLAIN ANALYZE: {results['list_labels'][name]}\n{plan}")
    print(text)
    print(f"(total {results['elapsed_s']:.0f}s)")
    out = (
        ROOT
        / "bench"
        / "results"
        / (f"dashboard-{started:%Y%m%dT%H%M%SZ}{'-quick' if quick else ''}.json")
    )
    out.write_text(json.dumps(results, indent=2, default=str))
    out.with_suffix(".txt").write_text(text + "\n")
    print(f"results: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
