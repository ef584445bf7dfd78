#!/usr/bin/env python
"""In-process append cost beside raw psycopg, in one run: for before/after comparisons.

    .venv/bin/python bench/append_paths.py                    # ~1 min
    .venv/bin/python bench/append_paths.py --appends 5000 --rounds 10
    .venv/bin/python bench/append_paths.py --send redis       # keep the real live send

It measures the code of the checkout it sits in (copy it with bench/_common.py into an older
checkout to measure that one; it runs on both layouts: core.actors / core.services.projects
after the apps were reshaped, sessions_app.actors / sessions_app.services.projects before).
In one process:

1. Drops and recreates a scratch database (default `switchboard_bench_append`) on the local
   PostgreSQL (127.0.0.1:5432, user postgres) and migrates it with this checkout's manage.py.
2. Interleaved over several rounds (so a burst of other work on a shared machine spreads over
   every measurement rather than landing on one), times:
   - raw psycopg, one row: one INSERT in its own transaction (autocommit: one round trip, the
     baseline), and BEGIN; INSERT; COMMIT; into a copy of the event table (same columns,
     primary key only);
   - raw psycopg, 100 rows: one multi-row INSERT and COMMIT;
   - sessions_app.services.events.append_events with one event (the one-statement path) and
     with batches of 100 (the COPY path), through the Django connection (its psycopg pool);
   - a lifecycle change (pause, then resume), the transactional path that reshaping touched
     most (an outbox row in the transaction, a relay after commit).
3. Prints, in ms, p50 / p95 / mean over every sample, the median of the best and the worst
   round (on a loaded shared machine, compare runs by the best round), the CPU time this
   process spends per call (Python's share, waiting excluded), events/s, and ratios to the
   raw baselines (p50 to p50, best round to best round, CPU to CPU: the steadiest of the three
   when other work shares the machine).

The live send is stubbed out by default (--send stub): in a plain sync process every
async_to_sync starts a fresh event loop and Redis connection, which is not what the server
does, and would swamp the database cost being compared. Everything else runs: the outbox row,
the relay's own transaction after commit, snapshots every SWITCHBOARD_SNAPSHOT_EVERY events.
--send redis keeps the real Redis channel layer; --send memory the in-memory one.

Nothing is asserted; the exit status is 0 unless the benchmark itself fails.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    add_smoke_flag,
    pg_connect,
    pg_url,
    scratch_database,
    scratch_name,
    smoke,
)

ROOT = Path(__file__).resolve().parent.parent
SECRET_KEY = "bench-only-secret-key-not-for-production-0123456789"
RAW_COLUMNS = (
    "session_id",
    "seq",
    "kind",
    "tier",
    "role",
    "content",
    "text",
    "tokens",
    "cost",
    "actor",
    "idempotency_key",
    "created_at",
)


# --- Helpers ---------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1)."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1] if ordered else float("nan")


def summary(rounds: list[list[tuple[float, float]]], events_per_call: int = 1) -> dict[str, float]:
    """Wall-clock p50/p95/mean over every sample, the best and worst round's median (on a
    shared machine the best round is the one least disturbed by other work), and the mean
    CPU time of this process per call (Python's share; waiting for the database excluded)."""
    wall = [w for r in rounds for w, _ in r]
    cpu = [c for r in rounds for _, c in r]
    medians = [statistics.median(w for w, _ in r) for r in rounds if r]
    mean = statistics.fmean(wall)
    return {
        "n": len(wall),
        "p50": pct(wall, 0.5),
        "p95": pct(wall, 0.95),
        "mean": mean,
        "best_round_p50": min(medians),
        "worst_round_p50": max(medians),
        "cpu_mean": statistics.fmean(cpu),
        "events_per_s": events_per_call * 1000 / mean,
    }


def log(message: str) -> None:
    print(f"  · {message}", file=sys.stderr, flush=True)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def content(rng: random.Random, i: int) -> dict[str, Any]:
    words = [
        "order",
        "refund",
        "customer",
        "shipping",
        "invoice",
        "status",
        "agent",
        "tool",
        "account",
        "billing",
        "delivery",
        "support",
        "update",
        "request",
        "policy",
    ]
    text = " ".join(rng.choice(words) for _ in range(rng.randint(30, 60)))
    return {"text": f"#{i} {text}"}


# --- Django, on either layout ----------------------------------------------------------------


class App:
    """The product's entry points, wherever this checkout keeps them."""

    def __init__(self) -> None:
        self.layout = "core" if (ROOT / "core" / "actors.py").exists() else "sessions_app"
        if self.layout == "core":
            from core.actors import Actor
            from core.services.projects import create_project
        else:
            from sessions_app.actors import Actor
            from sessions_app.services.projects import create_project
        from sessions_app.services import events, lifecycle, sessions

        self.Actor, self.create_project = Actor, create_project
        self.EventDraft, self.append_events = events.EventDraft, events.append_events
        self.pause, self.resume = lifecycle.pause_session, lifecycle.resume_session
        self.open_session = sessions.open_session
        # An editable install of another checkout must not stand in for this one's code.
        for module in (events, lifecycle, sys.modules[Actor.__module__]):
            if not Path(module.__file__).resolve().is_relative_to(ROOT):
                raise SystemExit(f"{module.__name__} comes from {module.__file__}, not {ROOT}")

    def stub_live_send(self) -> None:
        if self.layout == "core":
            from core import domain_events

            domain_events.send_to_groups = lambda groups, message, **options: True
        else:
            from sessions_app import realtime

            realtime._send_rollback_unsafe = lambda groups, message: None

    def draft(self, rng: random.Random, i: int) -> Any:
        return self.EventDraft(
            kind="message",
            role=rng.choice(["user", "assistant"]),
            content=content(rng, i),
            tokens=rng.randint(20, 200),
        )


# --- Measurements ----------------------------------------------------------------------------


class Raw:
    """Plain psycopg on a copy of the event table: the floor an append is compared with."""

    def __init__(self, db: str) -> None:
        from psycopg.types.json import Jsonb

        self.Jsonb = Jsonb
        self.conn = pg_connect(db)
        self.conn.execute("DROP TABLE IF EXISTS bench_raw_event")
        # Same columns as sessions_app_event; only the primary key (no FK, trigger, GIN index).
        self.conn.execute(
            "CREATE TABLE bench_raw_event (LIKE sessions_app_event INCLUDING DEFAULTS)"
        )
        self.conn.execute("ALTER TABLE bench_raw_event ADD PRIMARY KEY (session_id, seq)")
        self.conn.commit()
        self.session_id = uuid.uuid4()
        self.seq = 0
        placeholders = ", ".join(["%s"] * len(RAW_COLUMNS))
        self.insert_one = (
            f"INSERT INTO bench_raw_event ({', '.join(RAW_COLUMNS)}) VALUES ({placeholders})"
        )
        self.insert_100 = (
            f"INSERT INTO bench_raw_event ({', '.join(RAW_COLUMNS)}) VALUES "
            + ", ".join([f"({placeholders})"] * 100)
        )

    def row(self, rng: random.Random) -> tuple[Any, ...]:
        self.seq += 1
        body = content(rng, self.seq)
        return (
            self.session_id,
            self.seq,
            "message",
            "transient",
            "user",
            self.Jsonb(body),
            body["text"],
            rng.randint(20, 200),
            0,
            "key:raw",
            None,
            dt.datetime.now(dt.UTC),
        )

    def one(self, rng: random.Random, *, autocommit: bool) -> tuple[float, float]:
        self.conn.autocommit = autocommit
        row = self.row(rng)
        return timed(self._one, row, autocommit)

    def _one(self, row: tuple[Any, ...], autocommit: bool) -> None:
        self.conn.execute(self.insert_one, row)
        if not autocommit:
            self.conn.commit()

    def hundred(self, rng: random.Random) -> tuple[float, float]:
        self.conn.autocommit = False
        params = [value for _ in range(100) for value in self.row(rng)]
        return timed(self._hundred, params)

    def _hundred(self, params: list[Any]) -> None:
        self.conn.execute(self.insert_100, params)
        self.conn.commit()


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, float]:
    """(wall ms, this process's CPU ms) of one call."""
    c0, t0 = time.process_time_ns(), time.perf_counter_ns()
    fn(*args, **kwargs)
    t1, c1 = time.perf_counter_ns(), time.process_time_ns()
    return (t1 - t0) / 1e6, (c1 - c0) / 1e6


# --- Report ----------------------------------------------------------------------------------


def render(results: dict[str, Any]) -> str:
    cfg, m = results["config"], results["measurements"]
    lines = [
        "",
        f"APPEND PATHS, in-process — {cfg['root']} ({cfg['git']}, layout {cfg['layout']})",
        f"  {cfg['appends']} single appends, {cfg['batches']} batches of 100, "
        f"{cfg['lifecycle']} pause/resume pairs, {cfg['rounds']} interleaved rounds; "
        f"live send: {cfg['send']}; PostgreSQL {cfg['postgres']}, Python {cfg['python']}, "
        f"{cfg['cpus']} CPUs; load {cfg['load_before']} -> {cfg['load_after']}",
        "",
        f"  {'measurement':<44}{'p50':>8}{'p95':>8}{'mean':>8}{'best':>8}{'worst':>8}"
        f"{'cpu':>7}{'events/s':>10}{'p50/raw':>9}{'best/raw':>9}{'cpu/raw':>9}",
        f"  {'':<44}{'ms':>8}{'ms':>8}{'ms':>8}{'round':>8}{'round':>8}{'ms':>7}",
    ]
    base = {"single": m["raw_single_autocommit"], "batch": m["raw_batch_100"]}
    rows = [
        ("raw psycopg: 1 row, autocommit (baseline)", "raw_single_autocommit", "single"),
        ("raw psycopg: 1 row, BEGIN/INSERT/COMMIT", "raw_single_tx", "single"),
        ("append_events, 1 event", "service_single", "single"),
        ("raw psycopg: 100 rows, one INSERT + COMMIT", "raw_batch_100", "batch"),
        ("append_events, batch of 100", "service_batch_100", "batch"),
        ("pause_session or resume_session", "lifecycle", "single"),
    ]
    for label, key, against in rows:
        s, b = m[key], base[against]
        lines.append(
            f"  {label:<44}{s['p50']:>8.3f}{s['p95']:>8.3f}{s['mean']:>8.3f}"
            f"{s['best_round_p50']:>8.3f}{s['worst_round_p50']:>8.3f}{s['cpu_mean']:>7.3f}"
            f"{s['events_per_s']:>10,.0f}{s['p50'] / b['p50']:>8.2f}x"
            f"{s['best_round_p50'] / b['best_round_p50']:>8.2f}x"
            f"{s['cpu_mean'] / b['cpu_mean']:>8.2f}x"
        )
    lines.append("")
    return "\n".join(lines)


# --- Main ------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--db",
        default=scratch_name("switchboard_bench_append"),
        help="scratch database (dropped and recreated)",
    )
    parser.add_argument("--appends", type=int, default=2000, help="single appends (and raw rows)")
    parser.add_argument("--batches", type=int, default=200, help="batches of 100")
    parser.add_argument("--lifecycle", type=int, default=200, help="pause/resume pairs")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--send", choices=["stub", "redis", "memory"], default="stub")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--seed", type=int, default=7)
    add_smoke_flag(parser)
    args = parser.parse_args()
    smoke(args, appends=20, batches=3, lifecycle=5, rounds=1)

    log(f"database {args.db}: recreate and migrate ({ROOT})")
    env = {
        "DATABASE_URL": pg_url(args.db),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DEBUG": "false",
        "SECRET_KEY": SECRET_KEY,
        "LOG_LEVEL": "WARNING",
        "CACHE_KEY_PREFIX": f"bench-append-{os.getpid()}",
    }
    os.environ.update(env)
    if args.send == "redis":
        os.environ["REDIS_URL"] = args.redis_url
    else:
        os.environ.pop("REDIS_URL", None)
    scratch_database(args.db)

    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    app = App()
    if args.send == "stub":
        app.stub_live_send()
    log(
        f"layout {app.layout}; live send: {args.send} "
        f"({settings.CHANNEL_LAYERS['default']['BACKEND'].rsplit('.', 1)[-1]})"
    )

    actor = app.Actor.system("bench")
    project = app.create_project(f"bench-{uuid.uuid4().hex[:8]}")
    single = app.open_session(project, agent_name="bench", actor=actor)[0]
    batched = app.open_session(project, agent_name="bench", actor=actor)[0]
    moving = app.open_session(project, agent_name="bench", actor=actor)[0]
    raw = Raw(args.db)
    rng = random.Random(args.seed)

    # Warm up: connections, prepared plans, caches, first-call imports.
    for i in range(50):
        raw.one(rng, autocommit=True)
        raw.one(rng, autocommit=False)
        app.append_events(single, [app.draft(rng, i)], actor=actor)
    for i in range(3):
        raw.hundred(rng)
        app.append_events(batched, [app.draft(rng, i) for _ in range(100)], actor=actor)
        app.pause(moving, actor=actor)
        app.resume(moving, actor=actor)

    keys = (
        "raw_single_autocommit",
        "raw_single_tx",
        "service_single",
        "raw_batch_100",
        "service_batch_100",
        "lifecycle",
    )
    by_round: dict[str, list[list[tuple[float, float]]]] = {k: [] for k in keys}
    load_before = loadavg()
    started = time.monotonic()
    for r in range(args.rounds):
        log(f"round {r + 1} of {args.rounds}")
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in keys}
        for key in keys:
            by_round[key].append(samples[key])
        for i in range(args.appends // args.rounds):
            samples["raw_single_autocommit"].append(raw.one(rng, autocommit=True))
            samples["raw_single_tx"].append(raw.one(rng, autocommit=False))
            draft = app.draft(rng, i)
            samples["service_single"].append(timed(app.append_events, single, [draft], actor=actor))
        for _ in range(args.batches // args.rounds):
            samples["raw_batch_100"].append(raw.hundred(rng))
            drafts = [app.draft(rng, i) for i in range(100)]
            samples["service_batch_100"].append(
                timed(app.append_events, batched, drafts, actor=actor)
            )
        for _ in range(args.lifecycle // args.rounds):
            samples["lifecycle"].append(timed(app.pause, moving, actor=actor))
            samples["lifecycle"].append(timed(app.resume, moving, actor=actor))
    elapsed = time.monotonic() - started

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        pg_version = cursor.fetchone()[0]
    git = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "core", "sessions_app", "config"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    results = {
        "config": {
            "root": str(ROOT),
            "git": git + ("+dirty" if dirty else ""),
            "layout": app.layout,
            "appends": sum(map(len, by_round["service_single"])),
            "batches": sum(map(len, by_round["service_batch_100"])),
            "lifecycle": sum(map(len, by_round["lifecycle"])) // 2,
            "rounds": args.rounds,
            "send": args.send,
            "postgres": pg_version,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load_after": loadavg(),
            "seconds": round(elapsed, 1),
            "snapshot_every": settings.SWITCHBOARD_SNAPSHOT_EVERY,
        },
        "measurements": {
            key: summary(rounds, 100 if key.endswith("_100") else 1)
            for key, rounds in by_round.items()
        },
    }
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    raw.conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
