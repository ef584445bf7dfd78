#!/usr/bin/env python
"""What webhooks cost the lifecycle hot path: a pause or resume with the fan-out cut out
(baseline), with it and no endpoint in the project (the common case), and with one subscribed
endpoint (a delivery row written in the transaction).

    .venv/bin/python bench/webhooks.py [--db switchboard_bench_webhooks] [--rounds 5] [--n 400]

Recreates a scratch database on the local PostgreSQL (127.0.0.1:5432, user postgres), adds
1,000 endpoints spread over 200 other projects (so the probe runs against a table that is not
empty), then times transitions of one session in interleaved rounds, the three modes taking
turns, and prints medians per transition with ratios to the baseline. The broker is Celery's
in-memory transport: the on-commit kick costs its publish, no worker runs. Nothing asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import ingest as ib  # noqa: E402  (database set-up helpers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=ib.scratch_name("switchboard_bench_webhooks"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=400, help="transitions per mode per round")
    ib.add_smoke_flag(parser)
    args = parser.parse_args()
    ib.smoke(args, rounds=1, n=20)

    env = ib.server_env(args.db, redis=False)
    env["CELERY_BROKER_URL"] = "memory://"
    ib.scratch_database(args.db, env)
    os.environ.update(env)
    import django

    django.setup()
    from django.db import connection, transaction
    from django.utils import timezone

    import core.domain_events as domain_events
    from core.actors import Actor
    from core.models import WebhookDelivery, WebhookEndpoint
    from core.services.projects import create_project
    from core.storage import insert_webhook_deliveries
    from sessions_app.services.lifecycle import pause_session, resume_session
    from sessions_app.services.sessions import open_session

    actor = Actor.system("bench")
    events = ["session.paused", "session.resumed", "session.closed"]
    others = [create_project(f"other-{i}") for i in range(10 if args.smoke else 200)]
    WebhookEndpoint.objects.bulk_create(
        WebhookEndpoint(project=p, url=f"https://h{i}.example.com/", secret="x", events=events)
        for p in others
        for i in range(5)
    )
    quiet = create_project("no-endpoint")
    busy = create_project("one-endpoint")
    WebhookEndpoint.objects.create(
        project=busy, url="https://hooks.example.com/", secret="x", events=events
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    def session_of(project):  # type: ignore[no-untyped-def]
        session, _ = open_session(project, agent_name="bench", actor=actor)
        return session

    real_enqueue = domain_events.enqueue_deliveries_of

    def run(mode: str, n: int) -> float:
        """Median ms per transition (pause, resume, pause, …) of a fresh session."""
        domain_events.enqueue_deliveries_of = (
            (lambda *a, **k: 0) if mode == "baseline" else real_enqueue  # type: ignore[assignment]
        )
        session = session_of(busy if mode == "one endpoint" else quiet)
        samples = []
        for i in range(n):
            move = pause_session if i % 2 == 0 else resume_session
            start = time.perf_counter()
            move(session, actor=actor)
            samples.append((time.perf_counter() - start) * 1000)
        domain_events.enqueue_deliveries_of = real_enqueue
        return statistics.median(samples)

    def probe(n: int) -> float:
        """Median ms of the INSERT … SELECT alone, finding no endpoint (in a transaction)."""
        samples = []
        with transaction.atomic():
            for _ in range(n):
                start = time.perf_counter()
                insert_webhook_deliveries(quiet.pk, "session.paused", {"x": 1}, now=timezone.now())
                samples.append((time.perf_counter() - start) * 1000)
        return statistics.median(samples)

    modes = ["baseline", "no endpoint", "one endpoint"]
    for mode in modes:  # warm-up
        run(mode, 50)
    results: dict[str, list[float]] = {m: [] for m in modes}
    probes = []
    for r in range(args.rounds):
        order = modes if r % 2 == 0 else list(reversed(modes))
        for mode in order:
            results[mode].append(run(mode, args.n))
        probes.append(probe(args.n))
    base = statistics.median(results["baseline"])
    print(
        f"lifecycle transition, median of {args.rounds} rounds × {args.n} transitions"
        f" ({WebhookEndpoint.objects.count()} endpoints in the table):"
    )
    for mode in modes:
        value = statistics.median(results[mode])
        print(f"  {mode:<13} {value:6.3f} ms   ×{value / base:.3f} of baseline")
    print(f"  the no-endpoint INSERT … SELECT alone: {statistics.median(probes):.3f} ms")
    print(f"  deliveries written (one endpoint mode): {WebhookDelivery.objects.count()}")


if __name__ == "__main__":
    main()
