#!/usr/bin/env python
"""Append latency on one ASGI server process, with and without 200 waiting handoff long-polls.

    .venv/bin/python bench/handoff_longpoll.py                    # ~2 min
    .venv/bin/python bench/handoff_longpoll.py --polls 200 --appends 300 --rounds 3

1. Drops and recreates a scratch database (default `switchboard_bench_handoffs`) on the local
   PostgreSQL (127.0.0.1:5432, user postgres), migrates it, and makes a project, an API key,
   one session to append to and --polls sessions each with an open handoff.
2. Starts ONE uvicorn process (config.asgi:application) on a free port, with Redis
   (REDIS_URL, default redis://127.0.0.1:6379/3) as channel layer.
3. Interleaved rounds (a burst of other work on the shared machine spreads over both arms):
   - baseline: --appends sequential appends of one event (keep-alive client), timed;
   - loaded: a separate process holds --polls concurrent `GET /handoffs/{id}?wait=60` open
     (re-polling whenever one returns), and the same appends are timed again. While they
     wait, the server's thread count and the scratch database's connections are sampled.
4. Prints p50 / p95 / mean per arm (all rounds pooled), the ratio loaded/baseline, threads
   and connections seen. Nothing is asserted; the target is a ratio within 1.10.

The long-poll waits in config.longpoll (the dispatcher's small ASGI app), not in Django's ASGI
handler, which gives every in-flight request its own thread-sensitive executor thread (asgiref
ThreadSensitiveContext, first used by request_started's sync receivers): the server's thread
count should stay flat with the polls waiting (the loop's default executor, at most cpu+4
threads, runs their brief reads). The server's own gauge of waiting long-polls is printed too,
while they wait and 1 s after the polling process has closed its connections (a wait whose
agent went away ends at once).

BENCH_SETTINGS (a settings module) and BENCH_PYTHONPATH (where it lives) run the server with
other settings.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SECRET_KEY = "bench-only-secret-key-not-for-production-0123456789"
METRICS_TOKEN = "bench-only-metrics-token"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def env_for(db_url: str, redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=db_url,
        REDIS_URL=redis_url,
        DJANGO_SETTINGS_MODULE=os.environ.get("BENCH_SETTINGS", "config.settings"),
        SECRET_KEY=SECRET_KEY,
        DEBUG="false",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        SWITCHBOARD_API_RATE_PER_MINUTE="0",
        SWITCHBOARD_METRICS_TOKEN=METRICS_TOKEN,
        CACHE_KEY_PREFIX="bench-handoffs",
        LOG_LEVEL="WARNING",
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("BENCH_PYTHONPATH")) if p),
    )
    return env


def setup(db_name: str, env: dict[str, str], polls: int) -> tuple[str, str, list[str]]:
    common.scratch_database(db_name, env)
    script = f"""
import django; django.setup()
from core.actors import Actor
from core.services.projects import create_api_key, create_project
from sessions_app.services.sessions import open_session
from handoffs_app.services.handoffs import request_handoff
actor = Actor.system("bench")
project = create_project("bench")
_, raw = create_api_key(project, name="bench", actor=actor)
target, _ = open_session(project, agent_name="appender", actor=actor)
ids = []
for i in range({polls}):
    s, _ = open_session(project, agent_name="waiter", actor=actor)
    ids.append(str(request_handoff(s, kind="question", payload={{"question": "?"}},
                                   actor=actor).handoff.pk))
print(raw); print(target.pk); print(",".join(ids))
"""
    out = (
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()
    )
    return out[-3], out[-2], out[-1].split(",")


def pollers(base: str, key: str, ids: list[str], stop: object, ready: object) -> None:
    """Child process: keep one long-poll open per handoff until `stop` is set."""
    import httpx

    async def one(client: httpx.AsyncClient, handoff_id: str, started: list[int]) -> None:
        first = True
        while not stop.is_set():  # type: ignore[attr-defined]
            request = client.get(f"/api/v1/handoffs/{handoff_id}", params={"wait": 60})
            if first:
                started.append(1)
                first = False
            try:
                await request
            except httpx.HTTPError:
                await asyncio.sleep(0.5)

    async def main() -> None:
        limits = httpx.Limits(max_connections=len(ids) + 10, max_keepalive_connections=len(ids))
        async with httpx.AsyncClient(
            base_url=base,
            headers={"Authorization": f"Bearer {key}"},
            timeout=90,
            limits=limits,
        ) as client:
            started: list[int] = []
            tasks = [asyncio.create_task(one(client, i, started)) for i in ids]
            while len(started) < len(ids):
                await asyncio.sleep(0.05)
            ready.set()  # type: ignore[attr-defined]
            while not stop.is_set():  # type: ignore[attr-defined]
                await asyncio.sleep(0.1)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def time_appends(client: object, session_id: str, count: int) -> list[float]:
    samples = []
    body = {"events": [{"kind": "note", "content": {"bench": True}}]}
    for _ in range(count):
        started = time.perf_counter()
        response = client.post(f"/api/v1/sessions/{session_id}/events", json=body)  # type: ignore[attr-defined]
        samples.append((time.perf_counter() - started) * 1000)
        if response.status_code != 201:
            raise RuntimeError(f"append failed: {response.status_code} {response.text}")
    return samples


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


def waiting_gauge(base: str) -> str:
    """The server's switchboard_handoff_longpolls_waiting (config.longpoll)."""
    import httpx

    try:
        text = httpx.get(
            base + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10
        ).text
    except httpx.HTTPError:
        return "?"
    for line in text.splitlines():
        if line.startswith("switchboard_handoff_longpolls_waiting "):
            return str(int(float(line.split()[1])))
    return "?"


def connections(db_name: str) -> str:
    """Open connections to the scratch database: all of them / those not idle (the pool keeps
    idle ones open; a connection held by a waiting request would sit 'idle in transaction' or
    be missing from the pool: appends would then wait for one)."""
    with common.pg_connect("postgres", autocommit=True) as c:
        row = c.execute(
            "SELECT count(*), count(*) FILTER (WHERE state <> 'idle') FROM pg_stat_activity"
            " WHERE datname = %s",
            [db_name],
        ).fetchone()
    return f"{row[0]}/{row[1]}" if row else "?"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--polls", type=int, default=200)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", default=common.scratch_name("switchboard_bench_handoffs"))
    parser.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/3"))
    common.add_smoke_flag(parser)
    args = parser.parse_args()
    common.smoke(args, polls=10, appends=10, rounds=1)

    import httpx

    db_url = common.pg_url(args.db)
    env = env_for(db_url, args.redis)
    key, session_id, ids = setup(args.db, env, args.polls)
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--lifespan",
            "off",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    ctx = multiprocessing.get_context("spawn")
    baseline: list[float] = []
    loaded: list[float] = []
    idle_threads: list[int] = []
    seen_threads: list[int] = []
    seen_connections: list[str] = []
    seen_waiting: list[str] = []
    left_waiting: list[str] = []
    idle_connections: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(base + "/healthz", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("server did not start") from None
                time.sleep(0.2)
        with httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30
        ) as client:
            time_appends(client, session_id, 50)  # warm-up
            for round_no in range(args.rounds):
                idle_threads.append(threads_of(server.pid))
                idle_connections.append(connections(args.db))
                baseline += time_appends(client, session_id, args.appends)
                stop, ready = ctx.Event(), ctx.Event()
                child = ctx.Process(target=pollers, args=(base, key, ids, stop, ready))
                child.start()
                if not ready.wait(60):
                    raise RuntimeError("pollers did not start")
                time.sleep(2.0)  # every request has reached its wait
                seen_threads.append(threads_of(server.pid))
                seen_connections.append(connections(args.db))
                seen_waiting.append(waiting_gauge(base))
                loaded += time_appends(client, session_id, args.appends)
                seen_threads.append(threads_of(server.pid))
                seen_connections.append(connections(args.db))
                stop.set()
                child.join(90)
                if child.is_alive():
                    child.terminate()
                time.sleep(1.0)
                left_waiting.append(waiting_gauge(base))
                print(f"round {round_no + 1}/{args.rounds} done", flush=True)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()

    def line(name: str, values: list[float]) -> str:
        return (
            f"{name:<32} p50 {statistics.median(values):6.2f} ms   p95 "
            f"{pct(values, 0.95):6.2f} ms   mean {statistics.mean(values):6.2f} ms   "
            f"(n={len(values)})"
        )

    print()
    print(line("appends alone", baseline))
    print(line(f"appends with {args.polls} long-polls", loaded))
    print(
        f"ratio loaded/alone: p50 {statistics.median(loaded) / statistics.median(baseline):.3f}"
        f"   p95 {pct(loaded, 0.95) / pct(baseline, 0.95):.3f}"
        f"   mean {statistics.mean(loaded) / statistics.mean(baseline):.3f}"
    )
    print(f"server threads: idle {idle_threads}, with long-polls waiting {seen_threads}")
    print(
        f"long-polls waiting on the server: during {seen_waiting}, 1 s after the polling "
        f"process closed its connections {left_waiting}"
    )
    print(
        f"database connections open/not idle: idle {idle_connections}, with long-polls waiting "
        f"{seen_connections}"
    )


if __name__ == "__main__":
    main()
