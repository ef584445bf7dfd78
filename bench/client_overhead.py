#!/usr/bin/env python
"""What the Python client (clients/python) adds to a call, against a bare httpx call, in one run.

    .venv/bin/python bench/client_overhead.py              # ~1 min
    .venv/bin/python bench/client_overhead.py --calls 500 --rounds 8

One server (uvicorn on config.asgi, as bench/ingest.py starts it, on a scratch database
recreated and migrated here), one keep-alive connection per variant, the same requests:
GET /healthz and a one-event append (POST /sessions/{id}/events, the same body shape, an
idempotency key in both). `httpx` is what a program would write by hand: `client.get(...)` /
`client.post(url, content=..., headers=...)`, the status checked, the JSON decoded. `client` is
`switchboard_client.Client`: `health()` and `append(...)`, which also build the request from its
operation table, make the key, and decode the answer into typed models. Variants alternate in
shuffled order within each round, so drift and other work on the machine hit both alike.

Printed per operation and variant: p50 and p95 latency (ms) and the bench process's CPU per
call (µs, time.process_time: the client side only, which is where the client's cost is), then
the ratio client/httpx and the difference. On a shared machine latency includes waiting for a
core; CPU per call does not, so compare runs by it. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as ib  # noqa: E402

ROOT = ib.ROOT


def measure(call: Callable[[], Any], n: int) -> tuple[list[float], float]:
    """Latencies (ms) of n calls and the process CPU (µs) per call."""
    latencies = []
    cpu0 = time.process_time()
    for _ in range(n):
        t0 = time.perf_counter()
        call()
        latencies.append((time.perf_counter() - t0) * 1000)
    return latencies, (time.process_time() - cpu0) * 1e6 / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default=ib.scratch_name("switchboard_bench_client"))
    parser.add_argument("--calls", type=int, default=300, help="calls per variant per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    ib.add_smoke_flag(parser)
    args = parser.parse_args()
    ib.smoke(args, calls=10, rounds=1, warmup=5)
    random.seed(args.seed)
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)

    ib.log(f"recreating database {args.db} and migrating")
    _, key, server = ib.agent_server(args, "bench-client")

    import httpx
    from switchboard_client import Client

    base = f"http://127.0.0.1:{server.port}"
    try:
        server.wait_ready(key, "/healthz")
        headers = {"Authorization": f"Bearer {key}"}
        bare = httpx.Client(headers=headers, timeout=30)
        sb = Client(base, key, timeout=30)
        session = sb.open_session("bench-agent", title="client overhead")
        events_url = f"{base}/api/v1/sessions/{session.id}/events"
        json_headers = {"Content-Type": "application/json"}

        def bare_health() -> Any:
            response = bare.get(base + "/healthz")
            response.raise_for_status()
            return response.json()

        def bare_append() -> Any:
            body = {
                "events": [
                    {
                        "kind": "note",
                        "content": {"text": "hello"},
                        "idempotency_key": uuid.uuid4().hex,
                    }
                ]
            }
            response = bare.post(events_url, content=json.dumps(body), headers=json_headers)
            response.raise_for_status()
            return response.json()

        def client_health() -> Any:
            return sb.health()

        def client_append() -> Any:
            return sb.append(session.id, [{"kind": "note", "content": {"text": "hello"}}])

        variants = {
            ("GET /healthz", "httpx"): bare_health,
            ("GET /healthz", "client"): client_health,
            ("append 1 event", "httpx"): bare_append,
            ("append 1 event", "client"): client_append,
        }
        ib.log(f"warm-up: {args.warmup} calls per variant")
        for call in variants.values():
            measure(call, args.warmup)
        latencies: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
        cpu: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
        load = os.getloadavg()
        ib.log(f"{args.rounds} rounds of {args.calls} calls per variant, shuffled")
        for _ in range(args.rounds):
            order = list(variants)
            random.shuffle(order)
            for variant in order:
                lat, per_call = measure(variants[variant], args.calls)
                latencies[variant] += lat
                cpu[variant].append(per_call)
        load_after = os.getloadavg()
        bare.close()
        sb.close()
    finally:
        server.stop()

    n = args.calls * args.rounds
    print(
        f"\nclient overhead: {server.label}, {n} calls per variant, one keep-alive connection "
        f"each; load average {load[0]:.1f} before, {load_after[0]:.1f} after "
        f"({os.cpu_count()} cores)"
    )
    print(f"{'operation':<16}{'variant':<9}{'p50 ms':>9}{'p95 ms':>9}{'CPU µs/call':>13}")
    for operation in dict.fromkeys(op for op, _ in variants):
        rows = {}
        for name in ("httpx", "client"):
            lat = latencies[(operation, name)]
            rows[name] = (
                statistics.median(lat),
                ib.pct(lat, 0.95),
                statistics.median(cpu[(operation, name)]),
            )
            p50, p95, c = rows[name]
            print(f"{operation:<16}{name:<9}{p50:>9.3f}{p95:>9.3f}{c:>13.0f}")
        (b50, b95, bc), (c50, c95, cc) = rows["httpx"], rows["client"]
        print(
            f"{'':<16}{'ratio':<9}{c50 / b50:>9.2f}{c95 / b95:>9.2f}{cc / bc:>13.2f}"
            f"   client - httpx: p50 {1000 * (c50 - b50):+.0f} µs, CPU {cc - bc:+.0f} µs/call"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
