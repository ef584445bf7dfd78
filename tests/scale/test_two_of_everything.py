"""Two of everything on one PostgreSQL and one Redis (issue 27 §3), with a kill -9 of each kind.

Two web servers, each README's production split (granian's WSGI server for the API and pages,
uvicorn for the websockets), two Celery workers and one beat (the settings' schedule, its
intervals cut to a second), one Redis of this test's own (broker, channel layer and cache of
every process) and the test database. 32 agents, asyncio tasks in four processes
(tests/scale/fleet.py), two to a session, append keyed batches through both servers' WSGI ports,
sending a batch that gets no answer or a 5xx to the other server, as a load balancer would.

Meanwhile the SLA job marks handoffs overdue and the retention job closes idle sessions, both
falling due a few at a time over the run, and the webhook job posts `handoff.overdue` and
`session.closed` to a loopback receiver. Mid-load, server B (both of its processes) and worker 2
are SIGKILLed, once each worker has done some of each job.

Checked from the database and the receiver: every acknowledged event is stored exactly once,
every session's seqs are 1..head; every session due closed once (one lifecycle record), every
handoff due marked overdue once (one record), one webhook delivery per event, each processed
once by the receiver, all delivered; a page on server A saw an append made through server B
and a closure made by a worker. The counts are printed.
"""

import ast
import json
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import httpx
import psutil
import pytest
from django.utils import timezone

from core.actors import Actor
from core.models import DeliveryStatus, Role, WebhookDelivery
from core.services.webhooks import create_endpoint
from handoffs_app.models import Handoff
from retention_app.services.policies import save_policy
from sessions_app.models import Event, Session
from tests.factories import make_api_key, make_member, make_project, make_session
from tests.handoffs.helpers import ask
from tests.private_redis import private_redis
from tests.realtime.test_cross_process import receive_until, signed_in_cookie
from tests.realtime.test_retention_live import socket
from tests.servers import (
    ROOT,
    asgi_server_process,
    celery_processes,
    wait_until,
    wsgi_server_process,
)
from tests.webhooks.receiver import receiver

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.requires_redis("scale-out: Celery, channel layer and cache across processes"),
]

AGENTS = 32
AGENT_PROCESSES = 4
BATCH = 4
PAUSE = 0.05  # an agent's think time between batches
IDLE_AFTER = 3600  # the retention policy's close_idle_after (seconds)
DUE_SESSIONS = 40  # sessions the retention job closes, one falling due every STAGGER s
DUE_HANDOFFS = 40  # handoffs the SLA job marks overdue, likewise
STAGGER = 0.25
FIRST_DUE = 3.0  # seconds after set-up
LOAD_AFTER_KILL = 3.0  # seconds the agents go on writing after the kills
DEADLINE = 90.0  # the agents give up (reporting what was never acknowledged) after this

JOBS = {
    # job: (Celery task, the key of its result that counts work done)
    "retention": ("retention_app.enforce_retention", "examined"),
    "SLA": ("handoffs_app.enforce_sla", "overdue"),
    "webhooks": ("core.deliver_webhooks", "succeeded"),
}
SUCCEEDED = re.compile(r"Task (\S+)\[[0-9a-f-]+\] succeeded in [0-9.]+s: (\{.*\})")


def work_done(log: Path) -> Counter[str]:
    """What a worker's jobs did, by JOBS name, from the results its log prints."""
    done: Counter[str] = Counter()
    for task, result in SUCCEEDED.findall(log.read_text()):
        for job, (name, key) in JOBS.items():
            if task == name:
                done[job] += ast.literal_eval(result).get(key, 0)
    return done


def kill_server(*processes: subprocess.Popen) -> None:
    """kill -9 of each process and every process under it (granian's worker)."""
    tree = []
    for process in processes:
        parent = psutil.Process(process.pid)
        tree += [parent, *parent.children(recursive=True)]
    for member in tree:
        member.send_signal(signal.SIGKILL)
    for member in tree:
        member.wait(10)


def worker_process(node: str) -> psutil.Process:
    (worker,) = [
        p
        for p in psutil.Process().children(recursive=True)
        if f"{node}@%h" in p.cmdline() and "worker" in p.cmdline()
    ]
    return worker


def append_through(base: str, key: str, session: Session, text: str) -> int:
    response = httpx.post(
        f"{base}/api/v1/sessions/{session.pk}/events",
        json={"events": [{"kind": "message", "role": "assistant", "content": {"text": text}}]},
        headers={"Authorization": f"Bearer {key}"},
        timeout=10,
    )
    assert response.status_code == 201, response.text
    return response.json()["events"][0]["seq"]


def start_fleet(servers: list[str], key: str, sessions: list[Session], stop_file: Path):
    deadline = time.monotonic() + DEADLINE
    processes = []
    for p in range(AGENT_PROCESSES):
        config = {
            "servers": servers,
            "key": key,
            # Two agents to a session, in different processes.
            "sessions": {n: str(sessions[n // 2].pk) for n in range(p, AGENTS, AGENT_PROCESSES)},
            "batch": BATCH,
            "pause": PAUSE,
            "stop_file": str(stop_file),
            "deadline": deadline,
        }
        processes.append(
            subprocess.Popen(
                [sys.executable, str(ROOT / "tests/scale/fleet.py"), json.dumps(config)],
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    return processes


def stop_fleet(processes, stop_file: Path) -> None:
    """The agents told to stop, and killed if they have not within 15 s (a failed test)."""
    stop_file.touch()
    for process in processes:
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def fleet_results(processes) -> tuple[list[str], list[str], Counter[str]]:
    acked: list[str] = []
    unacked: list[str] = []
    statuses: Counter[str] = Counter()
    for process in processes:
        out, _ = process.communicate(timeout=DEADLINE + 30)
        assert process.returncode == 0, out
        result = json.loads(out.strip().splitlines()[-1])
        acked += result["acked"]
        unacked += result["unacked"]
        statuses.update(result["statuses"])
    return acked, unacked, statuses


def records(sessions, kind: str, field: str, value: str) -> Counter:
    """Per session, its `kind` events whose content[field] is value."""
    rows = Event.objects.filter(
        session__in=sessions, kind=kind, **{f"content__{field}": value}
    ).values_list("session_id", flat=True)
    return Counter(rows)


def test_two_servers_two_workers_and_a_kill_of_each_lose_and_repeat_nothing(tmp_path):
    project = make_project("fleet")
    _, key = make_api_key(project)
    viewer = make_member(project, Role.VIEWER, username="watcher")
    actor = Actor.system("tests")
    save_policy(
        project,
        {
            "close_idle_after": IDLE_AFTER,
            "close_paused_after": None,
            "archive_closed_after": None,
            "compact_after": None,
            "delete_after": None,
            "outcome_compact_after": None,
            "outcome_delete_after": None,
            "keep_outcomes": [],
            "keep_tags": [],
        },
        actor=actor,
    )
    fleet = [make_session(project, agent="fleet") for _ in range(AGENTS // 2)]
    idle = [make_session(project, agent="idle") for _ in range(DUE_SESSIONS)]
    handoffs = [
        ask(make_session(project, agent="asking"), kind="question") for _ in range(DUE_HANDOFFS)
    ]

    env = {
        "SWITCHBOARD_HANDOFF_SLA_SECONDS": "1",
        "SWITCHBOARD_RETENTION_SECONDS": "1",
        "SWITCHBOARD_WEBHOOK_POLL_SECONDS": "1",
        "SWITCHBOARD_WEBHOOK_TIMEOUT": "1",
        "SWITCHBOARD_WEBHOOK_LEASE_SECONDS": "4",
        "SWITCHBOARD_WEBHOOK_QUEUE": "celery",
        "SWITCHBOARD_RETENTION_QUEUE": "celery",
    }
    with ExitStack() as stack:
        recv = stack.enter_context(receiver())
        create_endpoint(
            project, url=recv.url, events=["session.closed", "handoff.overdue"], actor=actor
        )
        redis = stack.enter_context(private_redis(tmp_path))
        env["REDIS_URL"] = redis.url
        for node in ("w1", "w2"):
            (tmp_path / node).mkdir()
        log_1 = stack.enter_context(
            celery_processes("celery", tmp_path / "w1", node="w1", beat=True, **env)
        )
        log_2 = stack.enter_context(celery_processes("celery", tmp_path / "w2", node="w2", **env))
        wsgi_a, _ = stack.enter_context(wsgi_server_process(**env))
        wsgi_b, wsgi_b_process = stack.enter_context(wsgi_server_process(**env))
        asgi_a, _ = stack.enter_context(asgi_server_process(**env))
        _, asgi_b_process = stack.enter_context(asgi_server_process(**env))

        # Due a few at a time from FIRST_DUE seconds on, so successive runs share the work.
        now = timezone.now()
        for i, session in enumerate(idle):
            due = now + timedelta(seconds=FIRST_DUE + i * STAGGER)
            Session.objects.filter(pk=session.pk).update(
                updated_at=due - timedelta(seconds=IDLE_AFTER)
            )
        for i, handoff in enumerate(handoffs):
            due = now + timedelta(seconds=FIRST_DUE + i * STAGGER)
            Handoff.objects.filter(pk=handoff.pk).update(due_at=due)

        cookie = signed_in_cookie(wsgi_a, viewer.username)
        page = stack.enter_context(socket(asgi_a, f"/ws/sessions/{fleet[0].pk}/?rows=1", cookie))
        closing = stack.enter_context(socket(asgi_a, f"/ws/sessions/{idle[0].pk}/?rows=1", cookie))
        # A page on server A sees an append made through server B ...
        seq = append_through(wsgi_b, key, fleet[0], "written through server B")
        receive_until(page, f'id="event-{seq}"', timeout=10)

        stop_file = tmp_path / "stop"
        agents = start_fleet([wsgi_a, wsgi_b], key, fleet, stop_file)
        stack.callback(stop_fleet, agents, stop_file)
        # ... and a session closed by a worker's retention run.
        frame = receive_until(closing, 'id="timeline"', timeout=15)
        assert 'class="status status-closed"' in frame and "idle" in frame

        def fleet_events() -> int:
            return Event.objects.filter(session__in=fleet, idempotency_key__isnull=False).count()

        # Mid-load, once each worker has done some of each job.
        wait_until(
            lambda: (
                all(work_done(log)[job] > 0 for log in (log_1, log_2) for job in JOBS)
                and fleet_events() >= 500
            ),
            log_2,
            timeout=60,
        )
        before_kill = {"w1": work_done(log_1), "w2": work_done(log_2)}
        events_at_kill = fleet_events()
        kill_server(wsgi_b_process, asgi_b_process)
        worker = worker_process("w2")
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
        time.sleep(LOAD_AFTER_KILL)
        stop_file.touch()
        acked, unacked, statuses = fleet_results(agents)

        # Every job finishes, on the worker left.
        def finished() -> bool:
            deliveries = WebhookDelivery.objects.filter(project=project)
            return (
                Session.objects.filter(pk__in=[s.pk for s in idle], status="closed").count()
                == DUE_SESSIONS
                and Handoff.objects.filter(pk__in=[h.pk for h in handoffs], overdue=True).count()
                == DUE_HANDOFFS
                and deliveries.count() >= DUE_SESSIONS + DUE_HANDOFFS
                and not deliveries.exclude(status=DeliveryStatus.SUCCEEDED).exists()
            )

        wait_until(finished, log_1, timeout=45)
        after = {"w1": work_done(log_1), "w2": work_done(log_2)}

    # Events: each acknowledged one stored once; seqs 1..head in every session.
    stored = Counter(
        Event.objects.filter(session__in=fleet, idempotency_key__isnull=False).values_list(
            "idempotency_key", flat=True
        )
    )
    lost = [k for k in acked if k not in stored]
    duplicated = [k for k, n in stored.items() if n > 1]
    gaps = 0
    for session in fleet:
        session.refresh_from_db()
        seqs = list(
            Event.objects.filter(session=session).order_by("seq").values_list("seq", flat=True)
        )
        gaps += len(set(range(1, session.head_seq + 1)) - set(seqs)) + (len(seqs) - len(set(seqs)))
    # Jobs: each done once.
    closures = records(idle, "lifecycle", "to", "closed")
    overdue = records([h.session for h in handoffs], "handoff", "step", "overdue")
    deliveries = list(WebhookDelivery.objects.filter(project=project))
    per_event = Counter(
        (d.event, d.payload.get("handoff_id") or d.payload.get("session_id")) for d in deliveries
    )
    sent = Counter(r.headers["switchboard-delivery"] for r in recv.requests)

    print(
        f"\nagents {AGENTS} in {AGENT_PROCESSES} processes: events acknowledged {len(acked)} "
        f"({events_at_kill} stored at the kill), never acknowledged {len(unacked)}, "
        f"stored {sum(stored.values())}, lost {len(lost)}, duplicated {len(duplicated)}, "
        f"seq gaps {gaps}; answers {dict(sorted(statuses.items()))}"
        f"\njobs: sessions closed {len(closures)}/{DUE_SESSIONS} (records per session "
        f"{sorted(set(closures.values()))}), handoffs overdue {len(overdue)}/{DUE_HANDOFFS} "
        f"(records per handoff {sorted(set(overdue.values()))}), webhook deliveries "
        f"{len(deliveries)} for {len(per_event)} events, processed by the receiver "
        f"{len(recv.processed)}, POSTs {len(recv.requests)} (sent again after the kill: "
        f"{sum(n - 1 for n in sent.values())})"
        f"\nwork by worker before the kill {before_kill}; at the end {after}"
    )
    assert unacked == [], f"not acknowledged within {DEADLINE} s: {len(unacked)}"
    assert lost == [] and duplicated == [] and gaps == 0
    # Load through both servers before the kill, and on through A after it.
    assert any(wsgi_b in s for s in statuses) and any(s.endswith(" error") for s in statuses)
    assert len(acked) > events_at_kill
    assert closures == Counter({s.pk: 1 for s in idle})
    assert overdue == Counter({h.session_id: 1 for h in handoffs})
    assert len(deliveries) == len(per_event) == DUE_SESSIONS + DUE_HANDOFFS
    assert set(recv.processed) == {str(d.pk) for d in deliveries}
