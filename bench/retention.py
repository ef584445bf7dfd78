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

5. Single-event append latency of a concurrent ingestion load (one child process appending one
   event at a time to its own open session), alone first for --ingest-seconds (the baseline),
   then exactly while compaction and deletion run in this process (the child stops when they
   end, so no unloaded tail dilutes the figure): p50 / p95 of both, and the ratio. The job and
   the load are separate processes with their own connections, as a worker and a web server.

Nothing is asserted; figures are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as common  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def log(message: str) -> None:
    print(f"  · {message}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default=common.scratch_name("switchboard_bench_retention"))
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--heavy", type=int, default=1000)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--ingest-seconds", type=float, default=30)
    parser.add_argument(
        "--nice", type=int, default=0, help="run the jobs at this niceness (as `nice -n`)"
    )
    parser.add_argument("--ingest-child", type=int, help=argparse.SUPPRESS)  # a project id
    parser.add_argument("--stop-file", help=argparse.SUPPRESS)  # the loaded child stops at it
    common.add_smoke_flag(parser)
    args = parser.parse_args()
    common.smoke(args, sessions=500, heavy=10, events=50, ingest_seconds=1.0)
    if args.ingest_child:
        ingest_child(args)
        return

    common.django_on_scratch_database(args.db)
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

    log(f"ingestion alone, {args.ingest_seconds:.0f} s")
    ingesting = args.ingest_seconds > 0  # --ingest-seconds 0: the jobs alone (profiling)
    baseline = run_ingest(args, project.pk) if ingesting else []
    log("ingestion while compacting")
    stop = Path(f"/tmp/{args.db}-stop-ingest")
    stop.unlink(missing_ok=True)
    child = start_ingest(args, project.pk, stop_file=stop) if ingesting else None
    before = size()
    if args.nice:
        os.nice(args.nice)  # the job's process only: the ingestion child was started before
    compaction_began = time.time()
    start = time.perf_counter()
    runs = run_job("compact_sessions", trigger="bench", max_batches=10_000)
    elapsed = time.perf_counter() - start
    after = size()
    # Deletion: archive the compacted sessions and delete them (the bench's other archived
    # sessions too), while the child still appends.
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE sessions_app_session SET status = 'archived',"
            " archived_at = now() - interval '400 days' WHERE title LIKE 'heavy %%'"
        )
    deleting = {
        **policy,
        "close_idle_after": None,
        "close_paused_after": None,
        "archive_closed_after": None,
        "compact_after": None,
        "delete_after": 86400,
    }
    save_policy(project, deleting, actor=Actor.system("bench"))
    deletion_began = time.time()
    start_delete = time.perf_counter()
    deleted_runs = run_job("enforce_retention", trigger="bench", max_batches=10_000)
    delete_elapsed = time.perf_counter() - start_delete
    deletion_ended = time.time()
    stop.touch()
    stamped = finish_ingest(child) if child is not None else []
    loaded = [ms for _, ms in stamped]
    during_compaction = [ms for at, ms in stamped if compaction_began <= at < deletion_began]
    during_deletion = [ms for at, ms in stamped if deletion_began <= at < deletion_ended]
    stop.unlink(missing_ok=True)
    removed = sum(r.events_freed for r in runs)
    compacted = sum(r.compacted for r in runs)
    after_delete = size()
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
        f"{after / mb:.0f} MB, after deletion {after_delete / mb:.0f} MB, "
        f"after VACUUM {vacuumed / mb:.0f} MB "
        "(VACUUM frees space for reuse; VACUUM FULL would return it to the OS)"
    )
    gone = sum(r.deleted for r in deleted_runs)
    freed = sum(r.events_freed for r in deleted_runs)
    print(f"deletion: {gone} sessions, {freed} events in {delete_elapsed:.1f} s")
    if not ingesting:
        return
    for name, lat in (
        ("alone", baseline),
        ("during compaction+deletion", loaded),
        ("during compaction", during_compaction),
        ("during deletion", during_deletion),
    ):
        print(
            f"append latency {name}: n={len(lat)} p50 {pct(lat, 50):.2f} ms, "
            f"p95 {pct(lat, 95):.2f} ms"
        )
    print(
        f"ratio (during / alone): p50 {pct(loaded, 50) / pct(baseline, 50):.2f}, "
        f"p95 {pct(loaded, 95) / pct(baseline, 95):.2f}"
    )


def pct(values: list[float], p: float) -> float:
    if not values:  # (a smoke run's jobs may end before the loading child appends at all)
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))]


def start_ingest(args, project_id: int, stop_file: Path | None = None) -> subprocess.Popen:  # type: ignore[no-untyped-def,type-arg]
    """The load: --ingest-seconds, or (with stop_file) until that file appears."""
    extra = ["--stop-file", str(stop_file)] if stop_file else []
    seconds = 3600 if stop_file else args.ingest_seconds
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--db",
            args.db,
            "--ingest-child",
            str(project_id),
            "--ingest-seconds",
            str(seconds),
            *extra,
        ],
        cwd=ROOT,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        text=True,
    )


def finish_ingest(child) -> list[tuple[float, float]]:  # type: ignore[no-untyped-def]
    """(wall-clock start, latency in ms) of each append the child made."""
    out, _ = child.communicate(timeout=900)
    return [(at, ms) for at, ms in json.loads(out.strip().splitlines()[-1])]


def run_ingest(args, project_id: int) -> list[float]:  # type: ignore[no-untyped-def]
    return [ms for _, ms in finish_ingest(start_ingest(args, project_id))]


def ingest_child(args) -> None:  # type: ignore[no-untyped-def]
    """Append one event at a time for --ingest-seconds; print [wall-clock start, latency in
    ms] of each as JSON (the parent splits them by the phase they fell in)."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from core.actors import Actor
    from core.models import Project
    from sessions_app.services.events import EventDraft, append_events
    from sessions_app.services.sessions import open_session

    project = Project.objects.get(pk=args.ingest_child)
    actor = Actor.system("bench")
    session, _ = open_session(project, agent_name="ingest", actor=actor)
    latencies: list[tuple[float, float]] = []
    end = time.perf_counter() + args.ingest_seconds
    stop = Path(args.stop_file) if args.stop_file else None
    i = 0
    while time.perf_counter() < end and not (stop is not None and i % 20 == 0 and stop.exists()):
        i += 1
        draft = EventDraft(kind="message", role="user", content={"text": f"live {i}"})
        at = time.time()
        start = time.perf_counter()
        append_events(session, [draft], actor=actor)
        latencies.append((at, (time.perf_counter() - start) * 1000))
    print(json.dumps(latencies))


if __name__ == "__main__":
    main()
