#!/usr/bin/env python
"""Erasure figures on the local PostgreSQL: the time to erase one data subject spread over
many sessions (issue 28 §2 asks 1,000 sessions of 1,000 events), against retention's
whole-session deletion of as many sessions and events in the same run (the baseline: the same
rows deleted without hashing each into a receipt or the guard's per-row erasure check).

    .venv/bin/python bench/erasure.py                           # 1,000 x 1,000: minutes
    .venv/bin/python bench/erasure.py --sessions 200 --events 1000
    .venv/bin/python bench/erasure.py --smoke

1. Drops and recreates a scratch database (default `switchboard_bench_erasure`) on
   127.0.0.1:5432 (user postgres) and migrates it with this checkout's manage.py.
2. Inserts, in SQL, `--sessions` closed sessions of the subject (metadata user=subject) and as
   many of other people (the baseline's), `--events` events each (10 % facts), and a few
   bystanders' sessions that must survive.
3. Times the preview (services.erasure.preview_erasure), best of 3.
4. Baseline: deletes the other people's sessions with retention's primitive
   (services.deletion.delete_sessions_locked), in batches of as many sessions as an erasure
   batch takes (BATCH_EVENTS), one transaction each.
5. Erasure: requests the subject's erasure and runs the job's code in process
   (services.erasure.run_erasure): batches, receipt hashes, audit and delivery scrubbing.
6. Prints wall time, events per second, this process's CPU and the database backend's CPU
   (from /proc: same machine) for both, the ratio, and the receipt's size.

Nothing is asserted; figures are printed. The machine may be shared: say so with the figures.
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


def log(message: str) -> None:
    print(f"  · {message}", file=sys.stderr, flush=True)


def backend_cpu(pid: int) -> float | None:
    """Seconds of CPU the database backend `pid` has used (None if not on this machine)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default=common.scratch_name("switchboard_bench_erasure"))
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--bystanders", type=int, default=50)
    common.add_smoke_flag(parser)
    args = parser.parse_args()
    common.smoke(args, sessions=10, events=50, bystanders=3)

    common.django_on_scratch_database(args.db)
    from django.db import connection, transaction

    from core.actors import Actor
    from core.services.projects import create_project
    from retention_app.services.deletion import delete_sessions_locked
    from retention_app.services.erasure import (
        BATCH_EVENTS,
        preview_erasure,
        request_erasure,
        run_erasure,
    )
    from sessions_app.models import Event, Session
    from sessions_app.services.sessions import get_or_register_agent

    project = create_project("bench")
    agent = get_or_register_agent(project, "agent").pk
    total = args.sessions * args.events
    log(f"insert 2 x {args.sessions} sessions of {args.events} events, {args.bystanders} others")
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        for who, n in (("subject", args.sessions), ("other", args.sessions)):
            cur.execute(
                """
                INSERT INTO sessions_app_session (id, project_id, agent_id, title, status,
                    metadata, head_seq, tokens_used, cost_used, ancestry, created_at,
                    updated_at, closed_at, taken_over_by, compacted_through_seq)
                SELECT gen_random_uuid(), %(p)s, %(a)s, %(who)s || ' ' || g, 'closed',
                    jsonb_build_object('user', %(who)s || CASE WHEN %(who)s = 'other'
                        THEN g::text ELSE '' END),
                    %(e)s, 0, 0, '[]'::jsonb, now(), now(), now(), '', 0
                FROM generate_series(1, %(n)s) g
                """,
                {"p": project.pk, "a": agent, "e": args.events, "n": n, "who": who},
            )
        cur.execute(
            """
            INSERT INTO sessions_app_session (id, project_id, agent_id, title, status, metadata,
                head_seq, tokens_used, cost_used, ancestry, created_at, updated_at, closed_at,
                taken_over_by, compacted_through_seq)
            SELECT gen_random_uuid(), %(p)s, %(a)s, 'bystander ' || g, 'closed',
                '{"user": "bystander"}'::jsonb, 100, 0, 0, '[]'::jsonb, now(), now(), now(), '', 0
            FROM generate_series(1, %(n)s) g
            """,
            {"p": project.pk, "a": agent, "n": args.bystanders},
        )
        cur.execute(
            """
            INSERT INTO sessions_app_event (session_id, seq, kind, tier, role, content, text,
                tokens, cost, actor, created_at)
            SELECT s.id, g,
                CASE WHEN g %% 10 = 0 THEN 'fact' ELSE 'message' END,
                CASE WHEN g %% 10 = 0 THEN 'durable' ELSE 'transient' END,
                CASE WHEN g %% 10 = 0 THEN '' ELSE 'user' END,
                CASE WHEN g %% 10 = 0 THEN jsonb_build_object('key', 'k' || (g %% 7), 'value', g)
                     ELSE jsonb_build_object('text', 'a message of some length, number ' || g
                         || ', with words in it to look like a transcript line') END,
                CASE WHEN g %% 10 = 0 THEN '' ELSE 'a message of some length, number ' || g END,
                0, 0, 'bench', now()
            FROM sessions_app_session s CROSS JOIN generate_series(1, s.head_seq) g
            WHERE s.project_id = %(p)s
            """,
            {"p": project.pk},
        )
        cur.execute("ANALYZE")
        cur.execute("SELECT pg_backend_pid()")
        (pid,) = cur.fetchone()
    log(f"inserted in {time.perf_counter() - t0:.1f} s")

    selectors = {"metadata": {"key": "user", "value": "subject"}}
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        counts = preview_erasure(project, selectors).counts
        samples.append(time.perf_counter() - start)
    best, median = min(samples) * 1000, statistics.median(samples) * 1000
    print(
        f"preview: best {best:.0f} ms, median {median:.0f} ms; sessions {counts['sessions']},"
        f" events {counts['events']}, facts {counts['facts']}"
    )

    def measured(label: str, work) -> tuple[float, float, float | None]:  # type: ignore[no-untyped-def]
        db0, cpu0, wall0 = backend_cpu(pid), time.process_time(), time.perf_counter()
        work()
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        db1 = backend_cpu(pid)
        db = db1 - db0 if db0 is not None and db1 is not None else None
        db_text = f"{db:.1f} s" if db is not None else "n/a"
        print(
            f"{label}: {wall:.2f} s wall, {total / wall:,.0f} events/s; CPU: Python {cpu:.1f} s,"
            f" database backend {db_text}"
        )
        return wall, cpu, db

    per_batch = max(1, BATCH_EVENTS // max(args.events, 1))
    others = list(
        Session.objects.filter(project=project, title__startswith="other ")
        .order_by("pk")
        .values_list("pk", flat=True)
    )

    def baseline() -> None:
        for start in range(0, len(others), per_batch):
            with transaction.atomic():
                batch = list(
                    Session.objects.filter(pk__in=others[start : start + per_batch])
                    .select_related("agent")
                    .select_for_update(of=("self",))
                )
                delete_sessions_locked(batch, actor=Actor.system("bench"), run=None)

    log("baseline: retention's whole-session deletion")
    base_wall, _, _ = measured(f"baseline, retention deletion of {len(others)} sessions", baseline)

    result = {}

    def erase() -> None:
        erasure = request_erasure(project, selectors, actor=Actor.system("bench"))
        result["erasure"] = run_erasure(erasure.pk)

    log("erasure")
    from unittest import mock

    # The job runs here, in process: nothing is sent to a broker.
    with mock.patch("retention_app.services.erasure.current_app.send_task"):
        wall, _, _ = measured(f"erasure of {args.sessions} sessions", erase)
    erasure = result["erasure"]
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*), pg_size_pretty(pg_total_relation_size('retention_app_erasedobject'))"
            " FROM retention_app_erasedobject"
        )
        objects, size = cur.fetchone()
    left = Event.objects.filter(session__title__startswith="bystander").count()
    print(
        f"erasure/baseline wall ratio {wall / base_wall:.2f}; status {erasure.status}; counts"
        f" sessions {erasure.counts['sessions']}, events {erasure.counts['events']}; receipt"
        f" {objects} hashes ({size}); bystanders' events kept {left}"
    )


if __name__ == "__main__":
    main()
