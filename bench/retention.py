#!/usr/bin/env python
"""Retention figures on the local PostgreSQL: the preview's time at 100,000 sessions, and
compaction throughput over ~1,000,000 eligible events, with the events table's size before,
after the job and after VACUUM.

    .venv/bin/python bench/retention.py                       # ~2-4 min
    .venv/bin/python bench/retention.py --sessions 100000 --heavy 1000 --events 1000

1. Drops and recreates a scratch database (default `switchboard_bench_retention`) on
   127.0.0.1:5432 (user postgres) and migrates it with this checkout's manage.py.
2. Inserts, in SQL, `--sessions` sessions of one project (open, paused, closed, archived, their
   times spread over 60 days) and `--heavy` closed sessions of `--events` events each (90 %
   transient: messages, state patches; 10 % facts), all eligible for compaction.
3. Times the preview (retention_app.services.preview: the jobs' own selection code) with the
   default policy and with outcome rules on (the subqueries on the log), best and median of 5.
4. Runs compact_sessions (the job's code, in process) over the heavy sessions and prints events
   removed per second, the table's size before, after, and after VACUUM.

Nothing is asserted; figures are printed. Not measured here: append latency under a concurrent
compaction (see the report).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG = "postgres://postgres@127.0.0.1:5432/{db}"


def log(message: str) -> None:
    print(f"  · {message}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="switchboard_bench_retention")
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--heavy", type=int, default=1000)
    parser.add_argument("--events", type=int, default=1000)
    args = parser.parse_args()

    import psycopg

    with psycopg.connect(PG.format(db="postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{args.db}"')
    os.environ.update(
        {
            "DATABASE_URL": PG.format(db=args.db),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DEBUG": "false",
            "SECRET_KEY": "bench-only-secret-key-not-for-production-0123456789",
            "LOG_LEVEL": "WARNING",
        }
    )
    os.environ.pop("REDIS_URL", None)
    log("migrate")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env=dict(os.environ),
        check=True,
    )
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connection
    from django.utils import timezone

    from core.actors import Actor
    from core.services.projects import create_project
    from retention_app.services.jobs import run_job
    from retention_app.services.policies import project_policies, save_policy
    from retention_app.services.preview import preview
    from sessions_app.services.sessions import get_or_register_agent

    project = create_project("bench")
    agents = [get_or_register_agent(project, f"agent-{i}").pk for i in range(5)]
    log(f"insert {args.sessions} sessions and {args.heavy} x {args.events} events")
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(
            """
            INSERT INTO sessions_app_session (id, project_id, agent_id, title, status, metadata,
                head_seq, tokens_used, cost_used, ancestry, created_at, updated_at, closed_at,
                archived_at, taken_over_by, compacted_through_seq)
            SELECT gen_random_uuid(), %(p)s, (%(agents)s::int[])[1 + g %% 5], 's' || g,
                st, '{}'::jsonb, 0, 0, 0, '[]'::jsonb, t, t,
                CASE WHEN st IN ('closed', 'archived') THEN t END,
                CASE WHEN st = 'archived' THEN t END, '', 0
            FROM (
                SELECT g, now() - (g %% 60) * interval '1 day' - (g %% 1440) * interval '1 min' t,
                    (ARRAY['open','open','paused','closed','closed','closed','archived',
                           'archived','archived','resumed'])[1 + g %% 10] st
                FROM generate_series(1, %(n)s) g
            ) x
            """,
            {"p": project.pk, "agents": agents, "n": args.sessions},
        )
        cur.execute(
            """
            INSERT INTO sessions_app_session (id, project_id, agent_id, title, status, metadata,
                head_seq, tokens_used, cost_used, ancestry, created_at, updated_at, closed_at,
                taken_over_by, compacted_through_seq)
            SELECT gen_random_uuid(), %(p)s, %(a)s, 'heavy ' || g, 'closed', '{}'::jsonb,
                %(e)s, 0, 0, '[]'::jsonb, now() - interval '40 days', now() - interval '40 days',
                now() - interval '40 days', '', 0
            FROM generate_series(1, %(h)s) g
            """,
            {"p": project.pk, "a": agents[0], "e": args.events, "h": args.heavy},
        )
        cur.execute(
            """
            INSERT INTO sessions_app_event (session_id, seq, kind, tier, role, content, text,
                tokens, cost, actor, created_at)
            SELECT s.id, g,
                CASE WHEN g %% 10 = 0 THEN 'fact' WHEN g %% 10 = 5 THEN 'state' ELSE 'message' END,
                CASE WHEN g %% 10 = 0 THEN 'durable' ELSE 'transient' END,
                CASE WHEN g %% 10 IN (0, 5) THEN '' ELSE 'user' END,
                CASE WHEN g %% 10 = 0 THEN jsonb_build_object('key', 'k' || (g %% 7), 'value', g)
                     WHEN g %% 10 = 5 THEN jsonb_build_object('step', g, 'k' || (g %% 3), g)
                     ELSE jsonb_build_object('text', 'a message of some length, number ' || g
                         || ', with words in it to look like a transcript line') END,
                CASE WHEN g %% 10 IN (0, 5) THEN ''
                     ELSE 'a message of some length, number ' || g END,
                0, 0, 'bench', now() - interval '40 days'
            FROM sessions_app_session s CROSS JOIN generate_series(1, %(e)s) g
            WHERE s.title LIKE 'heavy %%'
            """,
            {"e": args.events},
        )
        cur.execute("ANALYZE")
    log(f"inserted in {time.perf_counter() - t0:.1f} s")

    def timed(policies) -> tuple[float, float, dict]:  # type: ignore[no-untyped-def]
        samples = []
        result = None
        for _ in range(5):
            start = time.perf_counter()
            result = preview(project, policies, now=timezone.now())
            samples.append(time.perf_counter() - start)
        return min(samples), statistics.median(samples), result.counts  # type: ignore[union-attr]

    best, median, counts = timed(project_policies(project))
    total = args.sessions + args.heavy
    print(
        f"preview at {total} sessions, default policy: best {best * 1000:.0f} ms, "
        f"median {median * 1000:.0f} ms; counts {counts}"
    )
    policy = {
        **project_policies(project).project.as_dict(),
        "keep_outcomes": ["error", "handoff", "over_budget"],
        "keep_tags": ["vip"],
    }
    save_policy(project, policy, actor=Actor.system("bench"))
    best, median, counts = timed(project_policies(project))
    print(
        f"preview at {total} sessions, outcome rules on: best {best * 1000:.0f} ms, "
        f"median {median * 1000:.0f} ms; counts {counts}"
    )

    def size() -> int:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_total_relation_size('sessions_app_event')")
            return int(cur.fetchone()[0])

    before = size()
    start = time.perf_counter()
    runs = run_job("compact_sessions", trigger="bench", limit=20, max_batches=10_000)
    elapsed = time.perf_counter() - start
    removed = sum(r.events_freed for r in runs)
    compacted = sum(r.compacted for r in runs)
    after = size()
    with connection.cursor() as cur:
        cur.execute("VACUUM sessions_app_event")
    vacuumed = size()
    print(
        f"compaction: {compacted} sessions, {removed} events removed in {elapsed:.1f} s = "
        f"{removed / elapsed:,.0f} events/s (eligible: {args.heavy * args.events})"
    )
    mb = 1024 * 1024
    print(
        f"events table (with indexes): before {before / mb:.0f} MB, after the job "
        f"{after / mb:.0f} MB, after VACUUM {vacuumed / mb:.0f} MB "
        "(VACUUM frees space for reuse; VACUUM FULL would return it to the OS)"
    )


if __name__ == "__main__":
    main()
