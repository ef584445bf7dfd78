#!/usr/bin/env python
"""The queue's reads at 10,000 active handoffs: first page, a deep page, filters, counts.

    .venv/bin/python bench/handoff_queue.py               # ~1 min
    .venv/bin/python bench/handoff_queue.py --open 10000 --repeat 50

Recreates a scratch database (default `switchboard_bench_handoff_queue`) on the local
PostgreSQL (127.0.0.1:5432, user postgres), migrates it, bulk-inserts --open sessions each with
an active handoff (mixed kinds, priorities, a quarter claimed, a tenth overdue), then times the
queries the queue page makes (handoffs_app.queries) in this process: p50 / p95 in ms, and the
plan of the first page. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--open", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--db", default=common.scratch_name("switchboard_bench_handoff_queue"))
    common.add_smoke_flag(parser)
    args = parser.parse_args()
    common.smoke(args, open=200, repeat=3)

    os.environ.update(
        DATABASE_URL=common.pg_url(args.db),
        REDIS_URL="",
        DJANGO_SETTINGS_MODULE="config.settings",
        LOG_LEVEL="WARNING",
    )
    common.scratch_database(args.db)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from core.actors import Actor
    from core.models import Role
    from core.services.projects import add_member, create_project
    from handoffs_app.models import Handoff
    from handoffs_app.queries import QueueFilters, filter_queue, queue_counts, queue_page
    from sessions_app.models import Agent, Session

    project = create_project("bench")
    other = create_project("other")
    user = get_user_model().objects.create_user("op", password="x")
    add_member(project, user, Role.OPERATOR)
    now = timezone.now()
    for target, count in ((project, args.open), (other, args.open // 2)):
        agent = Agent.objects.create(project=target, name="bench-agent")
        sessions = Session.objects.bulk_create(
            [Session(project=target, agent=agent, status="paused") for _ in range(count)],
            batch_size=2000,
        )
        kinds = ["question", "approval", "takeover", "budget"]
        rows = []
        for i, session in enumerate(sessions):
            created = now - timedelta(seconds=count - i)
            claimed = i % 4 == 0
            rows.append(
                Handoff(
                    project=target,
                    session=session,
                    kind=kinds[i % 4],
                    status="claimed" if claimed else "open",
                    priority=i % 4,
                    due_at=created + timedelta(minutes=30),
                    expires_at=created + timedelta(days=1),
                    overdue=i % 10 == 0,
                    requested_by=Actor.system("bench").label,
                    lease_holder=user if claimed else None,
                    lease_expires_at=now + timedelta(minutes=15) if claimed else None,
                    payload={"question": "?"},
                )
            )
        Handoff.objects.bulk_create(rows, batch_size=2000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")

    def timed(name: str, fn) -> None:  # type: ignore[no-untyped-def]
        fn()
        samples = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - started) * 1000)
        print(
            f"{name:<40} p50 {statistics.median(samples):6.2f} ms"
            f"   p95 {pct(samples, 0.95):6.2f} ms"
        )

    def page(**filters):  # type: ignore[no-untyped-def]
        return lambda: queue_page(filter_queue(project, QueueFilters(**filters), user=user))

    _, cursor = queue_page(filter_queue(project, QueueFilters()), limit=50)
    deep = cursor
    for _ in range(60):  # ~3,000 rows down
        _, deep = queue_page(filter_queue(project, QueueFilters()), cursor=deep, limit=50)

    print(f"{args.open} active handoffs in the project ({args.open // 2} in another)")
    timed("queue, first page (50)", page())
    timed(
        "queue, page 61 (keyset)",
        lambda: queue_page(filter_queue(project, QueueFilters()), cursor=deep),
    )
    timed("queue, unclaimed", page(unclaimed=True))
    timed("queue, mine", page(mine=True))
    timed("queue, overdue", page(overdue=True))
    timed("queue, kind=approval", page(kind=["approval"]))
    timed("counts (navigation)", lambda: queue_counts(project, user=user))
    qs = filter_queue(project, QueueFilters()).order_by("-priority", "created_at", "id")[:51]
    print("\nplan of the first page:")
    print(qs.explain())


if __name__ == "__main__":
    main()
