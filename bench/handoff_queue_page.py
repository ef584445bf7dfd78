#!/usr/bin/env python
"""The handoff queue page at 10,000 open handoffs, over HTTP, against a real ASGI server.

    .venv/bin/python bench/handoff_queue_page.py                 # 10,000 open handoffs, ~1-2 min
    .venv/bin/python bench/handoff_queue_page.py --open 10000 --rounds 5 --per-round 20

1. Drops and recreates a scratch database (default `switchboard_bench_handoffq_page`) on the local
   PostgreSQL (127.0.0.1:5432, user postgres) and migrates it.
2. Loads with bulk inserts: --open paused sessions, each with one active handoff (kinds,
   priorities and waits spread; 15 % claimed by one of 20 operators, 10 % overdue, a few
   taken over or answered) and --resolved older, resolved handoffs on other sessions (the
   queue must not walk them), plus the member signing in.
3. Starts uvicorn (1 worker, DEBUG=false, Redis channel layer; bench/dashboard.py's server
   with its Server-Timing wrapper) and signs in with httpx.
4. Interleaved rounds over: the queue (first page; kind, overdue, mine and unclaimed filters;
   the second page by cursor; the htmx fragment a filter change fetches) and, as baselines
   from the same run, the sessions list and the overview of the same project (both also
   count handoffs for the navigation).
5. Prints p50 / p95 / max per page, client wall time and server time, and the ratio of the
   queue's p95 to the sessions list's. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import sys
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for path in (str(BENCH), str(ROOT)):
    if path not in sys.path:
        sys.path.insert(0, path)

import _common as common  # noqa: E402
import dashboard as dash  # noqa: E402  (server, sampler, sign-in)
import ingest as ib  # noqa: E402

DEFAULT_DB = ib.scratch_name("switchboard_bench_handoffq_page")
KINDS = ["approval", "approval", "question", "question", "takeover", "budget"]
REASONS = [
    "Approve a refund over $500?",
    "Which address should the replacement go to?",
    "The customer asks for a human.",
    "Budget exceeded: approve more tokens?",
    "May I cite an unpublished source?",
    "Force-push to main to undo a bad merge?",
]


def load(open_count: int, resolved: int, seed: int) -> dict[str, str]:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from core.models import Membership, Project, Role
    from handoffs_app.models import Handoff
    from sessions_app.models import Agent, Session

    rng = random.Random(seed)
    now = timezone.now()
    # The loader sets the times itself (waits spread over days).
    for model in (Session, Handoff):
        model._meta.get_field("created_at").auto_now_add = False
        model._meta.get_field("updated_at").auto_now = False
    project = Project.objects.create(name="bench-handoffs")
    User = get_user_model()
    me = User.objects.create_user(dash.USERNAME, password=dash.PASSWORD)
    Membership.objects.create(project=project, user=me, role=Role.OPERATOR)
    operators = [me] + [User.objects.create_user(f"op-{i:02d}") for i in range(19)]
    Membership.objects.bulk_create(
        Membership(project=project, user=u, role=Role.OPERATOR) for u in operators[1:]
    )
    agents = [Agent.objects.create(project=project, name=f"agent-{i}") for i in range(12)]
    sessions = []
    for i in range(open_count + resolved):
        created = now - dt.timedelta(minutes=rng.randint(1, 60 * 24 * 5))
        sessions.append(
            Session(
                id=uuid.UUID(int=rng.getrandbits(128), version=4),
                project=project,
                agent=rng.choice(agents),
                title=f"{rng.choice(REASONS)[:30]} #{i}",
                status="paused" if i < open_count else "resumed",
                metadata={},
                created_at=created,
                updated_at=created,
            )
        )
    Session.objects.bulk_create(sessions, batch_size=2000)
    handoffs = []
    for i, session in enumerate(sessions):
        created = session.created_at + dt.timedelta(seconds=30)
        kind = rng.choice(KINDS)
        due = created + dt.timedelta(minutes=rng.choice([15, 30, 60]))
        status, holder, lease = "open", None, None
        if i < open_count:
            roll = rng.random()
            if roll < 0.15:
                status = "claimed"
            elif roll < 0.17:
                status = "taken_over"
            elif roll < 0.19:
                status = "answered"
            if status != "open":
                holder = rng.choice(operators)
                lease = now + dt.timedelta(minutes=10)
        else:
            status = rng.choice(["handed_back", "closed", "cancelled", "expired"])
        handoffs.append(
            Handoff(
                project=project,
                session=session,
                kind=kind,
                status=status,
                reason=rng.choice(REASONS),
                payload={"question": "?"} if kind == "question" else {},
                priority=rng.choices([0, 1, 2, 3], [2, 6, 2, 1])[0],
                due_at=due,
                overdue=due < now and rng.random() < 0.1,
                expires_at=due + dt.timedelta(days=1),
                requested_by="bench",
                lease_holder=holder,
                lease_expires_at=lease,
                created_at=created,
                updated_at=created,
            )
        )
    Handoff.objects.bulk_create(handoffs, batch_size=2000)
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    return {"project_id": str(project.pk)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--open", type=int, default=10_000, help="active handoffs")
    parser.add_argument("--resolved", type=int, default=5_000, help="resolved handoffs")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=20)
    parser.add_argument("--db", default=DEFAULT_DB)
    parser.add_argument("--seed", type=int, default=11)
    ib.add_smoke_flag(parser)
    args = parser.parse_args()
    ib.smoke(args, open=100, resolved=50, rounds=1, per_round=2)

    import httpx

    env = dash.dash_env(args.db)
    os.environ.update(env)
    ib.scratch_database(args.db, env)
    # DEBUG=false serves static files from collectstatic's manifest (as scripts/run does).
    common.collect_static(env)
    started = dt.datetime.now()
    info = load(args.open, args.resolved, args.seed)
    print(
        f"loaded {args.open} active + {args.resolved} resolved handoffs in "
        f"{(dt.datetime.now() - started).total_seconds():.1f} s"
    )
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    port = ib.free_port()
    server = dash.Server(args.db, port, 1)
    try:
        server.wait_ready()
        pid = info["project_id"]
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            dash.sign_in(client)
            sampler = dash.Sampler(client)
            queue = f"/p/{pid}/handoffs/"
            first = sampler.get("warm", queue, record=False)
            second = "?" + dash.next_page_query(first.text)
            htmx = {"HX-Request": "true", "HX-Target": "queue-results"}
            cases = [
                ("queue: first page", queue, None),
                ("queue: kind=approval", f"{queue}?kind=approval", None),
                ("queue: overdue", f"{queue}?overdue=on", None),
                ("queue: mine", f"{queue}?mine=on", None),
                ("queue: unclaimed", f"{queue}?unclaimed=on", None),
                ("queue: page 2 (cursor)", f"{queue}{second}", None),
                ("queue: htmx fragment", f"{queue}?kind=question&status=open", htmx),
                ("baseline: sessions list", f"/p/{pid}/sessions/", None),
                ("baseline: overview", f"/p/{pid}/", None),
            ]
            for name, url, headers in cases:  # warm every path once
                sampler.get(name, url, headers=headers, record=False)
            for _ in range(args.rounds):
                for name, url, headers in cases:
                    for _ in range(args.per_round):
                        sampler.get(name, url, headers=headers)
        print(
            f"\nserver: {server.label}; {args.open} active handoffs "
            f"({args.rounds} rounds x {args.per_round} requests per page, interleaved)"
        )
        print(
            f"{'page':<28} {'client p50':>10} {'p95':>8} {'max':>8}   "
            f"{'server p50':>10} {'p95':>8}  bytes"
        )
        results = {}
        for name, _, _ in cases:
            s = sampler.summary(name)
            results[name] = s
            c, v = s["client"], s["server"]
            print(
                f"{name:<28} {c['p50']:>8.1f}ms {c['p95']:>6.1f}ms {c['max']:>6.1f}ms"
                f"   {v['p50']:>8.1f}ms {v['p95']:>6.1f}ms  {s['bytes']}"
            )
        queue, base = (
            results["queue: first page"]["client"],
            results["baseline: sessions list"]["client"],
        )
        print(
            f"\nqueue first page p50 {queue['p50']:.1f} ms, p95 {queue['p95']:.1f} ms; "
            f"sessions list p50 {base['p50']:.1f} ms, p95 {base['p95']:.1f} ms; "
            f"ratio p50 {queue['p50'] / base['p50']:.2f}, p95 {queue['p95'] / base['p95']:.2f}"
        )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
