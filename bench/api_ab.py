#!/usr/bin/env python
"""Before/after of the agent API in one run: two servers, two checkouts, interleaved rounds.

    .venv/bin/python bench/api_ab.py --baseline-root /tmp/base      # this tree vs /tmp/base
    .venv/bin/python bench/api_ab.py --baseline-root /tmp/base --profile single
    # the run command's server (uvicorn config.asgi) against the production split's WSGI side:
    .venv/bin/python bench/api_ab.py --baseline-root . --baseline-server granian-wsgi \
        --fleet-only --fleet-repeats 6

bench/ingest.py measures one server against raw psycopg; on a machine shared with other work
its latencies move by 2x between runs, so a before/after taken from two runs says little. Here
both servers (the baseline checkout's code and this tree's, same database, same settings, the
setup of bench/ingest.py: uvicorn, 2 workers, httptools, uvloop, Redis on) are measured in
alternating rounds (A B B A ...), so drift and other work hit both alike. Per operation it
prints p50/p95 of each, the CPU each request costs the server processes and their PostgreSQL
backends, and the ratio new/base; then the 32-agent fleet against each, twice (or
--fleet-repeats), alternated: events/s and server CPU per append of each repeat, and the median
of the repeats' new/base ratios. --baseline-server runs the baseline under another server than
--server (one checkout, two server setups).

--profile single|batch runs py-spy (PYSPY, default /tmp/pyspy/bin/py-spy) on this tree's
server during extra single-event appends or batches of 100 and prints the top frames (own
time and total time, % of samples). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as ib  # noqa: E402

ROOT = ib.ROOT


def cpu_of(server: ib.Server, conn: Any, db: str) -> ib.CpuMeter:
    return ib.CpuMeter(server, conn, db)


def measure(
    server: ib.Server, conn: Any, db: str, key: str, requests: list[bytes], expect: tuple[int, ...]
) -> tuple[list[float], float, float]:
    """Latencies (ms) of `requests` sent one at a time on one keep-alive connection, and the
    server and PostgreSQL CPU ms per request."""
    c = ib.HttpConn(server.port, key)
    try:
        with cpu_of(server, conn, db) as m:
            lat = [ib.timed(c, raw, expect)[0] for raw in requests]
    finally:
        c.close()
    n = len(requests)
    return lat, m.server_s * 1000 / n, m.pg_s * 1000 / n


def build(port: int, key: str, method: str, path: str, body: Any = None) -> bytes:
    c = ib.HttpConn.__new__(ib.HttpConn)
    c.auth = f"Authorization: Bearer {key}\r\n".encode()
    return ib.HttpConn.build(c, method, path, body)


def profile(
    server: ib.Server,
    key: str,
    raws: list[bytes],
    expect: tuple[int, ...],
    seconds: float,
    out: Path,
) -> None:
    """py-spy on every worker of `server` while the requests `raws` are sent in a loop."""
    pyspy = os.environ.get("PYSPY", "/tmp/pyspy/bin/py-spy")
    children = subprocess.run(
        ["pgrep", "-P", str(server.proc.pid)], capture_output=True, text=True
    ).stdout.split() or [str(server.proc.pid)]
    procs = [
        subprocess.Popen(
            [
                pyspy,
                "record",
                "--pid",
                pid,
                "--rate",
                "500",
                "--format",
                "raw",
                "--output",
                str(out.with_suffix(f".{pid}.txt")),
                "--duration",
                str(int(seconds) + 1),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for pid in children
    ]
    time.sleep(1.0)
    c = ib.HttpConn(server.port, key)
    stop = time.time() + seconds
    i = 0
    while time.time() < stop:
        ib.timed(c, raws[i % len(raws)], expect)
        i += 1
    c.close()
    for p in procs:
        p.wait()
    summarise_profile(sorted(out.parent.glob(out.stem + ".*.txt")))


def summarise_profile(files: list[Path], top: int = 28) -> None:
    """Own and total % of samples per function (request threads only: under Django's
    WSGIHandler)."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    n = 0
    for f in files:
        for line in f.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if "WSGIHandler.__call__" not in stack:
                continue  # the event loop's thread, idle threads
            k = int(count)
            n += k
            frames = stack.split(";")
            names = []
            for fr in frames:
                name = fr.split(" (")[0]
                where = fr.split(" (")[1].rstrip(")") if " (" in fr else ""
                mod = where.split(":")[0]
                for marker in ("site-packages/", "/wt-speed/", "/speed-base/"):
                    if marker in mod:
                        mod = mod.split(marker)[1]
                names.append(f"{name} ({mod})")
            own[names[-1]] += k
            for name in set(names):
                total[name] += k
    print(f"  {n} samples in request threads")
    print("  top own time:")
    for name, k in own.most_common(top):
        print(f"    {100 * k / n:5.1f}%  {name}")
    print("  top total time (inclusive):")
    for name, k in total.most_common(top + 12):
        print(f"    {100 * k / n:5.1f}%  {name}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--baseline-root", type=Path, help="the other checkout (required but in a smoke run: this)"
    )
    p.add_argument("--db", default=ib.scratch_name("switchboard_bench_ab"))
    p.add_argument("--events", type=int, default=20000, help="size of the read session")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--n", type=int, default=60, help="requests per operation per round")
    p.add_argument("--fleet-seconds", type=float, default=5.0)
    p.add_argument("--fleet-repeats", type=int, default=2)
    p.add_argument("--no-fleet", action="store_true")
    p.add_argument("--fleet-only", action="store_true", help="only the fleet (no rounds)")
    p.add_argument(
        "--profile", choices=["single", "batch", "last50", "fork"], action="append", default=[]
    )
    p.add_argument(
        "--server",
        choices=[ib.UVICORN, ib.GRANIAN_WSGI],
        default=ib.UVICORN,
        help="the server both checkouts run under (bench/ingest.py's --server)",
    )
    p.add_argument(
        "--baseline-server",
        choices=[ib.UVICORN, ib.GRANIAN_WSGI],
        help="the baseline's server, when it is not --server's",
    )
    p.add_argument("--profile-seconds", type=float, default=12.0)
    p.add_argument("--workers", type=int, default=ib.DEFAULT_WORKERS)
    p.add_argument(
        "--new-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment of the new server only (e.g. SWITCHBOARD_WSGI_THREADS=4)",
    )
    ib.add_smoke_flag(p)
    args = p.parse_args()
    # A smoke run measures this checkout against itself.
    ib.smoke(
        args,
        baseline_root=args.baseline_root or ROOT,
        events=500,
        rounds=1,
        n=3,
        fleet_seconds=0.5,
        fleet_repeats=1,
        workers=1,
    )
    if args.baseline_root is None:
        p.error("--baseline-root is required")
    roots = {"base": args.baseline_root.resolve(), "new": ROOT}
    kinds = {"base": args.baseline_server or args.server, "new": args.server}

    ib.log(f"recreating database {args.db}")
    ib.scratch_database(args.db, ib.server_env(args.db))
    os.environ.update(ib.server_env(args.db))
    import django

    django.setup()
    from django.conf import settings

    from core.actors import Actor
    from core.services.projects import create_api_key, create_project
    from sessions_app.services.sessions import open_session

    project = create_project("bench-ab")
    _, key = create_api_key(project, name="bench", actor=Actor.system("bench"))
    actor = Actor.system("bench")

    def new_session(title: str) -> str:
        session, _ = open_session(project, agent_name="bench-agent", actor=actor, title=title)
        return str(session.pk)

    factory = ib.ContentFactory(seed=7)
    conn = ib.pg_connect(args.db)
    read_sid = new_session("read")
    ib.load_session_events(
        conn,
        factory,
        uuid.UUID(read_sid),
        args.events,
        every=settings.SWITCHBOARD_SNAPSHOT_EVERY,
        seed=8,
    )
    conn.autocommit = True
    conn.execute("VACUUM ANALYZE sessions_app_event")
    conn.autocommit = False
    head = args.events

    servers: dict[str, ib.Server] = {}
    load_before = os.getloadavg()
    try:
        for label, root in roots.items():
            ib.SERVER_ROOT = root
            port = ib.free_port()
            extra = dict(item.split("=", 1) for item in args.new_env) if label == "new" else {}
            saved = dict(os.environ)
            os.environ.update(extra)
            try:
                servers[label] = ib.Server(
                    args.db,
                    port,
                    workers=args.workers,
                    http=ib.DEFAULT_HTTP,
                    loop=ib.DEFAULT_LOOP,
                    kind=kinds[label],
                )
            finally:
                os.environ.clear()
                os.environ.update(saved)
        for label, srv in servers.items():
            srv.wait_ready(key, f"/api/v1/sessions/{read_sid}")
            ib.warm_up(
                srv.port,
                key,
                factory,
                new_session("warm"),
                read_sid,
                args.workers,
                3 if args.smoke else 30,
            )
            ib.log(f"{label}: {roots[label]} under {srv.label} on port {srv.port}")

        ops = ["single", "batch100", "last50", "slice1000", "state", "fork"]
        lat: dict[str, dict[str, list[float]]] = {lb: {o: [] for o in ops} for lb in servers}
        cpu: dict[str, dict[str, list[tuple[float, float]]]] = {
            lb: {o: [] for o in ops} for lb in servers
        }
        sids = {lb: new_session(f"single {lb}") for lb in servers}
        bsids = {lb: new_session(f"batch {lb}") for lb in servers}
        singles = ib.append_bodies(factory, args.n * args.rounds, seed=100)
        batches = ib.append_bodies(factory, max(4, args.n // 6) * args.rounds, seed=200, batch=100)
        rng = random.Random(4)
        for r in range(0 if args.fleet_only else args.rounds):
            order = list(servers) if r % 2 == 0 else list(servers)[::-1]
            ats = [rng.randint(1, head) for _ in range(args.n)]
            afters = [rng.randint(0, max(0, head - 1000)) for _ in range(max(1, args.n // 5))]
            forks = [rng.randint(1, head) for _ in range(max(1, args.n // 3))]
            nb = len(batches) // args.rounds
            for lb in order:
                srv = servers[lb]
                base = f"/api/v1/sessions/{read_sid}"
                work = {
                    "single": (
                        [
                            build(srv.port, key, "POST", f"/api/v1/sessions/{sids[lb]}/events", b)
                            for b in singles[r * args.n : (r + 1) * args.n]
                        ],
                        (201,),
                    ),
                    "batch100": (
                        [
                            build(srv.port, key, "POST", f"/api/v1/sessions/{bsids[lb]}/events", b)
                            for b in batches[r * nb : (r + 1) * nb]
                        ],
                        (201,),
                    ),
                    "last50": (
                        [build(srv.port, key, "GET", f"{base}/events?order=desc&limit=50")]
                        * args.n,
                        (200,),
                    ),
                    "slice1000": (
                        [
                            build(srv.port, key, "GET", f"{base}/events?after_seq={a}&limit=1000")
                            for a in afters
                        ],
                        (200,),
                    ),
                    "state": (
                        [build(srv.port, key, "GET", f"{base}/state?at_seq={a}") for a in ats],
                        (200,),
                    ),
                    "fork": (
                        [
                            build(srv.port, key, "POST", f"{base}/fork", {"at_seq": a})
                            for a in forks
                        ],
                        (201,),
                    ),
                }
                for op, (reqs, expect) in work.items():
                    ms, scpu, pcpu = measure(srv, conn, args.db, key, reqs, expect)
                    lat[lb][op].extend(ms)
                    cpu[lb][op].append((scpu, pcpu))
            ib.log(f"round {r + 1}/{args.rounds} done")

        fleet: dict[str, list[dict[str, Any]]] = {lb: [] for lb in servers}
        if not args.no_fleet:
            fbodies = ib.append_bodies(factory, 200, seed=400)
            for rep in range(args.fleet_repeats):
                for lb in list(servers) if rep == 0 else list(servers)[::-1]:
                    fsids = [new_session(f"fleet {lb} {rep} {i}") for i in range(ib.FLEET_AGENTS)]
                    with cpu_of(servers[lb], conn, args.db) as m:
                        run = ib.fleet_http(
                            servers[lb].port, key, fsids, fbodies, args.fleet_seconds
                        )
                    # The meter also saw each agent's warm-up requests.
                    run["cpu"] = m.per_request(run["n"] + ib.FLEET_WARM_REQUESTS * ib.FLEET_AGENTS)
                    fleet[lb].append(run)
                    ib.log(f"fleet {lb}: {run['events_per_s']:,.0f} events/s")

        for what in args.profile:
            port = servers["new"].port
            base = f"/api/v1/sessions/{read_sid}"
            if what in ("single", "batch"):
                path = f"/api/v1/sessions/{new_session(f'profile {what}')}/events"
                bodies = (
                    singles
                    if what == "single"
                    else ib.append_bodies(factory, 50, seed=500, batch=100)
                )
                raws, expect = [build(port, key, "POST", path, b) for b in bodies], (201,)
            elif what == "last50":
                raws = [build(port, key, "GET", f"{base}/events?order=desc&limit=50")]
                expect = (200,)
            else:
                raws = [
                    build(port, key, "POST", f"{base}/fork", {"at_seq": rng.randint(1, head)})
                    for _ in range(200)
                ]
                expect = (201,)
            out = ROOT / "bench" / "results" / f"pyspy-{what}-{os.getpid()}"
            print(f"\nPROFILE of this tree's server, {what} (py-spy, request threads)")
            profile(servers["new"], key, raws, expect, args.profile_seconds, out)
    finally:
        for srv in servers.values():
            srv.stop()
    load_after = os.getloadavg()

    print("=" * 100)
    print(
        f"API before/after, one run, interleaved rounds ({args.rounds} x {args.n} requests per "
        f"op; batches: {max(4, args.n // 6)} per round); read session {head:,} events"
    )
    print(f"base = {roots['base']} under {servers['base'].label}")
    print(f"new  = {roots['new']} under {servers['new'].label} {' '.join(args.new_env)}")
    print(
        f"load average before {load_before[0]:.2f} {load_before[1]:.2f}, after "
        f"{load_after[0]:.2f} {load_after[1]:.2f} (2 cores, shared)"
    )
    print(
        f"{'operation':<12}{'base p50':>10}{'base p95':>10}{'new p50':>10}{'new p95':>10}"
        f"{'p50 new/base':>14}{'srv CPU base':>14}{'srv CPU new':>13}{'pg base':>9}{'pg new':>8}"
    )
    rows: dict[str, Any] = {}
    for op in lat["base"] if not args.fleet_only else ():
        b, n = lat["base"][op], lat["new"][op]
        bc = [sum(x) / len(x) for x in zip(*cpu["base"][op], strict=True)]
        nc = [sum(x) / len(x) for x in zip(*cpu["new"][op], strict=True)]
        rows[op] = {
            "base": {"p50": ib.pct(b, 0.5), "p95": ib.pct(b, 0.95), "cpu": bc},
            "new": {"p50": ib.pct(n, 0.5), "p95": ib.pct(n, 0.95), "cpu": nc},
        }
        print(
            f"{op:<12}{ib.pct(b, 0.5):>10.2f}{ib.pct(b, 0.95):>10.2f}{ib.pct(n, 0.5):>10.2f}"
            f"{ib.pct(n, 0.95):>10.2f}{ib.pct(n, 0.5) / ib.pct(b, 0.5):>13.2f}x"
            f"{bc[0]:>14.2f}{nc[0]:>13.2f}{bc[1]:>9.2f}{nc[1]:>8.2f}"
        )
    for op in ("batch100",) if not args.fleet_only else ():
        b, n = rows[op]["base"]["p50"], rows[op]["new"]["p50"]
        print(f"  batch100 events/s at p50: base {100_000 / b:,.0f}, new {100_000 / n:,.0f}")
    for lb, runs in fleet.items():
        if runs:
            print(
                f"fleet {lb}: "
                + "; ".join(
                    f"{f['events_per_s']:,.0f} ev/s p95 {f['p95']:.1f} ms"
                    f" CPU {f['cpu']['server_cpu_ms']:.2f} ms"
                    for f in runs
                )
            )
    pairs = [
        (
            n["events_per_s"] / b["events_per_s"],
            n["cpu"]["server_cpu_ms"] / b["cpu"]["server_cpu_ms"],
        )
        for b, n in zip(fleet["base"], fleet["new"], strict=True)
        if b["events_per_s"] and n["events_per_s"] and b["cpu"]["server_cpu_ms"]
    ]
    if pairs:
        print(
            f"fleet new/base, median of {len(pairs)} repeats: events/s "
            f"{statistics.median(p[0] for p in pairs):.2f}x, server CPU per append "
            f"{statistics.median(p[1] for p in pairs):.2f}x"
        )
    out = ROOT / "bench" / "results" / f"api-ab-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "fleet": fleet}, indent=2, default=str))
    print(f"results: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
