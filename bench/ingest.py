#!/usr/bin/env python
"""Switchboard ingest benchmark: the agent API against raw psycopg, in one run.

    .venv/bin/python bench/ingest.py            # full run (1,000,000-event session), ~6-9 min
    .venv/bin/python bench/ingest.py --quick    # smaller and shorter (100,000 events), ~1-2 min
    .venv/bin/python bench/ingest.py --smoke    # tiny, one round: that it runs (CI), not figures
    .venv/bin/python bench/ingest.py --help     # rounds, sizes, server setup, ...

What it does, in one process (plus the server it starts):

1. Drops and recreates a scratch database (default `switchboard_bench`) on the local PostgreSQL
   (127.0.0.1:5432, user postgres), migrates it with `manage.py migrate`.
2. Loads sessions of 100, 10,000 and 1,000,000 events through the product schema: COPY into
   sessions_app_event with seqs 1..N (realistic content: messages of a few hundred bytes,
   tool calls and results, state patches, facts, decisions), then sets the session's head_seq
   and writes the automatic snapshot every SWITCHBOARD_SNAPSHOT_EVERY events, folded with the
   product's own FoldedState/merge_patch while generating (verified against a full fold).
3. Starts the real ASGI server (uvicorn) against that database with Redis as the channel layer
   (so every append does its after-commit group_send) and DEBUG=false.
4. Measures, over several rounds, with a minimal keep-alive HTTP/1.1 client (raw socket, one
   pre-built request per call, so the client stays light on a 2-core machine), and compares
   with baselines measured in the same run on the same PostgreSQL with plain psycopg.
   Then a fleet: 32 agents at once (each its own session and keep-alive connection, single-event
   appends, asyncio clients in 2 processes) against the server's 2 processes, events/s and p95,
   beside raw psycopg with 32 connections (autocommit INSERT, and UPDATE head + INSERT), and
   the same clients on GET /healthz: the most requests/s any endpoint of this Django stack
   serves on the machine (a view behind the whole middleware stack, no database, no Redis).
5. Prints the figures with the targets (PASS/MISS is information, nothing is asserted) and
   writes them as JSON to bench/results/ (git-ignored).
6. Then (full runs) compares server setups: worker counts, httptools/h11, uvloop/asyncio, the
   broadcast's cost (the same server without REDIS_URL), and, for reference only, Django's WSGI
   handler under uvicorn --interface wsgi (not the product's setup: no websockets).

Besides latency it prints the CPU each request costs the server processes and their
PostgreSQL backends (from /proc): on a shared 2-core machine latency includes waiting for a
core, CPU per request does not, so it is the figure to compare runs by when the load average
line says other work was running.

Server setup: `uvicorn --workers 2 --http httptools --loop uvloop` (one worker per core).
A single keep-alive client is served by one worker whatever the count, so sequential latency
does not depend on it; concurrent throughput needs a worker per core; httptools and uvloop cut
the server's own share (measured in the SERVER SETUPS table). What dominates a request is not
uvicorn but Django's ASGI handler: a request that fails authentication without touching the
database costs ~3 ms of server CPU under ASGI and ~1 ms under WSGI on these machines.

`--server granian-wsgi` takes every figure through granian's WSGI server running
config.wsgi:application instead (`granian --interface wsgi --workers 2 --blocking-threads 4`):
the production split's WSGI side (README, "Production"), where a reverse proxy sends `/ws/` and
the async paths to config.asgi. Full runs measure it in SERVER SETUPS either way.

Nothing is asserted; the exit status is 0 unless the benchmark itself fails. Other flags:
--server-root DIR runs the server from another checkout (before/after figures); --keep-server.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402  (bench/_common.py; the other benches reach these through ingest)
    add_smoke_flag,
    pg_connect,
    pg_url,
    scratch_database,
    scratch_name,
    smoke,
)

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
SECRET_KEY = "bench-only-secret-key-not-for-production-0123456789"

# The server setup (see the module docstring and the SERVER SETUPS table of a full run).
DEFAULT_WORKERS = 2
DEFAULT_HTTP = "httptools"
DEFAULT_LOOP = "uvloop"

REFERENCE_LINES = [
    "raw psycopg (in-process): single-row transaction 0.34 ms; 44,000 events/s in batches of 100",
    "OpenAI Agents SDK SQLAlchemySession: 2.2 ms/item, 16,000 items/s batched, 6.6 ms read last 50",
    "Google ADK: 4.2 ms/event",
    "LangGraph PostgresSaver: 4 ms/message at 100 messages, 78 ms at 4,000; 50 KB/message",
]


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def summarise(samples_by_round: list[list[float]]) -> dict[str, Any]:
    """p50/p95 over all samples (ms) plus the spread of the per-round medians."""
    flat = [v for r in samples_by_round for v in r]
    medians = [statistics.median(r) for r in samples_by_round if r]
    return {
        "n": len(flat),
        "rounds": len(samples_by_round),
        "p50": pct(flat, 0.50),
        "p95": pct(flat, 0.95),
        "p99": pct(flat, 0.99),
        "mean": statistics.fmean(flat) if flat else float("nan"),
        "round_p50_min": min(medians) if medians else float("nan"),
        "round_p50_max": max(medians) if medians else float("nan"),
    }


def log(msg: str) -> None:
    print(f"  · {msg}", file=sys.stderr, flush=True)


class Timer:
    def __enter__(self) -> Timer:
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0


def now_ms() -> float:
    return time.perf_counter_ns() / 1e6


# --------------------------------------------------------------------------------------------
# Realistic event content
# --------------------------------------------------------------------------------------------

WORDS = """
the of and to in is you that it was for on are as with they at be this from have or by one
had not but what all were when we there can an your which their said if do will each about
how up out them then she many some so these would other into has more two like see time
could no make than first been its who now people made over did down only way find use may
long little very after words called just where most know get through back much before good
new write our used me man too any day same right look think also around another came come
work three word must because does part even place well such here take why things help put
years different away again off went old number great tell men say small every found still
between name should home big give air line set own under read last never left end along
while might next sound below saw something thought both few those always looked show large
often together asked house world going want school important until form food keep customer
order invoice refund shipment tracking warehouse delivery address payment card account
password reset subscription plan upgrade downgrade billing cycle discount coupon ticket
escalation priority agent policy approval manager deadline contract renewal quote database
migration deploy rollback incident latency error timeout retry queue worker cache report
summary analysis forecast revenue budget quarter region product catalogue inventory
""".split()  # noqa: SIM905 (a word list reads better as text)

TOOLS = [
    "search_orders",
    "get_customer",
    "issue_refund",
    "lookup_shipment",
    "send_email",
    "query_inventory",
    "create_ticket",
    "get_invoice",
]
FACT_KEYS = [
    f"{area}.{attr}"
    for area in ("customer", "order", "ticket", "account", "plan")
    for attr in (
        "id",
        "tier",
        "status",
        "region",
        "owner",
        "language",
        "priority",
        "balance",
        "currency",
        "channel",
    )
]


def _text(rng: random.Random, lo: int, hi: int) -> str:
    target = rng.randint(lo, hi)
    words: list[str] = []
    size = 0
    while size < target:
        w = rng.choice(WORDS)
        words.append(w)
        size += len(w) + 1
    sentence = " ".join(words)
    return sentence[0].upper() + sentence[1:] + "."


class ContentFactory:
    """Pools of realistic events, so loading a million rows costs little client CPU."""

    def __init__(self, seed: int = 7, pool: int = 4096) -> None:
        rng = self.rng = random.Random(seed)
        self.messages = []
        for i in range(pool):
            role = "user" if i % 2 == 0 else "assistant"
            text = _text(rng, 120, 560) if role == "user" else _text(rng, 200, 700)
            content: dict[str, Any] = {"text": text}
            if role == "assistant":
                content["model"] = rng.choice(["gpt-4.1", "claude-sonnet", "gemini-2.5"])
                content["finish_reason"] = "stop"
            self.messages.append((role, content, text, max(1, len(text) // 4)))
        self.tool_calls = []
        self.tool_results = []
        for _ in range(pool // 4):
            name = rng.choice(TOOLS)
            args = {
                "customer_id": f"C-{rng.randint(1000, 99999)}",
                "query": _text(rng, 20, 80),
                "limit": rng.choice([5, 10, 20]),
            }
            self.tool_calls.append({"name": name, "arguments": args})
            rows = [
                {
                    "id": f"O-{rng.randint(10**5, 10**6)}",
                    "status": rng.choice(["shipped", "pending", "refunded", "delivered"]),
                    "total": round(rng.uniform(5, 900), 2),
                }
                for _ in range(rng.randint(1, 4))
            ]
            self.tool_results.append(
                {"name": name, "result": {"rows": rows, "note": _text(rng, 30, 120)}}
            )
        self.decisions = [
            {"decision": _text(rng, 15, 40), "rationale": _text(rng, 60, 200)} for _ in range(256)
        ]

    def state_patch(self, rng: random.Random, seq: int) -> dict[str, Any]:
        stage = rng.choice(["triage", "lookup", "resolve", "confirm", "wrap_up"])
        patch: dict[str, Any] = {
            "stage": stage,
            "progress": {"step": seq, "pct": rng.randint(0, 100)},
            "cart": {f"item_{rng.randint(1, 12)}": rng.randint(1, 5)},
        }
        if rng.random() < 0.2:
            patch["cart"][f"item_{rng.randint(1, 12)}"] = None  # RFC 7386 delete
        if rng.random() < 0.3:
            patch["notes"] = _text(rng, 20, 80)
        return patch

    def fact(self, rng: random.Random) -> dict[str, Any]:
        return {
            "key": rng.choice(FACT_KEYS),
            "value": rng.choice(
                [
                    "gold",
                    "silver",
                    "EUR",
                    "USD",
                    "open",
                    "closed",
                    "fr",
                    "en",
                    rng.randint(1, 10**6),
                ]
            ),
        }

    def event(self, rng: random.Random, seq: int) -> tuple[str, str, dict[str, Any], str, int]:
        """(kind, role, content, searchable text, tokens) for position `seq` of a log."""
        r = rng.random()
        if r < 0.62:
            role, content, text, tokens = self.messages[rng.randrange(len(self.messages))]
            return "message", role, content, text, tokens
        if r < 0.74:
            return (
                "tool_call",
                "assistant",
                self.tool_calls[rng.randrange(len(self.tool_calls))],
                "",
                40,
            )
        if r < 0.86:
            return (
                "tool_result",
                "tool",
                self.tool_results[rng.randrange(len(self.tool_results))],
                "",
                80,
            )
        if r < 0.94:
            return "state", "", self.state_patch(rng, seq), "", 0
        if r < 0.98:
            content = self.fact(rng)
            return "fact", "", content, f"{content['key']}: {content['value']}", 0
        content = self.decisions[rng.randrange(len(self.decisions))]
        return "decision", "assistant", content, f"{content['decision']} {content['rationale']}", 0

    def api_event(self, rng: random.Random, seq: int) -> dict[str, Any]:
        kind, role, content, _text_, tokens = self.event(rng, seq)
        out: dict[str, Any] = {"kind": kind, "content": content}
        if role:
            out["role"] = role
        if tokens:
            out["tokens"] = tokens
        return out


def copy_escape(value: str) -> str:
    return (
        value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    )


# --------------------------------------------------------------------------------------------
# Database set-up and loading
# --------------------------------------------------------------------------------------------


def server_env(db: str, *, redis: bool = True) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": pg_url(db),
            "DEBUG": "false",
            "SECRET_KEY": SECRET_KEY,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "LOG_LEVEL": "WARNING",
            # Per scratch database: ids restart at 1 in each, and benches may run side by side.
            "CACHE_KEY_PREFIX": f"switchboard-bench-{db}",
            # One key drives the whole load: a limit far above it keeps the per-request count
            # (its real cost) without ever answering 429.
            "SWITCHBOARD_API_RATE_PER_MINUTE": "1000000000",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    if redis:
        env["REDIS_URL"] = REDIS_URL
    else:
        env.pop("REDIS_URL", None)
    return env


EVENT_COLUMNS = (
    "session_id, seq, kind, tier, role, content, text, tokens, cost, actor, "
    "idempotency_key, created_at"
)
DURABLE = {"fact", "decision", "lifecycle", "handoff"}


def load_session_events(
    conn,
    factory: ContentFactory,
    session_id: uuid.UUID,
    n: int,
    *,
    every: int,
    seed: int,
) -> tuple[int, int]:
    """COPY seqs 1..n into sessions_app_event and the auto snapshots into sessions_app_snapshot.

    Snapshots are folded while generating with the product's FoldedState (same merge_patch,
    same fact shape, same content hash) so they are real: state-at-seq starts from them.
    Returns (tokens, snapshots written).
    """
    from sessions_app.services.state import FoldedState

    rng = random.Random(seed)
    folded = FoldedState(seq=0)
    sid = str(session_id)
    actor = "key:bench-load"
    base = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    tokens_total = 0
    snapshots: list[str] = []
    chunk: list[str] = []
    # Pre-rendered JSON for pooled (immutable) contents: id(content) -> escaped JSON text.
    rendered: dict[int, str] = {}
    with conn.cursor() as cur:
        with cur.copy(f"COPY sessions_app_event ({EVENT_COLUMNS}) FROM STDIN") as copy:
            ts = ""
            for seq in range(1, n + 1):
                if seq % 1000 == 1 or not ts:
                    ts = (base + dt.timedelta(seconds=seq // 2)).isoformat()
                kind, role, content, text, tokens = factory.event(rng, seq)
                if kind in ("state", "fact"):
                    folded.apply(seq, kind, content)
                    content_json = copy_escape(json.dumps(content, separators=(",", ":")))
                else:
                    key = id(content)
                    content_json = rendered.get(key)
                    if content_json is None:
                        content_json = copy_escape(json.dumps(content, separators=(",", ":")))
                        rendered[key] = content_json
                tokens_total += tokens
                tier = "durable" if kind in DURABLE else "transient"
                chunk.append(
                    f"{sid}\t{seq}\t{kind}\t{tier}\t{role}\t{content_json}\t{copy_escape(text)}"
                    f"\t{tokens}\t0.000000\t{actor}\t\\N\t{ts}\n"
                )
                if every > 0 and seq % every == 0:
                    folded.seq = seq
                    snapshots.append(
                        f"{sid}\t{seq}\t{copy_escape(json.dumps(folded.state))}\t"
                        f"{copy_escape(json.dumps(folded.facts))}\t\t{folded.content_hash}\tauto\t"
                        f"{ts}\n"
                    )
                if len(chunk) >= 5000:
                    copy.write("".join(chunk))
                    chunk.clear()
            if chunk:
                copy.write("".join(chunk))
        if snapshots:
            with cur.copy(
                "COPY sessions_app_snapshot (session_id, seq, state, facts, summary,"
                " content_hash, reason, created_at) FROM STDIN"
            ) as copy:
                for i in range(0, len(snapshots), 2000):
                    copy.write("".join(snapshots[i : i + 2000]))
        cur.execute(
            "UPDATE sessions_app_session SET head_seq = %s, tokens_used = %s, updated_at = now()"
            " WHERE id = %s",
            (n, tokens_total, session_id),
        )
    conn.commit()
    return tokens_total, len(snapshots)


def verify_snapshot(session_id: uuid.UUID, at_seq: int) -> bool:
    """The stored snapshot at `at_seq` equals a fold of every event from seq 1 (no snapshot)."""
    from sessions_app.models import Event, Snapshot
    from sessions_app.services.state import FOLDED_KINDS, FoldedState

    snap = Snapshot.objects.get(session_id=session_id, seq=at_seq)
    folded = FoldedState(seq=0)
    rows = (
        Event.objects.filter(session_id=session_id, seq__lte=at_seq, kind__in=FOLDED_KINDS)
        .order_by("seq")
        .values_list("seq", "kind", "content")
    )
    for seq, kind, content in rows:
        folded.apply(seq, kind, content)
    return folded.content_hash == snap.content_hash


# --------------------------------------------------------------------------------------------
# Minimal keep-alive HTTP/1.1 client (raw socket: the client must stay light on 2 cores)
# --------------------------------------------------------------------------------------------


class HttpConn:
    def __init__(self, port: int, api_key: str) -> None:
        self.port = port
        self.auth = f"Authorization: Bearer {api_key}\r\n".encode()
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def build(self, method: str, path: str, body: Any = None) -> bytes:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode() + self.auth
        if body is None:
            return head + b"\r\n"
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        return (
            head
            + b"Content-Type: application/json\r\nContent-Length: "
            + str(len(data)).encode()
            + b"\r\n\r\n"
            + data
        )

    def send(self, raw: bytes) -> tuple[int, bytes]:
        self.sock.sendall(raw)
        return self._read()

    def _fill(self) -> None:
        data = self.sock.recv(262144)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def _read(self) -> tuple[int, bytes]:
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, rest = self.buf.partition(b"\r\n\r\n")
        status = int(head[9:12])
        length = None
        chunked = False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            lname = name.strip().lower()
            if lname == b"content-length":
                length = int(value.strip())
            elif lname == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        self.buf = rest
        if chunked:
            body = b""
            while True:
                while b"\r\n" not in self.buf:
                    self._fill()
                size_line, _, self.buf = self.buf.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                while len(self.buf) < size + 2:
                    self._fill()
                body += self.buf[:size]
                self.buf = self.buf[size + 2 :]
                if size == 0:
                    return status, body
        length = length or 0
        while len(self.buf) < length:
            self._fill()
        body, self.buf = self.buf[:length], self.buf[length:]
        return status, body

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        return self.send(self.build(method, path, body))


def timed(conn: HttpConn, raw: bytes, expect: tuple[int, ...] = (200, 201)) -> tuple[float, bytes]:
    t0 = time.perf_counter_ns()
    status, body = conn.send(raw)
    elapsed = (time.perf_counter_ns() - t0) / 1e6
    if status not in expect:
        raise RuntimeError(f"HTTP {status}: {body[:500]!r}")
    return elapsed, body


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------


SERVER_ROOT = ROOT  # --server-root: run the server from another checkout (before/after runs)
UVICORN = "uvicorn"  # config.asgi:application: what scripts/run starts, one kind of process
GRANIAN_WSGI = "granian-wsgi"  # config.wsgi:application under granian: the production split
GRANIAN_THREADS = 4  # blocking threads per granian worker (README's starting point)


def server_label(kind: str, workers: int, http: str, loop: str) -> str:
    """The server command a figure was taken through, as printed and recorded."""
    if kind == GRANIAN_WSGI:
        return f"granian --interface wsgi --workers {workers} --blocking-threads {GRANIAN_THREADS}"
    return f"uvicorn --workers {workers} --http {http} --loop {loop}"


class Server:
    def __init__(
        self,
        db: str,
        port: int,
        *,
        workers: int,
        http: str,
        loop: str,
        redis: bool = True,
        pool_max: int | None = None,
        wsgi: bool = False,
        kind: str = UVICORN,
    ) -> None:
        self.port = port
        # Both servers take these flags under these names.
        listen = ["--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)]
        if kind == GRANIAN_WSGI:
            # The production split's WSGI side (README, "Production"): plain HTTP only; the
            # websockets and async paths go to config.asgi behind the same proxy.
            self.label = server_label(kind, workers, http, loop) + (
                "" if redis else " (no REDIS_URL: in-memory channel layer)"
            )
            cmd = [
                str(VENV_BIN / "granian"),
                "--interface",
                "wsgi",
                "config.wsgi:application",
                "--working-dir",
                str(SERVER_ROOT),
                *listen,
                "--blocking-threads",
                str(GRANIAN_THREADS),
                "--no-ws",
                "--log-level",
                "warning",
            ]
        else:
            self.label = (
                server_label(kind, workers, http, loop)
                + ("" if redis else " (no REDIS_URL: in-memory channel layer)")
                + (" --interface wsgi (Django WSGIHandler)" if wsgi else "")
            )
            app = (
                ["--factory", "django.core.wsgi:get_wsgi_application", "--interface", "wsgi"]
                if wsgi
                else ["config.asgi:application"]
            )
            cmd = [
                str(VENV_BIN / "uvicorn"),
                *app,
                "--app-dir",
                str(SERVER_ROOT),
                *listen,
                "--http",
                http,
                "--loop",
                loop,
                "--lifespan",
                "off",
                "--no-access-log",
                "--log-level",
                "warning",
            ]
        env = server_env(db, redis=redis)
        if pool_max:
            env["DB_POOL_MAX"] = str(pool_max)
        self.log_path = ROOT / "bench" / "results" / f"server-{port}.log"
        self.log_file = open(self.log_path, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            cmd,
            cwd=SERVER_ROOT,
            env=env,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, api_key: str, path: str, timeout: float = 40) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited; see {self.log_path}:\n" + self.log_path.read_text()[-2000:]
                )
            try:
                conn = HttpConn(self.port, api_key)
                status, _ = conn.request("GET", path)
                conn.close()
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"server not ready after {timeout}s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            # The server runs in its own session: signal exactly its process group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
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


def agent_server(args: Any, project_name: str) -> tuple[Any, str, Server]:
    """A project with an API key in `args.db` (scratch, recreated and migrated, its settings in
    this process's environment and Django set up) and a server on it, not yet started: what
    the client-side benches (client_overhead, long_thread, frameworks) each begin with."""
    env = server_env(args.db)
    scratch_database(args.db, env)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from core.actors import Actor
    from core.services.projects import create_api_key, create_project

    project = create_project(project_name)
    _, key = create_api_key(project, name="bench", actor=Actor.system("bench"))
    server = Server(
        args.db,
        free_port(),
        workers=1 if args.smoke else DEFAULT_WORKERS,
        http=DEFAULT_HTTP,
        loop=DEFAULT_LOOP,
        kind=getattr(args, "server", UVICORN),
    )
    return project, key, server


def free_port() -> int:
    """A free port: from BENCH_PORTS ("LO-HI", for a machine shared by several runs), else any."""
    span = os.environ.get("BENCH_PORTS", "")
    candidates = [0]
    if span:
        lo, _, hi = span.partition("-")
        candidates = list(range(int(lo), int(hi) + 1))
        random.shuffle(candidates)
    for port in candidates:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError(f"no free port in BENCH_PORTS={span}")


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int) -> tuple[float, int]:
    """(user+system CPU seconds, parent pid) of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK, int(fields[1])


def tree_cpu(root: int) -> float:
    """CPU seconds used so far by `root` and its descendants (the server and its workers)."""
    procs: dict[int, tuple[float, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                procs[int(entry)] = _proc_cpu(int(entry))
    wanted, total, changed = {root}, 0.0, True
    while changed:
        changed = False
        for pid, (_, ppid) in procs.items():
            if ppid in wanted and pid not in wanted:
                wanted.add(pid)
                changed = True
    for pid in wanted:
        if pid in procs:
            total += procs[pid][0]
    return total


def pg_backends_cpu(conn, db: str) -> float:  # type: ignore[no-untyped-def]
    """CPU seconds used so far by the PostgreSQL backends connected to `db` (not ours)."""
    pids = [
        r[0]
        for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (db,)
        ).fetchall()
    ]
    conn.commit()
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += _proc_cpu(pid)[0]
    return total


def busy_cpu_seconds() -> tuple[float, float]:
    """(CPU seconds used so far on every core, of which interrupt handling), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal: all but idle and iowait are busy
    return (sum(fields[:8]) - fields[3] - fields[4]) / _TICK, (fields[5] + fields[6]) / _TICK


_SHARED_SERVICES = (
    "redis-server",
    "postgres: 15/main: checkpointer",
    "postgres: 15/main: background writer",
    "postgres: 15/main: walwriter",
    "postgres: 15/main: autovacuum launcher",
)


def shared_services_cpu() -> float:
    """CPU seconds of Redis and PostgreSQL's background processes (WAL writer, checkpointer)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            if cmdline.startswith(_SHARED_SERVICES):
                total += _proc_cpu(int(entry))[0]
    return total


class Interference:
    """Other work competing for the cores while the HTTP figures were taken: the CPU used by
    everything but this benchmark, its server, their database backends, Redis, PostgreSQL's
    background writers and interrupt handling (loopback traffic)."""

    def __init__(self, server: Server, conn, db: str) -> None:  # type: ignore[no-untyped-def]
        self.server, self.conn, self.db = server, conn, db

    def _busy_and_ours(self) -> tuple[float, float]:
        t = os.times()
        busy, interrupts = busy_cpu_seconds()
        return busy, (
            t.user
            + t.system
            + tree_cpu(self.server.proc.pid)
            + interrupts
            + pg_backends_cpu(self.conn, self.db)
            + shared_services_cpu()
        )

    def __enter__(self) -> Interference:
        self.t0 = time.perf_counter()
        self.busy0, self.ours0 = self._busy_and_ours()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.t0
        busy, ours = self._busy_and_ours()
        other = (busy - self.busy0) - (ours - self.ours0)
        self.cores = max(other, 0.0) / wall  # e.g. 0.5 = half a core busy with other work


class CpuMeter:
    """CPU per request of the server processes and of their PostgreSQL backends (ms).

    Robust where wall-clock is not: on a shared 2-core machine the latency includes waiting
    for a core, the CPU a request burns does not.
    """

    def __init__(self, server: Server, conn, db: str) -> None:  # type: ignore[no-untyped-def]
        self.server, self.conn, self.db = server, conn, db

    def __enter__(self) -> CpuMeter:
        self.s0 = tree_cpu(self.server.proc.pid)
        self.p0 = pg_backends_cpu(self.conn, self.db)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server_s = tree_cpu(self.server.proc.pid) - self.s0
        self.pg_s = pg_backends_cpu(self.conn, self.db) - self.p0

    def per_request(self, n: int) -> dict[str, float]:
        return {"server_cpu_ms": self.server_s * 1000 / n, "pg_cpu_ms": self.pg_s * 1000 / n}


# --------------------------------------------------------------------------------------------
# Baselines: plain psycopg on the same PostgreSQL
# --------------------------------------------------------------------------------------------


RAW_INSERT = (
    f"INSERT INTO bench_raw_event ({EVENT_COLUMNS})"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
# The seq allocated and the row inserted in one statement, as the API's append does.
RAW_ALLOCATE_AND_INSERT = (
    "WITH head AS (UPDATE bench_raw_session SET head_seq = head_seq + 1 WHERE id = %s"
    f" RETURNING head_seq) INSERT INTO bench_raw_event ({EVENT_COLUMNS})"
    " VALUES (%s, (SELECT head_seq FROM head), %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


def allocate_and_insert_params(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """RAW_ALLOCATE_AND_INSERT's parameters for a raw_row (its seq left to the statement)."""
    return (row[0], row[0], *row[2:])


def raw_row(session_id: uuid.UUID, seq: int, ev: dict[str, Any]) -> tuple[Any, ...]:
    from psycopg.types.json import Jsonb

    from sessions_app.services.log import searchable_text

    kind = ev["kind"]
    return (
        session_id,
        seq,
        kind,
        "durable" if kind in DURABLE else "transient",
        ev.get("role", ""),
        Jsonb(ev["content"]),
        searchable_text(kind, ev["content"]),
        ev.get("tokens", 0),
        0,
        "key:raw",
        None,
        dt.datetime.now(dt.UTC),
    )


# A copy of the events table as the design has it: its indexes (full-text GIN, the durable and
# lifecycle partials, BRIN, idempotency keys) and its foreign key to the session. Raw batches
# into it are what any API writing this schema could at most reach.
RAW_SCHEMA_TABLE = "bench_raw_event_schema"


def setup_raw_tables(conn) -> None:  # type: ignore[no-untyped-def]
    conn.execute(f"DROP TABLE IF EXISTS bench_raw_event, {RAW_SCHEMA_TABLE}, bench_raw_session")
    # Same columns as sessions_app_event; only the primary key (no FK, trigger, GIN, partials).
    conn.execute("CREATE TABLE bench_raw_event (LIKE sessions_app_event INCLUDING DEFAULTS)")
    conn.execute("ALTER TABLE bench_raw_event ADD PRIMARY KEY (session_id, seq)")
    conn.execute("CREATE TABLE bench_raw_session (id uuid PRIMARY KEY, head_seq int NOT NULL)")
    # (Its trigger fires on UPDATE and DELETE only: an insert does not pay for it.)
    conn.execute(f"CREATE TABLE {RAW_SCHEMA_TABLE} (LIKE sessions_app_event INCLUDING ALL)")
    conn.execute(
        f"ALTER TABLE {RAW_SCHEMA_TABLE} ADD FOREIGN KEY (session_id)"
        " REFERENCES bench_raw_session (id) DEFERRABLE INITIALLY DEFERRED"
    )
    conn.commit()


def raw_single(conn, events: list[dict[str, Any]], rounds: int, *, mode: str) -> list[list[float]]:  # type: ignore[no-untyped-def]
    """One row per transaction, four ways.

    mode "autocommit": one INSERT, its own (implicit) transaction: one round trip, the fastest
    way plain psycopg writes one row durably (the baseline). "tx": BEGIN; INSERT; COMMIT.
    "alloc": BEGIN; UPDATE head … RETURNING; INSERT; COMMIT (what an append must do at least).
    "alloc1": the same UPDATE and INSERT as one statement, autocommit: one round trip.
    """
    allocate = mode == "alloc"
    conn.autocommit = mode in ("autocommit", "alloc1")
    sid = uuid.uuid4()
    conn.execute("INSERT INTO bench_raw_session VALUES (%s, 0)", (sid,))
    conn.commit()
    rows = [raw_row(sid, i + 1, ev) for i, ev in enumerate(events)]
    per_round = len(rows) // rounds
    out: list[list[float]] = []
    cur = conn.cursor()
    i = 0
    for _ in range(rounds):
        samples = []
        for _ in range(per_round):
            row = rows[i]
            i += 1
            t0 = time.perf_counter_ns()
            if allocate:
                cur.execute(
                    "UPDATE bench_raw_session SET head_seq = head_seq + 1 WHERE id = %s"
                    " RETURNING head_seq",
                    (sid,),
                )
                cur.fetchone()
            if mode == "alloc1":
                cur.execute(RAW_ALLOCATE_AND_INSERT, allocate_and_insert_params(row))
            else:
                cur.execute(RAW_INSERT, row)
            if not conn.autocommit:
                conn.commit()
            samples.append((time.perf_counter_ns() - t0) / 1e6)
        out.append(samples)
    conn.autocommit = False
    return out


def raw_batches(  # type: ignore[no-untyped-def]
    conn, batches: list[list[dict[str, Any]]], rounds: int, table: str = "bench_raw_event"
) -> list[list[float]]:
    """100 rows per transaction with one multi-row INSERT (what bulk_create sends)."""
    sid = uuid.uuid4()
    conn.execute("INSERT INTO bench_raw_session VALUES (%s, 0)", (sid,))
    conn.commit()
    seq = 0
    prepared = []
    for batch in batches:
        rows = []
        for ev in batch:
            seq += 1
            rows.append(raw_row(sid, seq, ev))
        prepared.append(rows)
    size = len(batches[0])
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"] * size)
    sql = f"INSERT INTO {table} ({EVENT_COLUMNS}) VALUES {values}"
    per_round = len(prepared) // rounds
    out: list[list[float]] = []
    cur = conn.cursor()
    i = 0
    for _ in range(rounds):
        samples = []
        for _ in range(per_round):
            params = [v for row in prepared[i] for v in row]
            i += 1
            t0 = time.perf_counter_ns()
            cur.execute(sql, params)
            conn.commit()
            samples.append((time.perf_counter_ns() - t0) / 1e6)
        out.append(samples)
    return out


def raw_reads(  # type: ignore[no-untyped-def]
    conn, session_id: uuid.UUID, head: int, rounds: int, n: int, rng: random.Random
) -> dict[str, list[list[float]]]:
    """The same slices as the API, straight from psycopg (content as stored JSON text)."""
    cols = "seq, kind, tier, role, tokens, cost, actor, idempotency_key, created_at, content::text"
    last = f"SELECT {cols} FROM sessions_app_event WHERE session_id = %s ORDER BY seq DESC LIMIT 51"
    rng_slice = (
        f"SELECT {cols} FROM sessions_app_event WHERE session_id = %s AND seq > %s"
        " ORDER BY seq LIMIT 1001"
    )
    out: dict[str, list[list[float]]] = {"last50": [], "slice1000": []}
    cur = conn.cursor()
    for _ in range(rounds):
        a, b = [], []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            cur.execute(last, (session_id,))
            cur.fetchall()
            a.append((time.perf_counter_ns() - t0) / 1e6)
        for _ in range(max(1, n // 5)):
            after = rng.randint(0, head - 1000)
            t0 = time.perf_counter_ns()
            cur.execute(rng_slice, (session_id, after))
            cur.fetchall()
            b.append((time.perf_counter_ns() - t0) / 1e6)
        conn.commit()
        out["last50"].append(a)
        out["slice1000"].append(b)
    return out


# --------------------------------------------------------------------------------------------
# Storage
# --------------------------------------------------------------------------------------------


def storage(conn) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Bytes per event: the product table (all indexes) vs the same rows with only a PK."""
    conn.execute("DROP TABLE IF EXISTS bench_raw_store")
    conn.execute("CREATE TABLE bench_raw_store (LIKE sessions_app_event INCLUDING DEFAULTS)")
    conn.execute("INSERT INTO bench_raw_store SELECT * FROM sessions_app_event")
    conn.execute("ALTER TABLE bench_raw_store ADD PRIMARY KEY (session_id, seq)")
    conn.commit()
    conn.autocommit = True
    with contextlib.suppress(Exception):
        conn.execute("SELECT gin_clean_pending_list('event_text_search'::regclass)")
    conn.execute("VACUUM ANALYZE sessions_app_event")
    conn.execute("VACUUM ANALYZE bench_raw_store")
    conn.autocommit = False
    rows = conn.execute("SELECT count(*) FROM sessions_app_event").fetchone()[0]
    total = conn.execute("SELECT pg_total_relation_size('sessions_app_event')").fetchone()[0]
    heap = conn.execute("SELECT pg_table_size('sessions_app_event')").fetchone()[0]
    raw_total = conn.execute("SELECT pg_total_relation_size('bench_raw_store')").fetchone()[0]
    raw_heap = conn.execute("SELECT pg_table_size('bench_raw_store')").fetchone()[0]
    indexes = dict(
        conn.execute(
            "SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = 'sessions_app_event'::regclass ORDER BY 2 DESC"
        ).fetchall()
    )
    avg_content = conn.execute(
        "SELECT avg(pg_column_size(content)), avg(octet_length(content::text)),"
        " avg(pg_column_size(text)) FROM sessions_app_event"
    ).fetchone()
    conn.commit()
    conn.execute("DROP TABLE bench_raw_store")
    conn.commit()
    return {
        "rows": rows,
        "total_bytes": total,
        "heap_bytes": heap,
        "index_bytes": indexes,
        "raw_total_bytes": raw_total,
        "raw_heap_bytes": raw_heap,
        "bytes_per_event": total / rows,
        "raw_bytes_per_event": raw_total / rows,
        "ratio": total / raw_total,
        "avg_content_stored_bytes": float(avg_content[0]),
        "avg_content_json_bytes": float(avg_content[1]),
        "avg_text_stored_bytes": float(avg_content[2]),
    }


# --------------------------------------------------------------------------------------------
# API workloads
# --------------------------------------------------------------------------------------------


def append_bodies(factory: ContentFactory, n: int, seed: int, batch: int = 1) -> list[bytes]:
    rng = random.Random(seed)
    return [
        json.dumps(
            {"events": [factory.api_event(rng, i) for _ in range(batch)]}, separators=(",", ":")
        ).encode()
        for i in range(n)
    ]


def api_single_appends(
    port: int, key: str, sessions: dict[str, str], bodies: dict[str, list[bytes]], rounds: int
) -> dict[str, list[list[float]]]:
    """Interleaved by round (size A, B, C, then again) so drift hits every size alike."""
    conn = HttpConn(port, key)
    out: dict[str, list[list[float]]] = {label: [] for label in sessions}
    try:
        for r in range(rounds):
            for label, sid in sessions.items():
                path = f"/api/v1/sessions/{sid}/events"
                per_round = len(bodies[label]) // rounds
                chunk = bodies[label][r * per_round : (r + 1) * per_round]
                raws = [conn.build("POST", path, b) for b in chunk]
                out[label].append([timed(conn, raw, (201,))[0] for raw in raws])
    finally:
        conn.close()
    return out


# The cheapest request of the stack: a Django view behind the whole middleware stack that
# touches neither PostgreSQL nor Redis.
HEALTHZ_REQUEST = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def api_healthz(port: int, n: int, rounds: int) -> list[list[float]]:
    """GET /healthz: the cheapest request of the same stack (no database, no Redis)."""
    conn = HttpConn(port, "")
    try:
        return [[timed(conn, HEALTHZ_REQUEST, (200,))[0] for _ in range(n)] for _ in range(rounds)]
    finally:
        conn.close()


def api_batches(
    port: int, key: str, sid: str, bodies: list[bytes], rounds: int
) -> list[list[float]]:
    conn = HttpConn(port, key)
    path = f"/api/v1/sessions/{sid}/events"
    per_round = len(bodies) // rounds
    out = []
    try:
        for r in range(rounds):
            raws = [
                conn.build("POST", path, b) for b in bodies[r * per_round : (r + 1) * per_round]
            ]
            out.append([timed(conn, raw, (201,))[0] for raw in raws])
    finally:
        conn.close()
    return out


def api_reads(
    port: int,
    key: str,
    sid: str,
    head: int,
    rounds: int,
    n: int,
    rng: random.Random,
    meter: Any = None,
) -> dict[str, Any]:
    """Interleaved by round: last 50, 1,000-event slices, state at seq, forks."""
    conn = HttpConn(port, key)
    base = f"/api/v1/sessions/{sid}"
    out: dict[str, Any] = {
        "last50": [],
        "slice1000": [],
        "state": [],
        "fork": [],
        "slice1000_bytes": 0,
        "last50_bytes": 0,
    }
    cpu: dict[str, list[float]] = {
        k: [0.0, 0.0, 0] for k in ("last50", "slice1000", "state", "fork")
    }
    forks: list[str] = []

    def measured(
        kind: str, requests: list[tuple[bytes, tuple[int, ...]]]
    ) -> list[tuple[float, bytes]]:
        m = meter() if meter else None
        if m:
            m.__enter__()
        done = [timed(conn, raw, expect) for raw, expect in requests]
        if m:
            m.__exit__()
            cpu[kind][0] += m.server_s
            cpu[kind][1] += m.pg_s
            cpu[kind][2] += len(requests)
        return done

    try:
        last = conn.build("GET", f"{base}/events?order=desc&limit=50")
        for _ in range(rounds):
            done = measured("last50", [(last, (200,))] * n)
            out["last50"].append([ms for ms, _ in done])
            body = done[-1][1]
            out["last50_bytes"] = len(body)
            page = json.loads(body)
            assert len(page["events"]) == 50 and page["events"][0]["seq"] >= head, page["head_seq"]

            afters = [rng.randint(0, head - 1000) for _ in range(max(1, n // 5))]
            done = measured(
                "slice1000",
                [
                    (conn.build("GET", f"{base}/events?after_seq={a}&limit=1000"), (200,))
                    for a in afters
                ],
            )
            out["slice1000"].append([ms for ms, _ in done])
            out["slice1000_bytes"] = len(done[-1][1])
            page = json.loads(done[-1][1])
            assert len(page["events"]) == 1000 and page["events"][0]["seq"] == afters[-1] + 1

            ats = [rng.randint(1, head) for _ in range(n // 2)]
            done = measured(
                "state", [(conn.build("GET", f"{base}/state?at_seq={a}"), (200,)) for a in ats]
            )
            out["state"].append([ms for ms, _ in done])
            assert json.loads(done[-1][1])["seq"] == ats[-1]

            ats = [rng.randint(1, head) for _ in range(max(1, n // 5))]
            done = measured(
                "fork", [(conn.build("POST", f"{base}/fork", {"at_seq": a}), (201,)) for a in ats]
            )
            out["fork"].append([ms for ms, _ in done])
            forks.extend(json.loads(body)["id"] for _, body in done)
    finally:
        conn.close()
    out["forks"] = forks
    out["cpu"] = {
        k: {"server_cpu_ms": v[0] * 1000 / v[2], "pg_cpu_ms": v[1] * 1000 / v[2]}
        for k, v in cpu.items()
        if v[2]
    }
    return out


def concurrent_appends(
    port: int, key: str, sids: list[str], bodies: list[bytes], seconds: float
) -> dict[str, Any]:
    """One keep-alive connection and one session per thread, for `seconds`: appends/s."""
    counts = [0] * len(sids)
    lat: list[list[float]] = [[] for _ in sids]
    stop = threading.Event()
    errors: list[str] = []

    def worker(i: int) -> None:
        try:
            conn = HttpConn(port, key)
            path = f"/api/v1/sessions/{sids[i]}/events"
            raws = [conn.build("POST", path, b) for b in bodies]
            for raw in raws[:20]:  # warm this connection's worker
                timed(conn, raw, (201,))
            barrier.wait()
            j = 0
            while not stop.is_set():
                ms, _ = timed(conn, raws[j % len(raws)], (201,))
                lat[i].append(ms)
                counts[i] += 1
                j += 1
            conn.close()
        except Exception as exc:  # noqa: BLE001
            errors.append(repr(exc))
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.abort()

    barrier = threading.Barrier(len(sids) + 1)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(sids))]
    for t in threads:
        t.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=60)
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(errors[0])
    flat = [v for lst in lat for v in lst]
    return {
        "appends_per_s": sum(counts) / elapsed,
        "p50": pct(flat, 0.5),
        "p95": pct(flat, 0.95),
        "connections": len(sids),
    }


# --------------------------------------------------------------------------------------------
# A fleet: 32 agents at once, each its own session and connection (client processes)
# --------------------------------------------------------------------------------------------

FLEET_AGENTS = 32
FLEET_CLIENT_PROCESSES = 2  # the client's share of the 2 cores stays small: asyncio, no threads
FLEET_WARM_REQUESTS = 10  # per agent, before the measured window (inside the CPU meter)


async def _fleet_http_agent(
    port: int, key: str, sid: str | None, bodies: list[bytes], start: float, stop: float
) -> tuple[int, list[float]]:
    """Appends to session `sid`; with no session, GETs /healthz (the stack's ceiling)."""
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if sid is None:
        raws, expect = [HEALTHZ_REQUEST], 200
    else:
        head = (
            f"POST /api/v1/sessions/{sid}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
        ).encode()
        raws, expect = [head + b"Content-Length: %d\r\n\r\n" % len(b) + b for b in bodies], 201

    async def one(raw: bytes) -> None:
        writer.write(raw)
        header = await reader.readuntil(b"\r\n\r\n")
        status = int(header[9:12])
        length = 0
        for line in header.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        body = await reader.readexactly(length)
        if status != expect:
            raise RuntimeError(f"HTTP {status}: {body[:300]!r}")

    for i in range(FLEET_WARM_REQUESTS):  # warm this connection
        await one(raws[i % len(raws)])
    while time.time() < start:
        await asyncio.sleep(0.005)
    lat: list[float] = []
    j = 0
    while time.time() < stop:
        t0 = time.perf_counter_ns()
        await one(raws[j % len(raws)])
        lat.append((time.perf_counter_ns() - t0) / 1e6)
        j += 1
    writer.close()
    return j, lat


async def _fleet_raw_agent(
    db: str, events: list[tuple[Any, ...]], start: float, stop: float, mode: str
) -> tuple[int, list[float]]:
    import asyncio

    import psycopg

    autocommit = mode in ("autocommit", "alloc1")
    conn = await psycopg.AsyncConnection.connect(conninfo=pg_url(db), autocommit=autocommit)
    sid = uuid.uuid4()
    await conn.execute("INSERT INTO bench_raw_session VALUES (%s, 0)", (sid,))
    if not autocommit:
        await conn.commit()
    rows = events  # raw_row()s made by the parent (this process has no Django)
    cur = conn.cursor()
    seq = 0

    async def one() -> None:
        nonlocal seq
        row = rows[seq % len(rows)]
        seq += 1
        row = (sid, seq, *row[2:])
        if mode == "alloc":
            await cur.execute(
                "UPDATE bench_raw_session SET head_seq = head_seq + 1 WHERE id = %s"
                " RETURNING head_seq",
                (sid,),
            )
            await cur.fetchone()
        if mode == "alloc1":
            await cur.execute(RAW_ALLOCATE_AND_INSERT, allocate_and_insert_params(row))
        else:
            await cur.execute(RAW_INSERT, row)
        if not autocommit:
            await conn.commit()

    for _ in range(10):
        await one()
    while time.time() < start:
        await asyncio.sleep(0.005)
    lat: list[float] = []
    n = 0
    while time.time() < stop:
        t0 = time.perf_counter_ns()
        await one()
        lat.append((time.perf_counter_ns() - t0) / 1e6)
        n += 1
    await conn.close()
    return n, lat


def _fleet_client(job: dict[str, Any]) -> tuple[int, list[float]]:
    """One client process: its share of the agents as asyncio tasks."""
    import asyncio

    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

    async def run() -> list[tuple[int, list[float]]]:
        if job["kind"] == "http":
            coros = [
                _fleet_http_agent(
                    job["port"], job["key"], sid, job["bodies"], job["start"], job["stop"]
                )
                for sid in job["sids"]
            ]
        else:
            coros = [
                _fleet_raw_agent(job["db"], job["events"], job["start"], job["stop"], job["mode"])
                for _ in range(job["agents"])
            ]
        return await asyncio.gather(*coros)

    done = asyncio.run(run())
    return sum(n for n, _ in done), [v for _, lat in done for v in lat]


def fleet(jobs: list[dict[str, Any]], seconds: float, warm: float = 3.0) -> dict[str, Any]:
    """Run `jobs` (one per client process) together for `seconds` after a common start."""
    import multiprocessing

    start = time.time() + warm
    stop = start + seconds
    for job in jobs:
        job["start"], job["stop"] = start, stop
    with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
        parts = pool.map(_fleet_client, jobs)
    count = sum(n for n, _ in parts)
    flat = [v for _, lat in parts for v in lat]
    return {
        "agents": sum(len(j.get("sids", ())) or j.get("agents", 0) for j in jobs),
        "events_per_s": count / seconds,
        "p50": pct(flat, 0.5),
        "p95": pct(flat, 0.95),
        "n": count,
    }


def fleet_http(
    port: int,
    key: str,
    sids: list[str] | list[None],
    bodies: list[bytes],
    seconds: float,
    warm: float = 3.0,
) -> dict[str, Any]:
    per = len(sids) // FLEET_CLIENT_PROCESSES
    jobs = [
        {
            "kind": "http",
            "port": port,
            "key": key,
            "sids": sids[i * per : (i + 1) * per],
            "bodies": bodies,
        }
        for i in range(FLEET_CLIENT_PROCESSES)
    ]
    return fleet(jobs, seconds, warm)


def fleet_raw(
    db: str, events: list[dict[str, Any]], seconds: float, mode: str, warm: float = 3.0
) -> dict[str, Any]:
    rows = [raw_row(uuid.UUID(int=0), i + 1, ev) for i, ev in enumerate(events)]
    per = FLEET_AGENTS // FLEET_CLIENT_PROCESSES
    jobs = [
        {"kind": "raw", "db": db, "events": rows, "agents": per, "mode": mode}
        for _ in range(FLEET_CLIENT_PROCESSES)
    ]
    return fleet(jobs, seconds, warm)


# --------------------------------------------------------------------------------------------
# In-process service cost (no HTTP): where the time goes
# --------------------------------------------------------------------------------------------


def service_appends(
    session_id: uuid.UUID, factory: ContentFactory, rounds: int, n: int
) -> dict[str, Any]:
    """append_events() called directly, with the Redis broadcast stubbed out.

    (In a plain sync process every async_to_sync would start a fresh event loop and a fresh
    Redis connection, which is not what the server does, so the broadcast is measured through
    the server instead: see 'broadcast cost'.)
    """
    from core import domain_events
    from core.actors import Actor
    from sessions_app.models import Session
    from sessions_app.services.events import EventDraft, append_events

    rng = random.Random(99)
    session = Session.objects.get(pk=session_id)
    actor = Actor(label="key:bench")
    original = domain_events.send_to_groups
    domain_events.send_to_groups = lambda groups, message, **options: True
    samples: list[list[float]] = []
    try:
        for _ in range(rounds):
            lst = []
            for i in range(n):
                ev = factory.api_event(rng, i)
                draft = EventDraft(
                    kind=ev["kind"],
                    content=ev["content"],
                    role=ev.get("role", ""),
                    tokens=ev.get("tokens", 0),
                )
                t0 = time.perf_counter_ns()
                append_events(session, [draft], actor=actor)
                lst.append((time.perf_counter_ns() - t0) / 1e6)
            samples.append(lst)
    finally:
        domain_events.send_to_groups = original
    return summarise(samples)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def status(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def fmt_ms(v: float) -> str:
    return f"{v:7.2f}"


def render(results: dict[str, Any]) -> str:
    L: list[str] = []
    w = L.append
    cfg = results["config"]
    bar = "=" * 108
    w(bar)
    w(
        f"Switchboard ingest benchmark  {results['started_at']}  git {cfg['git']}  "
        f"{'QUICK' if cfg['quick'] else 'FULL'} run"
    )
    w(
        f"PostgreSQL {cfg['postgres']} · Python {cfg['python']} · {cfg['cpus']} CPUs, shared by "
        "the client and the server: they compete, so latencies include the client's own time"
    )
    others = results.get("other_cores", 0.0)
    w(
        f"other work on the machine during the HTTP figures: {others:.2f} of {cfg['cpus']} cores"
        + (
            "  << latencies are inflated; CPU per request is the steadier figure"
            if others > 0.25
            else " (quiet)"
        )
    )
    w(
        f"server: {cfg['server']} --lifespan off --no-access-log, DEBUG=false, REDIS_URL set (each"
        f" append does its after-commit group_send), snapshot every {cfg['snapshot_every']} events"
    )
    if cfg.get("server_root") and cfg["server_root"] != str(ROOT):
        w(f"server code from {cfg['server_root']} (--server-root); in-process rows use this tree")
    w(
        f"client: raw-socket HTTP/1.1 keep-alive, one request at a time, {cfg['rounds']} rounds; "
        "p50/p95 over all samples; [a-b] = spread of the per-round medians"
    )
    w(bar)
    hdr = f"{'':56}{'p50 ms':>8}{'p95 ms':>9}  {'baseline':>11}{'ratio':>8}   target"

    def line(
        label: str,
        s: dict[str, Any],
        base: float | None,
        target: str,
        ok: bool | None,
        spread: bool = True,
    ) -> None:
        rng = f" [{s['round_p50_min']:.2f}-{s['round_p50_max']:.2f}]" if spread else ""
        head = f"  {label}{rng}"
        basecol = f"{base:8.2f} ms{s['p50'] / base:7.1f}x" if base else f"{'':11}{'':8}"
        verdict = "" if ok is None else ("PASS" if ok else "MISS")
        w(f"{head:<56}{s['p50']:8.2f}{s['p95']:9.2f}  {basecol}   {target:<14}{verdict}")

    ap, raw = results["append_single"], results["raw_single"]
    w("")
    w("APPEND, one event per request (HTTP API)  vs  raw psycopg: one-row INSERT, own transaction")
    w(hdr)
    labels = list(ap)
    for label in labels:
        line(
            f"session at {label:>9} events",
            ap[label],
            raw["p50"],
            "p50 <= 2 ms",
            ap[label]["p50"] <= 2.0,
        )
    flat = ap[labels[-1]]["p50"] / ap[labels[0]]["p50"]
    w(
        f"  {'flat: p50 at ' + labels[-1] + ' / p50 at ' + labels[0]:<54}{flat:8.2f}x"
        f"{'':30}<= 1.20x       {'PASS' if flat <= 1.2 else 'MISS'}"
    )
    cpu = results["append_single_cpu"]
    w(
        f"  CPU per append: server {cpu['server_cpu_ms']:.2f} ms, its PostgreSQL backend "
        f"{cpu['pg_cpu_ms']:.2f} ms"
    )
    line("raw psycopg, autocommit INSERT (baseline)", raw, None, "", None, False)
    line("raw psycopg, BEGIN; INSERT; COMMIT", results["raw_single_tx"], None, "", None, False)
    line(
        "raw psycopg, BEGIN; UPDATE head; INSERT; COMMIT",
        results["raw_single_alloc"],
        None,
        "",
        None,
        False,
    )
    alloc1 = results.get("raw_single_alloc1")
    if alloc1:
        line("raw psycopg, UPDATE head + INSERT, one statement", alloc1, None, "", None, False)
    line(
        "append_events() in-process: no HTTP, no broadcast",
        results["service_single"],
        None,
        "",
        None,
        False,
    )
    if (hz := results.get("healthz")) and alloc1:
        line("GET /healthz (no database, no Redis)", hz, None, "", None)
        w(
            f"  CPU per GET /healthz: server {results['healthz_cpu']['server_cpu_ms']:.2f} ms."
            f" An append's p50 can be no less than GET /healthz's + the one-statement"
            f" allocation's = {hz['p50'] + alloc1['p50']:.2f} ms here"
        )
    b = results.get("broadcast")
    if b:
        w(
            f"  broadcast (2 group_sends to Redis): p50 {b['with_redis_p50']:.2f} ms with Redis vs "
            f"{b['without_redis_p50']:.2f} ms in-memory layer = {b['cost_ms']:+.2f} ms/append; "
            f"server CPU {b['with_redis_cpu_ms']:.2f} vs {b['without_redis_cpu_ms']:.2f} ms"
        )

    w("")
    w("APPEND, batches of 100 (HTTP API)  vs  raw psycopg: 100 rows per transaction, one INSERT")
    bt, rb = results["append_batch"], results["raw_batch"]
    api_rate, raw_rate = 100_000 / bt["p50"], 100_000 / rb["p50"]
    share = api_rate / raw_rate
    cpu = results["append_batch_cpu"]
    w(
        f"  API  {api_rate:>8,.0f} events/s   batch p50 {bt['p50']:6.2f} ms"
        f"  p95 {bt['p95']:6.2f} ms"
        f"   CPU per batch: server {cpu['server_cpu_ms']:.1f} ms, PostgreSQL "
        f"{cpu['pg_cpu_ms']:.1f} ms"
    )
    w(
        f"  raw  {raw_rate:>8,.0f} events/s   batch p50 {rb['p50']:6.2f} ms"
        f"  p95 {rb['p95']:6.2f} ms   CPU per batch: PostgreSQL {rb['pg_cpu_ms']:.1f} ms"
        " (a table with only the primary key)"
    )
    rs = results["raw_batch_schema"]
    schema_rate = 100_000 / rs["p50"]
    w(
        f"  raw  {schema_rate:>8,.0f} events/s   batch p50 {rs['p50']:6.2f} ms"
        f"  p95 {rs['p95']:6.2f} ms   CPU per batch: PostgreSQL {rs['pg_cpu_ms']:.1f} ms"
        " (the events table's indexes and foreign key)"
    )
    w(
        f"  {'API / raw = ' + format(share, '.0%'):<54}{'':41}>= 40% of raw  "
        f"{'PASS' if share >= 0.40 else 'MISS'}"
    )
    w(
        f"  the schema's own floor: raw into the events table's indexes / raw = "
        f"{schema_rate / raw_rate:.0%}; API / that floor = {api_rate / schema_rate:.0%}"
    )

    rd, rr, big = results["reads"], results["raw_reads"], cfg["big"]
    w("")
    w(f"READS on the {big:,}-event session (HTTP API)  vs  the same SELECT with raw psycopg")
    w(hdr)
    line(
        f"read last 50 ({rd['last50_bytes']:,} B)",
        rd["last50"],
        rr["last50"]["p50"],
        "p95 <= 3 ms",
        rd["last50"]["p95"] <= 3.0,
    )
    line(
        f"1,000-event slice, random offset ({rd['slice1000_bytes'] / 1024:,.0f} KiB)",
        rd["slice1000"],
        rr["slice1000"]["p50"],
        "p95 <= 15 ms",
        rd["slice1000"]["p95"] <= 15.0,
    )
    line("state at a random seq", rd["state"], None, "p95 <= 10 ms", rd["state"]["p95"] <= 10.0)
    copied = rd["fork_rows_copied"]
    line(
        "fork at a random seq",
        rd["fork"],
        None,
        "p95 <= 5 ms",
        rd["fork"]["p95"] <= 5.0 and copied == 0,
    )
    w(
        f"  fork check: {rd['forks_made']} forks; event rows {rd['rows_before']:,} before, "
        f"{rd['rows_after']:,} after (copied: {copied}); rows owned by the forks: "
        f"{rd['fork_owned_rows']}"
    )
    cpus = ", ".join(
        f"{k} {v['server_cpu_ms']:.2f}+{v['pg_cpu_ms']:.2f}" for k, v in rd["cpu"].items()
    )
    w(f"  CPU per request, server+PostgreSQL ms: {cpus}")

    fa, fr, fra = results.get("fleet_api"), results.get("fleet_raw"), results.get("fleet_raw_alloc")
    fc = results.get("fleet_ceiling")
    if fa and fr and fr["events_per_s"]:  # (a smoke run's fleet may not get to send)
        w("")
        w(
            f"FLEET: {fa['agents']} agents at once, each its own session and keep-alive connection,"
            f" single-event appends ({FLEET_CLIENT_PROCESSES} asyncio client processes)"
        )
        w(f"  {'':54}{'events/s':>10}{'p50 ms':>8}{'p95 ms':>9}")
        w(
            f"  {'API, ' + cfg['server']:<54}{fa['events_per_s']:10,.0f}{fa['p50']:8.2f}"
            f"{fa['p95']:9.2f}"
        )
        w(
            f"  {'raw psycopg, 32 connections, autocommit INSERT':<54}"
            f"{fr['events_per_s']:10,.0f}{fr['p50']:8.2f}{fr['p95']:9.2f}"
        )
        if fra:
            w(
                f"  {'raw psycopg, 32 connections, UPDATE head + INSERT':<54}"
                f"{fra['events_per_s']:10,.0f}{fra['p50']:8.2f}{fra['p95']:9.2f}"
            )
        if fra1 := results.get("fleet_raw_alloc1"):
            w(
                f"  {'raw psycopg, 32 connections, UPDATE + INSERT in one':<54}"
                f"{fra1['events_per_s']:10,.0f}{fra1['p50']:8.2f}{fra1['p95']:9.2f}"
                f"   (= {fra1['events_per_s'] / fr['events_per_s']:.0%} of raw)"
            )
        if fc:
            w(
                f"  {'ceiling: GET /healthz, no database, no Redis':<54}"
                f"{fc['events_per_s']:10,.0f}{fc['p50']:8.2f}{fc['p95']:9.2f}"
                f"   (requests/s; = {fc['events_per_s'] / fr['events_per_s']:.0%} of raw)"
            )
        if "cpu" in fa and fc:
            # At half of raw's rate the machine's two cores give each event this much CPU, for
            # every process together: client, server, PostgreSQL, Redis.
            budget = 2 * 1000 / (0.5 * fr["events_per_s"])
            w(
                f"  CPU per request: append server {fa['cpu']['server_cpu_ms']:.2f} ms +"
                f" PostgreSQL {fa['cpu']['pg_cpu_ms']:.2f} ms; GET /healthz server"
                f" {fc['cpu']['server_cpu_ms']:.2f} ms. At 50% of raw the 2 cores allow"
                f" {budget:.2f} ms per event, all processes together"
            )
        share = fa["events_per_s"] / fr["events_per_s"]
        w(
            f"  {'API / raw = ' + format(share, '.0%'):<54}{'':41}>= 50% of raw  "
            f"{'PASS' if share >= 0.5 else 'MISS'}"
        )

    st = results["storage"]
    w("")
    w("STORAGE, sessions_app_event with all its indexes  vs  the same rows, primary key only")
    w(
        f"  product {st['bytes_per_event']:6.0f} B/event   raw {st['raw_bytes_per_event']:6.0f} "
        f"B/event   ratio {st['ratio']:.2f}x{'':40}<= 2x raw      "
        f"{'PASS' if st['ratio'] <= 2.0 else 'MISS'}"
    )
    idx = ", ".join(f"{k} {v / st['rows']:.0f}" for k, v in st["index_bytes"].items())
    w(
        f"  {st['rows']:,} rows; heap {st['heap_bytes'] / st['rows']:.0f} B/event; indexes "
        f"(B/event): {idx}"
    )
    w(
        f"  content: {st['avg_content_json_bytes']:.0f} B of JSON per event on average "
        f"(jsonb {st['avg_content_stored_bytes']:.0f} B, searchable text "
        f"{st['avg_text_stored_bytes']:.0f} B)"
    )

    if results.get("matrix"):
        w("")
        w(
            "SERVER SETUPS (Redis on): sequential = 1 keep-alive connection, single-event appends;"
            " concurrent = 4 connections on 4 sessions"
        )
        w(f"  {'setup':<52}{'seq p50':>8}{'seq p95':>9}{'CPU/req':>9}{'conc/s':>9}{'conc p50':>10}")
        for m in results["matrix"]:
            w(
                f"  {m['label']:<52}{m['seq']['p50']:8.2f}{m['seq']['p95']:9.2f}"
                f"{m['seq_cpu']['server_cpu_ms']:9.2f}{m['conc']['appends_per_s']:9.0f}"
                f"{m['conc']['p50']:10.2f}"
            )
        w(f"  the figures above use: {cfg['server']}")

    w("")
    w("Load: " + results["load"]["summary"])
    w("")
    w(
        "REFERENCE (from the issue; in-process, no HTTP; other machines and libraries, not measured"
        " here):"
    )
    for ref in REFERENCE_LINES:
        w(f"  {ref}")
    w(bar)
    return "\n".join(L)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def warm_up(
    port: int,
    key: str,
    factory: ContentFactory,
    warm_sid: str,
    read_sid: str,
    workers: int,
    appends: int = 30,
) -> None:
    """Every worker process (connections spread over them), every endpoint measured."""
    warm = append_bodies(factory, appends, seed=1)
    for _ in range(max(2, workers * 3)):
        c = HttpConn(port, key)
        for body in warm:
            timed(c, c.build("POST", f"/api/v1/sessions/{warm_sid}/events", body), (201,))
        for q in ("events?order=desc&limit=50", "events?after_seq=10&limit=1000", "state?at_seq=1"):
            timed(c, c.build("GET", f"/api/v1/sessions/{read_sid}/{q}"))
        c.close()


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="small run: big session 100,000 events, 3 rounds, no server matrix",
    )
    p.add_argument("--rounds", type=int, help="rounds per measurement (default 5; quick 3)")
    p.add_argument(
        "--appends",
        type=int,
        help="single-event appends per session size per round (default 200; quick 100)",
    )
    p.add_argument("--batches", type=int, help="batches of 100 per round (default 30; quick 10)")
    p.add_argument(
        "--reads",
        type=int,
        help="read-last-50 requests per round (state: half, slices/forks: a fifth; "
        "default 100; quick 40)",
    )
    p.add_argument(
        "--sizes",
        default=None,
        help="comma-separated session sizes (default 100,10000,1000000; quick "
        "100,10000,100000); the largest one is the read benchmark's session",
    )
    p.add_argument(
        "--db", default=scratch_name("switchboard_bench"), help="scratch database (dropped first)"
    )
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    p.add_argument("--http", default=DEFAULT_HTTP, choices=["httptools", "h11"])
    p.add_argument("--loop", default=DEFAULT_LOOP, choices=["uvloop", "asyncio"])
    p.add_argument(
        "--server-matrix",
        dest="matrix",
        action="store_true",
        default=None,
        help="also compare server setups (default on in full runs)",
    )
    p.add_argument("--no-server-matrix", dest="matrix", action="store_false")
    p.add_argument(
        "--keep-server",
        action="store_true",
        help="leave the server running at the end (prints its port); default: stop it",
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--fleet-seconds",
        type=float,
        help=f"seconds of the {FLEET_AGENTS}-agent fleet run, and of each raw psycopg run "
        "beside it (default 10; quick 5)",
    )
    p.add_argument(
        "--server-root",
        type=Path,
        default=ROOT,
        help="run the server from this checkout (same schema), e.g. a copy of the "
        "tree before a change, for before/after figures",
    )
    p.add_argument(
        "--server",
        choices=[UVICORN, GRANIAN_WSGI],
        default=UVICORN,
        help="the server the figures are taken through: uvicorn config.asgi:application (what "
        "scripts/run starts; default) or granian's WSGI server with config.wsgi:application "
        "(the production split's WSGI side, README). Full runs measure both in SERVER SETUPS",
    )
    add_smoke_flag(p)
    args = p.parse_args()
    smoke(
        args,
        quick=True,
        rounds=1,
        appends=5,
        batches=2,
        reads=4,
        sizes="100,1000",
        matrix=False,
        fleet_seconds=0.5,
        workers=1,
    )
    global SERVER_ROOT
    SERVER_ROOT = args.server_root.resolve()

    quick = args.quick
    rounds = args.rounds or (3 if quick else 5)
    n_append = args.appends or (100 if quick else 200)
    n_batch = args.batches or (10 if quick else 30)
    n_reads = args.reads or (40 if quick else 100)
    sizes = [
        int(s)
        for s in (args.sizes or ("100,10000,100000" if quick else "100,10000,1000000")).split(",")
    ]
    matrix = (not quick) if args.matrix is None else args.matrix
    fleet_seconds = args.fleet_seconds or (5.0 if quick else 10.0)
    fleet_warm = 1.0 if args.smoke else 3.0  # before the fleet's window: spawn and connect
    big = max(sizes)

    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).replace(microsecond=0)
    t_start = time.perf_counter()

    # -- database ---------------------------------------------------------------------------
    log(f"recreating database {args.db} and migrating")
    scratch_database(args.db, server_env(args.db))
    os.environ.update(server_env(args.db))

    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings

    from core.actors import Actor
    from core.services.projects import create_api_key, create_project
    from sessions_app.services.sessions import open_session

    every = settings.SWITCHBOARD_SNAPSHOT_EVERY
    project = create_project("bench")
    _, api_key = create_api_key(project, name="bench", actor=Actor.system("bench"))
    actor = Actor.system("bench")

    def new_session(title: str) -> uuid.UUID:
        session, _ = open_session(project, agent_name="bench-agent", actor=actor, title=title)
        return session.pk

    factory = ContentFactory(seed=args.seed)
    conn = pg_connect(args.db)
    pg_version = conn.execute("SHOW server_version").fetchone()[0]

    loaded: dict[int, uuid.UUID] = {}
    load_notes = []
    for i, size in enumerate(sorted(sizes, reverse=True)):
        sid = new_session(f"loaded {size}")
        with Timer() as t:
            _, snaps = load_session_events(
                conn, factory, sid, size, every=every, seed=args.seed + i
            )
        loaded[size] = sid
        load_notes.append(
            f"{size:,} events + {snaps} snapshots in {t.seconds:.1f}s "
            f"({size / t.seconds:,.0f} events/s)"
        )
        log(f"loaded {load_notes[-1]}")
    conn.autocommit = True
    with Timer() as t:
        conn.execute("VACUUM ANALYZE sessions_app_event")
        conn.execute("VACUUM ANALYZE sessions_app_snapshot")
        conn.execute("ANALYZE sessions_app_session")
    conn.autocommit = False
    load_notes.append(f"VACUUM ANALYZE {t.seconds:.1f}s")
    check_size = sorted(sizes)[1] if len(sizes) > 1 else sizes[0]
    check_at = (check_size // every) * every
    verified = verify_snapshot(loaded[check_size], check_at) if check_at else True
    load_notes.append(
        f"snapshot at seq {check_at} of the {check_size:,} session "
        f"{'equals' if verified else 'DIFFERS FROM'} a full fold"
    )
    log(load_notes[-1])

    batch_sid = new_session("batches")
    service_sid = new_session("service")
    read_sid = loaded[big]

    def warm(port: int, workers: int) -> None:
        warm_up(
            port,
            api_key,
            factory,
            str(new_session("warm-up")),
            str(read_sid),
            workers,
            appends=3 if args.smoke else 30,
        )

    # -- baselines (raw psycopg) -------------------------------------------------------------
    log("raw psycopg baselines")
    setup_raw_tables(conn)
    raw_events = [factory.api_event(random.Random(5), i) for i in range(rounds * n_append)]
    # Warm up (statement preparation, caches), then measure.
    raw_single(conn, raw_events[:50], 1, mode="autocommit")
    raw1 = summarise(raw_single(conn, raw_events, rounds, mode="autocommit"))
    raw_tx = summarise(raw_single(conn, raw_events, rounds, mode="tx"))
    raw_alloc = summarise(raw_single(conn, raw_events, rounds, mode="alloc"))
    raw_alloc1 = summarise(raw_single(conn, raw_events, rounds, mode="alloc1"))
    brng = random.Random(11)
    raw_batch_events = [
        [factory.api_event(brng, j) for j in range(100)] for _ in range(rounds * n_batch)
    ]
    backend = conn.info.backend_pid
    raw_batch_runs: dict[str, Any] = {}
    for table in ("bench_raw_event", RAW_SCHEMA_TABLE):
        raw_batches(conn, raw_batch_events[:5], 1, table)
        pg0 = _proc_cpu(backend)[0]
        raw_batch_runs[table] = summarise(raw_batches(conn, raw_batch_events, rounds, table))
        raw_batch_runs[table]["pg_cpu_ms"] = (
            (_proc_cpu(backend)[0] - pg0) * 1000 / len(raw_batch_events)
        )
    rawb, rawb_schema = raw_batch_runs["bench_raw_event"], raw_batch_runs[RAW_SCHEMA_TABLE]
    rr_raw = raw_reads(conn, read_sid, big, rounds, n_reads, random.Random(3))
    raw_reads_s = {k: summarise(v) for k, v in rr_raw.items()}

    log("in-process append_events (service only)")
    service_appends(service_sid, factory, 1, 50)  # warm-up
    service = service_appends(service_sid, factory, rounds, n_append)

    results: dict[str, Any] = {
        "started_at": started.isoformat(),
        "config": {
            "quick": quick,
            "rounds": rounds,
            "appends_per_round": n_append,
            "batches_per_round": n_batch,
            "reads_per_round": n_reads,
            "sizes": sizes,
            "big": big,
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
                    ["git", "status", "--porcelain", "sessions_app", "config"],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                ).stdout.strip()
                else ""
            ),
            "server": server_label(args.server, args.workers, args.http, args.loop),
            "server_root": str(SERVER_ROOT),
        },
        "raw_single": raw1,
        "raw_single_tx": raw_tx,
        "raw_single_alloc": raw_alloc,
        "raw_single_alloc1": raw_alloc1,
        "raw_batch": rawb,
        "raw_batch_schema": rawb_schema,
        "raw_reads": raw_reads_s,
        "service_single": service,
        "load": {"summary": "; ".join(load_notes)},
    }

    # -- the server --------------------------------------------------------------------------
    servers: list[Server] = []
    load_before = os.getloadavg()
    try:
        port = free_port()
        log(f"starting {results['config']['server']} on port {port}")
        server = Server(
            args.db, port, workers=args.workers, http=args.http, loop=args.loop, kind=args.server
        )
        servers.append(server)
        server.wait_ready(api_key, f"/api/v1/sessions/{read_sid}")
        warm(port, args.workers)

        def meter() -> CpuMeter:
            return CpuMeter(server, conn, args.db)

        others = Interference(server, conn, args.db).__enter__()

        log("single-event appends")
        labels = {f"{size:,}": str(loaded[size]) for size in sorted(sizes)}
        bodies = {
            label: append_bodies(factory, rounds * n_append, seed=100 + i)
            for i, label in enumerate(labels)
        }
        with meter() as m:
            singles = api_single_appends(port, api_key, labels, bodies, rounds)
        results["append_single"] = {label: summarise(v) for label, v in singles.items()}
        results["append_single_cpu"] = m.per_request(sum(len(v) for v in bodies.values()))
        with meter() as m:
            results["healthz"] = summarise(api_healthz(port, n_append, rounds))
        results["healthz_cpu"] = m.per_request(n_append * rounds)

        log("batches of 100")
        bbodies = append_bodies(factory, rounds * n_batch, seed=200, batch=100)
        api_batches(port, api_key, str(batch_sid), bbodies[:3], 1)  # warm-up
        with meter() as m:
            batches = api_batches(port, api_key, str(batch_sid), bbodies, rounds)
        results["append_batch"] = summarise(batches)
        results["append_batch_cpu"] = m.per_request(len(bbodies))

        log(f"reads on the {big:,}-event session")
        with conn.cursor() as cur:
            rows_before = cur.execute("SELECT count(*) FROM sessions_app_event").fetchone()[0]
            head = cur.execute(
                "SELECT head_seq FROM sessions_app_session WHERE id = %s", (read_sid,)
            ).fetchone()[0]
        conn.commit()
        reads = api_reads(
            port, api_key, str(read_sid), head, rounds, n_reads, random.Random(4), meter
        )
        with conn.cursor() as cur:
            rows_after = cur.execute("SELECT count(*) FROM sessions_app_event").fetchone()[0]
            owned = cur.execute(
                "SELECT count(*) FROM sessions_app_event WHERE session_id = ANY(%s::uuid[])",
                (reads["forks"],),
            ).fetchone()[0]
        conn.commit()
        results["reads"] = {
            **{k: summarise(reads[k]) for k in ("last50", "slice1000", "state", "fork")},
            "cpu": reads["cpu"],
            "last50_bytes": reads["last50_bytes"],
            "slice1000_bytes": reads["slice1000_bytes"],
            "forks_made": len(reads["forks"]),
            "rows_before": rows_before,
            "rows_after": rows_after,
            "fork_rows_copied": rows_after - rows_before,
            "fork_owned_rows": owned,
        }
        others.__exit__()
        results["other_cores"] = others.cores

        log(f"fleet: {FLEET_AGENTS} agents on {args.workers} server processes, then raw psycopg")
        fleet_sids = [str(new_session(f"fleet {i}")) for i in range(FLEET_AGENTS)]
        fbodies = append_bodies(factory, 200, seed=400)
        warm_requests = FLEET_WARM_REQUESTS * FLEET_AGENTS
        with meter() as m:
            results["fleet_api"] = fleet_http(
                port, api_key, fleet_sids, fbodies, fleet_seconds, fleet_warm
            )
        results["fleet_api"]["cpu"] = m.per_request(results["fleet_api"]["n"] + warm_requests)
        # The same clients on GET /healthz: no endpoint of this stack can serve more.
        no_sessions: list[None] = [None] * FLEET_AGENTS
        with meter() as m:
            results["fleet_ceiling"] = fleet_http(
                port, "", no_sessions, [b""], fleet_seconds, fleet_warm
            )
        results["fleet_ceiling"]["cpu"] = m.per_request(
            results["fleet_ceiling"]["n"] + warm_requests
        )
        fevents = [factory.api_event(random.Random(6), i) for i in range(2000)]
        results["fleet_raw"] = fleet_raw(args.db, fevents, fleet_seconds, "autocommit", fleet_warm)
        results["fleet_raw_alloc"] = fleet_raw(args.db, fevents, fleet_seconds, "alloc", fleet_warm)
        results["fleet_raw_alloc1"] = fleet_raw(
            args.db, fevents, fleet_seconds, "alloc1", fleet_warm
        )
        server.stop()
        servers.remove(server)

        # -- the broadcast's cost, and other server setups ----------------------------------------
        # Each setup: a fresh session, `mbodies` single-event appends on one connection
        # (sequential), then 4 connections on 4 sessions for a few seconds (concurrent).
        chosen = (args.workers, args.http, args.loop)
        setups: list[tuple[int, str, str, bool, bool, str]] = [
            (*chosen, True, False, args.server),
            (*chosen, False, False, args.server),
        ]
        if matrix:
            for setup in [
                (1, "httptools", "uvloop"),
                (1, "h11", "asyncio"),
                (1, "httptools", "asyncio"),
                (2, "httptools", "uvloop"),
                (2, "h11", "asyncio"),
                (4, "httptools", "uvloop"),
            ]:
                if setup != chosen or args.server != UVICORN:
                    setups.append((*setup, True, False, UVICORN))
            # Not the product's setup (no websockets): how much of a request is Django's ASGI
            # handler (a thread per request, sync/async hand-offs) rather than the work.
            setups.append((args.workers, args.http, args.loop, True, True, UVICORN))
            # The production split's WSGI side.
            if args.server != GRANIAN_WSGI:
                setups.append((args.workers, args.http, args.loop, True, False, GRANIAN_WSGI))
        matrix_rows = []
        mbodies = append_bodies(factory, 10 if args.smoke else 150 if quick else 300, seed=300)
        for workers, http, loop, redis, wsgi, kind in setups:
            port = free_port()
            srv = Server(
                args.db,
                port,
                workers=workers,
                http=http,
                loop=loop,
                redis=redis,
                wsgi=wsgi,
                kind=kind,
            )
            servers.append(srv)
            log(f"setup: {srv.label}")
            srv.wait_ready(api_key, f"/api/v1/sessions/{read_sid}")
            warm(port, workers)
            sid = str(new_session(f"matrix {srv.label}"))
            c = HttpConn(port, api_key)
            path = f"/api/v1/sessions/{sid}/events"
            with CpuMeter(srv, conn, args.db) as m:
                seq = summarise([[timed(c, c.build("POST", path, b), (201,))[0] for b in mbodies]])
            c.close()
            row = {
                "label": srv.label,
                "workers": workers,
                "http": http,
                "loop": loop,
                "redis": redis,
                "wsgi": wsgi,
                "seq": seq,
                "seq_cpu": m.per_request(len(mbodies)),
            }
            conc_sids = [str(new_session(f"conc {i}")) for i in range(4)]
            conc_seconds = 0.5 if args.smoke else 3.0
            row["conc"] = concurrent_appends(port, api_key, conc_sids, mbodies[:100], conc_seconds)
            matrix_rows.append(row)
            srv.stop()
            servers.remove(srv)
        with_redis, without = matrix_rows[0], matrix_rows[1]
        results["broadcast"] = {
            "with_redis_p50": with_redis["seq"]["p50"],
            "without_redis_p50": without["seq"]["p50"],
            "cost_ms": with_redis["seq"]["p50"] - without["seq"]["p50"],
            "with_redis_cpu_ms": with_redis["seq_cpu"]["server_cpu_ms"],
            "without_redis_cpu_ms": without["seq_cpu"]["server_cpu_ms"],
        }
        results["matrix"] = [r for r in matrix_rows if r["redis"]]
    finally:
        for srv in servers:
            if args.keep_server:
                print(f"server left running on port {srv.port} (pid {srv.proc.pid})")
            else:
                srv.stop()
    results["loadavg"] = {"before": load_before, "after": os.getloadavg()}

    log("storage")
    results["storage"] = storage(conn)
    conn.close()
    results["elapsed_s"] = round(time.perf_counter() - t_start, 1)

    text = render(results)
    print(text)
    print(f"(total {results['elapsed_s']:.0f}s)")
    name = f"ingest-{started:%Y%m%dT%H%M%SZ}{'-quick' if quick else ''}.json"
    out = ROOT / "bench" / "results" / name
    out.write_text(json.dumps(results, indent=2, default=str))
    (out.with_suffix(".txt")).write_text(text + "\n")
    print(f"results: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
