#!/usr/bin/env python
"""Switchboard export benchmark: another agent's appends while heavy exports stream.

    .venv/bin/python bench/exports.py                 # 300,000-event session, 3 rounds, ~3-5 min
    .venv/bin/python bench/exports.py --quick         # 50,000 events, 2 rounds, ~1 min
    .venv/bin/python bench/exports.py --slots 4       # the server allows 4 exports per project
    .venv/bin/python bench/exports.py --server-root /tmp/before   # another checkout's server

What it does (nothing is asserted; the exit status is 0 unless the benchmark itself fails):

1. Drops and recreates a scratch database (default `switchboard_bench_exports`) on the local
   PostgreSQL (127.0.0.1:5432, user postgres) and migrates it.
2. Loads one session of --events events (default 300,000; realistic content, bench/ingest.py's
   loader: COPY, then the automatic snapshots) and opens a second, empty session: the other
   agent's.
3. Starts the real server the way bench/ingest.py does (uvicorn, 2 workers, httptools, uvloop,
   Redis as the channel layer, DEBUG off) on a free port, with SWITCHBOARD_EXPORTS_PER_PROJECT
   = --slots (default: the product's default, 2).
4. Per round: the other agent appends --appends single events back to back on one keep-alive
   connection (latency of each), first with nothing else running ("idle"), then while --exports
   (default 4) client processes download the big session's export over and over ("exports").
   A client refused with 429 waits the Retry-After the server sent, as a well-behaved client
   would, then asks again. Rounds alternate idle/exports so drift hits both alike.
5. Prints append p50/p95 idle and under exports, their ratios (the target: within 2x), and
   what the export clients got (downloads completed, events/s, 429s), and writes the figures as
   JSON to bench/results/ (git-ignored).

The export clients run in their own processes (not threads of this one) so reading ~150 MB per
download does not slow the measuring client.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import ingest  # noqa: E402  (bench/ingest.py: loader, raw HTTP client, server runner)

ROOT = HERE.parent


MARK = b'{"seq":'  # starts every event line; chunked framing never contains it


def export_client(port: int, key: str, path: str, stop: str, expected: int) -> dict[str, Any]:
    """Download `path` again and again until the file `stop` exists; honour 429's Retry-After.

    A download read to its end counts as `expected` events (the one download alone before
    the rounds counted them); nothing else of the body is parsed, to keep the client light.
    """
    done, refused, partial, events, seconds = 0, 0, 0, 0, 0.0
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()

    def stopped() -> bool:
        return os.path.exists(stop)

    while not stopped():
        started = time.perf_counter()
        sock = socket.create_connection(("127.0.0.1", port))
        sock.settimeout(120)
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head[9:12]) if head else 0
        if status == 429:
            refused += 1
            retry_after = 1.0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"retry-after:"):
                    retry_after = float(line.split(b":", 1)[1])
            sock.close()
            deadline = time.monotonic() + retry_after
            while time.monotonic() < deadline and not stopped():
                time.sleep(0.05)
            continue
        # Read into one buffer, parsing nothing but the last bytes (the terminal 0-size chunk):
        # a light client, like curl to /dev/null, so the measured server gets the cores.
        complete = body.endswith(b"\r\n0\r\n\r\n")
        buffer = bytearray(1 << 20)
        last = bytes(body[-16:])
        while not complete and not stopped():
            size = sock.recv_into(buffer)
            if not size:
                break
            last = (last + bytes(buffer[max(0, size - 16) : size]))[-16:]
            complete = last.endswith(b"\r\n0\r\n\r\n")
        if complete:
            reader_events = expected
        sock.close()
        if complete and status == 200:
            done += 1
            events += reader_events
            seconds += time.perf_counter() - started
        else:
            partial += 1
    return {"done": done, "refused": refused, "partial": partial, "events": events, "s": seconds}


def one_export(port: int, key: str, path: str) -> dict[str, Any]:
    """One download alone, in this process: its status, events and seconds."""
    started = time.perf_counter()
    status, events = _single_download(port, key, path)
    return {"status": status, "events": events, "s": time.perf_counter() - started}


class ChunkedBody:
    """Counts the events of a chunked HTTP body as it arrives (framing removed first: a chunk
    boundary may fall inside an event line). `feed()` each read; `finished` after the 0 chunk."""

    def __init__(self) -> None:
        self.raw = b""
        self.left = 0  # payload bytes still due in the current chunk
        self.skip = 0  # bytes of the CRLF after a chunk still to skip
        self.events = 0
        self.tail = b""
        self.finished = False

    def feed(self, data: bytes) -> None:
        self.raw += data
        while self.raw and not self.finished:
            if self.left:
                payload, self.raw = self.raw[: self.left], self.raw[self.left :]
                self.left -= len(payload)
                if not self.left:
                    self.skip = 2
                window = self.tail + payload
                self.events += window.count(MARK)
                self.tail = window[-(len(MARK) - 1) :]
            elif self.skip:
                dropped = min(self.skip, len(self.raw))
                self.raw, self.skip = self.raw[dropped:], self.skip - dropped
            else:
                line, sep, rest = self.raw.partition(b"\r\n")
                if not sep:
                    return
                self.raw = rest
                self.left = int(line.split(b";")[0], 16)
                self.finished = self.left == 0


def _single_download(port: int, key: str, path: str) -> tuple[int, int]:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(300)
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
        "Connection: close\r\n\r\n".encode()
    )
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, buffer = data.partition(b"\r\n\r\n")
    body = ChunkedBody()
    while not body.finished:
        body.feed(buffer)
        buffer = sock.recv(1 << 20)
        if not buffer:
            break
    sock.close()
    return int(head[9:12]), body.events


def run_export_client() -> None:
    """Entry point of an export client process: arguments as JSON on argv, result on stdout."""
    args = json.loads(sys.argv[2])
    print(json.dumps(export_client(**args)), flush=True)


def appends(port: int, key: str, sid: uuid.UUID, bodies: list[bytes]) -> list[float]:
    """Latency (ms) of each single-event append, back to back on one new keep-alive connection
    (its first five unmeasured: a fresh connection per phase, as the server closes idle ones)."""
    conn = ingest.HttpConn(port, key)
    path = f"/api/v1/sessions/{sid}/events"
    try:
        for body in bodies[:5]:
            ingest.timed(conn, conn.build("POST", path, body), (201,))
        return [ingest.timed(conn, conn.build("POST", path, b), (201,))[0] for b in bodies[5:]]
    finally:
        conn.close()


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="50,000 events, 2 rounds")
    p.add_argument("--events", type=int, help="events in the exported session (default 300000)")
    p.add_argument("--exports", type=int, default=4, help="concurrent export clients (4)")
    p.add_argument("--appends", type=int, help="appends per phase per round (default 400)")
    p.add_argument("--rounds", type=int, help="idle/exports round pairs (default 3)")
    p.add_argument(
        "--slots",
        type=int,
        default=None,
        help="SWITCHBOARD_EXPORTS_PER_PROJECT for the server (default: the product's, 2)",
    )
    p.add_argument("--db", default=ingest.scratch_name("switchboard_bench_exports"))
    p.add_argument("--workers", type=int, default=ingest.DEFAULT_WORKERS)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--server-root",
        type=Path,
        default=ROOT,
        help="run the server from this checkout (same schema): before/after figures",
    )
    ingest.add_smoke_flag(p)
    args = p.parse_args()
    ingest.smoke(args, quick=True, events=2_000, appends=10, rounds=1, exports=2, workers=1)
    ingest.SERVER_ROOT = args.server_root.resolve()
    n_events = args.events or (50_000 if args.quick else 300_000)
    n_appends = args.appends or (200 if args.quick else 400)
    rounds = args.rounds or (2 if args.quick else 3)

    (HERE / "results").mkdir(exist_ok=True)
    started_at = dt.datetime.now(dt.UTC).replace(microsecond=0)
    ingest.log(f"recreating database {args.db} and migrating")
    env = ingest.server_env(args.db)
    if args.slots is not None:
        env["SWITCHBOARD_EXPORTS_PER_PROJECT"] = str(args.slots)
    ingest.scratch_database(args.db, env)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings

    from core.actors import Actor
    from core.services.projects import create_api_key, create_project
    from sessions_app.services.sessions import open_session

    actor = Actor.system("bench")
    project = create_project("bench-exports")
    _, key = create_api_key(project, name="bench", actor=actor)
    big, _ = open_session(project, agent_name="exported-agent", actor=actor, title="big")
    other, _ = open_session(project, agent_name="other-agent", actor=actor, title="appends")
    factory = ingest.ContentFactory(seed=args.seed)
    conn = ingest.pg_connect(args.db)
    with ingest.Timer() as t:
        ingest.load_session_events(
            conn, factory, big.pk, n_events, every=settings.SWITCHBOARD_SNAPSHOT_EVERY, seed=1
        )
    ingest.log(f"loaded {n_events:,} events in {t.seconds:.1f}s")
    conn.autocommit = True
    conn.execute("VACUUM ANALYZE sessions_app_event")
    conn.close()

    port = ingest.free_port()
    server = ingest.Server(
        args.db, port, workers=args.workers, http=ingest.DEFAULT_HTTP, loop=ingest.DEFAULT_LOOP
    )
    slots = args.slots or 2
    results: dict[str, Any] = {}
    try:
        server.wait_ready(key, f"/api/v1/sessions/{other.pk}")
        bodies = ingest.append_bodies(factory, (n_appends + 5) * rounds * 2 + 50, seed=3)
        appends(port, key, other.pk, bodies[:50])  # warm-up: every code path, both workers
        for _ in range(4):
            appends(port, key, other.pk, bodies[:10])
        export_path = f"/api/v1/sessions/{big.pk}/export"
        ingest.log("one export alone (warm-up, and its duration)")
        solo = one_export(port, key, export_path)
        ingest.log(f"one export alone: {solo['s']:.1f}s for {solo['events']:,} events")
        if solo["events"] != n_events:
            raise RuntimeError(
                f"the export (HTTP {solo['status']}) sent {solo['events']} events, not {n_events}"
            )

        idle: list[list[float]] = []
        busy: list[list[float]] = []
        clients: list[dict[str, Any]] = []
        offset = 50
        for r in range(rounds):
            chunk = bodies[offset : offset + n_appends + 5]
            offset += n_appends + 5
            idle.append(appends(port, key, other.pk, chunk))
            ingest.log(f"round {r + 1}: idle p50 {statistics.median(idle[-1]):.2f} ms")

            # Export clients run until the appends are done; they start 1 s ahead so every
            # slot is streaming when the first append is sent.
            stop = HERE / "results" / f".stop-{port}-{r}"
            stop.unlink(missing_ok=True)
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--export-client",
                        json.dumps(
                            {
                                "port": port,
                                "key": key,
                                "path": export_path,
                                "stop": str(stop),
                                "expected": n_events,
                            }
                        ),
                    ],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for _ in range(args.exports)
            ]
            time.sleep(1.0)
            chunk = bodies[offset : offset + n_appends + 5]
            offset += n_appends + 5
            busy.append(appends(port, key, other.pk, chunk))
            ingest.log(f"round {r + 1}: under exports p50 {statistics.median(busy[-1]):.2f} ms")
            stop.touch()
            for proc in procs:
                out, _ = proc.communicate(timeout=120)
                clients.append(json.loads(out))
            stop.unlink()
    finally:
        server.stop()

    idle_s, busy_s = ingest.summarise(idle), ingest.summarise(busy)
    done = sum(c["done"] for c in clients)
    events = sum(c["events"] for c in clients)
    seconds = sum(c["s"] for c in clients)
    results = {
        "started_at": started_at.isoformat(),
        "server_root": str(ingest.SERVER_ROOT),
        "server": server.label,
        "events": n_events,
        "export_clients": args.exports,
        "slots_per_project": slots,
        "appends_per_phase": n_appends,
        "rounds": rounds,
        "solo_export_seconds": solo["s"],
        "idle": idle_s,
        "under_exports": busy_s,
        "ratio_p50": busy_s["p50"] / idle_s["p50"],
        "ratio_p95": busy_s["p95"] / idle_s["p95"],
        "exports_completed": done,
        "exports_refused_429": sum(c["refused"] for c in clients),
        "exports_cut_at_phase_end": sum(c["partial"] for c in clients),
        "export_events_per_s_each": (events / seconds) if seconds else 0.0,
        "load_average": os.getloadavg(),
    }
    out = HERE / "results" / f"exports-{started_at:%Y%m%dT%H%M%S}.json"
    out.write_text(json.dumps(results, indent=2))
    print()
    print(f"EXPORTS BENCHMARK  ({n_events:,}-event session; {server.label})")
    print(
        f"  server from {ingest.SERVER_ROOT}, run with SWITCHBOARD_EXPORTS_PER_PROJECT={slots}"
        " (a server without the limit ignores it)"
    )
    print(f"  one export alone: {solo['s']:.2f} s")
    print(
        f"  appends idle          p50 {idle_s['p50']:7.2f} ms  p95 {idle_s['p95']:7.2f} ms"
        f"  (n={idle_s['n']}, round p50 {idle_s['round_p50_min']:.2f}-"
        f"{idle_s['round_p50_max']:.2f})"
    )
    print(
        f"  appends + {args.exports} exports  p50 {busy_s['p50']:7.2f} ms  p95"
        f" {busy_s['p95']:7.2f} ms  (n={busy_s['n']}, round p50 {busy_s['round_p50_min']:.2f}-"
        f"{busy_s['round_p50_max']:.2f})"
    )
    verdict = "PASS" if results["ratio_p50"] <= 2 else "MISS"
    print(
        f"  ratio p50 {results['ratio_p50']:.2f}x  p95 {results['ratio_p95']:.2f}x"
        f"  (target p50 within 2x: {verdict})"
    )
    print(
        f"  export clients: {done} downloads completed, {results['exports_refused_429']} refused"
        f" with 429, {results['exports_cut_at_phase_end']} cut at the phase end;"
        f" {results['export_events_per_s_each']:,.0f} events/s per download"
    )
    print(f"  load average {os.getloadavg()[0]:.2f}; figures in {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--export-client":
        run_export_client()
    else:
        sys.exit(main())
