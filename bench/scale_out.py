"""Appends per second through one web server against two, in the same run (issue 27 §3).

    python bench/scale_out.py [--seconds 10] [--rounds 2] [--db switchboard_bench_scale_out]
    python bench/scale_out.py --smoke   # 1 s windows, one round

Two servers, each the production split's WSGI side (README, "Production": granian, one worker,
4 blocking threads; a websocket server is not on the append path), on one scratch database
(recreated and migrated on DATABASE_URL's server) and one Redis (BENCH_REDIS_URL, default
redis://127.0.0.1:6379/0). The load is bench/ingest.py's fleet: 32 agents, each with its own
session and keep-alive connection, single-event appends back to back, asyncio tasks in two
client processes. Each round runs it with every agent on server A, then with half the agents on
A and half on B (as a load balancer spreads them), one after the other so drift hits both alike.

Printed per layout: appends/s, latency p50/p95, and the CPU per append of the server processes
and of their PostgreSQL backends (the figure that survives a loaded machine); then the ratio two
servers / one, and the cores that work other than this bench's took meanwhile (its clients,
servers, PostgreSQL and Redis are this bench's). On a 2-core machine the second server can only
take what the first one, PostgreSQL and the clients leave: the ratio says how much of a second
core one process could not use (one process's Python threads share a GIL), not what a second
machine would add. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402
import ingest  # noqa: E402

AGENTS = ingest.FLEET_AGENTS


def busy_and_ours(servers: list[ingest.Server], conn: Any, db: str) -> tuple[float, float]:
    """CPU seconds the whole machine has been busy, and those of this bench: this process and
    its finished client processes, the servers, their PostgreSQL backends, Redis and
    PostgreSQL's background writers, the loopback's interrupt handling (bench/ingest.py's
    Interference, for several servers)."""
    busy, interrupts = ingest.busy_cpu_seconds()
    t = os.times()
    mine = t.user + t.system + t.children_user + t.children_system
    servers_cpu = sum(ingest.tree_cpu(s.proc.pid) for s in servers)
    return busy, (
        mine
        + servers_cpu
        + interrupts
        + ingest.pg_backends_cpu(conn, db)
        + ingest.shared_services_cpu()
    )


def run_layout(
    ports: list[int],
    key: str,
    sids: list[str],
    bodies: list[bytes],
    servers: list[ingest.Server],
    conn: Any,
    db: str,
    seconds: float,
    warm: float,
) -> dict[str, Any]:
    """The fleet with its agents spread over `ports` (agent i on ports[i % len(ports)])."""
    per_process = AGENTS // ingest.FLEET_CLIENT_PROCESSES
    jobs = []
    for p in range(ingest.FLEET_CLIENT_PROCESSES):
        mine = sids[p * per_process : (p + 1) * per_process]
        for i, port in enumerate(ports):
            share = mine[i :: len(ports)]
            jobs.append({"kind": "http", "port": port, "key": key, "sids": share, "bodies": bodies})
    cpu0 = [ingest.tree_cpu(s.proc.pid) for s in servers]
    pg0 = ingest.pg_backends_cpu(conn, db)
    busy0, ours0 = busy_and_ours(servers, conn, db)
    started = time.perf_counter()
    result = ingest.fleet(jobs, seconds, warm)
    wall = time.perf_counter() - started
    busy1, ours1 = busy_and_ours(servers, conn, db)
    requests = result["n"] + ingest.FLEET_WARM_REQUESTS * AGENTS
    result["server_cpu_ms"] = (
        sum(ingest.tree_cpu(s.proc.pid) - c for s, c in zip(servers, cpu0, strict=True))
        * 1000
        / requests
    )
    result["pg_cpu_ms"] = (ingest.pg_backends_cpu(conn, db) - pg0) * 1000 / requests
    result["other_cores"] = max((busy1 - busy0) - (ours1 - ours0), 0.0) / wall
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured window per layout")
    parser.add_argument("--warm", type=float, default=3.0, help="seconds before each window")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--db", default=common.scratch_name("switchboard_bench_scale_out"))
    common.add_smoke_flag(parser)
    args = parser.parse_args()
    common.smoke(args, seconds=1.0, warm=2.0, rounds=1)
    args.smoke = bool(args.smoke)

    env = ingest.server_env(args.db)
    common.scratch_database(args.db, env)
    os.environ.update(env)
    sys.path.insert(0, str(common.ROOT))
    import django

    django.setup()
    from core.actors import Actor
    from core.services.projects import create_api_key, create_project
    from sessions_app.services.sessions import open_session

    project = create_project("scale-out bench")
    _, key = create_api_key(project, name="bench", actor=Actor.system("bench"))
    sids = [
        str(open_session(project, agent_name="fleet", actor=Actor.system("bench"))[0].pk)
        for _ in range(AGENTS)
    ]
    bodies = ingest.append_bodies(ingest.ContentFactory(), 200, seed=400)

    servers = [
        ingest.Server(
            args.db,
            ingest.free_port(),
            workers=1,
            http=ingest.DEFAULT_HTTP,
            loop=ingest.DEFAULT_LOOP,
            kind=ingest.GRANIAN_WSGI,
        )
        for _ in range(2)
    ]
    results: dict[str, list[dict[str, Any]]] = {"one": [], "two": []}
    conn = common.pg_connect(args.db, autocommit=True)
    try:
        for server in servers:
            server.wait_ready(key, f"/api/v1/sessions/{sids[0]}")
        ports = [s.port for s in servers]
        for r in range(args.rounds):
            ingest.log(f"round {r + 1}: {AGENTS} agents on server A")
            results["one"].append(
                run_layout(
                    ports[:1], key, sids, bodies, servers, conn, args.db, args.seconds, args.warm
                )
            )
            ingest.log(f"round {r + 1}: {AGENTS} agents on servers A and B")
            results["two"].append(
                run_layout(
                    ports, key, sids, bodies, servers, conn, args.db, args.seconds, args.warm
                )
            )
    finally:
        for server in servers:
            server.stop()
        conn.close()

    print(f"\n{AGENTS} agents, single-event appends; each server: {servers[0].label}")
    print(f"{args.rounds} round(s) of {args.seconds:g} s per layout; medians over the rounds")
    print(
        f"{'layout':<12}{'appends/s':>11}{'p50 ms':>9}{'p95 ms':>9}"
        f"{'server CPU ms':>15}{'PG CPU ms':>11}{'other cores':>13}"
    )

    def median(layout: str, name: str) -> float:
        return statistics.median(r[name] for r in results[layout])

    for layout, label in (("one", "one server"), ("two", "two servers")):
        print(
            f"{label:<12}{median(layout, 'events_per_s'):>11,.0f}{median(layout, 'p50'):>9.2f}"
            f"{median(layout, 'p95'):>9.2f}{median(layout, 'server_cpu_ms'):>15.2f}"
            f"{median(layout, 'pg_cpu_ms'):>11.2f}{median(layout, 'other_cores'):>13.2f}"
        )
    one, two = median("one", "events_per_s"), median("two", "events_per_s")
    print(f"two servers / one: {two / one:.2f}x appends/s" if one else "no appends measured")
    cores = os.cpu_count()
    print(
        f"(CPU per append is the servers' and their PostgreSQL backends'; 'other cores' is what "
        f"work other than this bench's (its clients, servers, PostgreSQL and Redis) used of this "
        f"{cores}-core machine meanwhile: above 0.2 or so, appends/s and latency are inflated by "
        "it, the CPU figures much less)"
    )


if __name__ == "__main__":
    main()
