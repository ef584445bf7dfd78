"""The agent's long-poll against a real ASGI server (uvicorn): the answer's notice wakes it (its
latency after the commit printed; bench/handoff_longpoll.py measures it), and a wait with
nothing happening returns after S seconds."""

import statistics
import threading
import time

import httpx
import pytest
from django.db import transaction

from handoffs_app.services import handoffs as svc
from handoffs_app.waiting import RECHECK_SECONDS
from tests.factories import make_api_key, make_session
from tests.servers import asgi_server

from .helpers import ask, operator
from .readiness import eventually, group_members

pytestmark = [pytest.mark.slow, pytest.mark.requires_redis("the long-poll's wake-up")]

ROUNDS = 30


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def test_the_long_poll_wakes_on_the_answers_notice(transactional_db, project):
    _, raw_key = make_api_key(project)
    headers = {"Authorization": f"Bearer {raw_key}"}
    user = operator(project)
    latencies = []
    relayed = []  # commit -> the outbox relay has sent the wake-up (in this process)
    with asgi_server() as base, httpx.Client(base_url=base, headers=headers, timeout=40) as client:
        # One idle wait first: a wait with no outcome answers after S seconds, current status.
        handoff = ask(make_session(project))
        started = time.monotonic()
        idle = client.get(f"/api/v1/handoffs/{handoff.pk}", params={"wait": 1})
        assert idle.status_code == 200 and idle.json()["status"] == "open"
        assert 0.95 <= time.monotonic() - started < RECHECK_SECONDS  # its second, not more
        for _ in range(ROUNDS):
            handoff = ask(make_session(project))
            svc.claim_handoff(handoff, user=user)
            got = {}

            def poll(handoff_id=handoff.pk, got=got):
                response = client.get(f"/api/v1/handoffs/{handoff_id}", params={"wait": 30})
                got["at"] = time.monotonic()
                got["response"] = response

            poller = threading.Thread(target=poll)
            poller.start()
            # The poll is waiting: in the handoff's group, where the answer's notice will go.
            eventually(
                lambda handoff_id=handoff.pk: group_members([handoff_id]) == 1,
                timeout=10,
                what="the poll waiting",
            )
            committed = []
            with transaction.atomic():
                # Registered first, so it runs first once the COMMIT has returned.
                transaction.on_commit(
                    lambda committed=committed: committed.append(time.monotonic())
                )
                svc.accept(handoff, user=user)
            relayed.append((time.monotonic() - committed[0]) * 1000)
            poller.join(timeout=35)
            assert got["response"].json()["status"] == "answered"
            latencies.append((got["at"] - committed[0]) * 1000)
    p50, p95 = statistics.median(latencies), percentile(latencies, 0.95)
    print(
        f"\nlong-poll wake after commit, {ROUNDS} rounds: p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
        f"max {max(latencies):.1f} ms; of which the outbox relay's send after the commit: "
        f"p50 {statistics.median(relayed):.1f} ms, p95 {percentile(relayed, 0.95):.1f} ms"
    )
    # Woken by the answer's notice, not found by the wait's own look at the row, which comes
    # only every RECHECK_SECONDS (10 s) or at the end of the 30 s: every round answered long
    # before the first recheck. How fast (the 100 ms target) is bench/handoff_longpoll.py's
    # figure, measured on a quiet machine, not a bound a loaded test run could hold.
    assert max(latencies) < RECHECK_SECONDS * 1000 / 2, latencies
