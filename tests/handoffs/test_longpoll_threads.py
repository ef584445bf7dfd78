"""Waiting long-polls hold no thread, and a long-poll whose agent goes away stops waiting, on a
real uvicorn process (config.asgi: the dispatcher's config.longpoll). Its answers and errors
come from the ninja endpoint, in the one shape, with the request id and rate-limit headers."""

import asyncio
import threading
import time

import httpx
import psutil
import pytest

from core.models import KeyScope
from handoffs_app.services import handoffs as svc
from tests.factories import make_api_key, make_project, make_session
from tests.servers import asgi_server_process

from . import readiness
from .helpers import ask, operator
from .readiness import eventually, group_members, warm_up

pytestmark = [pytest.mark.slow, pytest.mark.requires_redis("the long-poll's channel layer")]

WAITERS = 120
TOKEN = "metrics-token-for-the-long-poll-test"


def metric(base: str, name: str) -> float:
    return readiness.metric(base, name, TOKEN)


def test_waiting_long_polls_hold_no_thread_and_end_when_the_agent_leaves(transactional_db, project):
    _, raw_key = make_api_key(project)
    headers = {"Authorization": f"Bearer {raw_key}"}
    handoffs = [ask(make_session(project)) for _ in range(WAITERS)]
    ids = [h.pk for h in handoffs]
    stop = threading.Event()
    outcome: dict[str, object] = {}

    def waiters(base):
        async def main():
            limits = httpx.Limits(max_connections=WAITERS + 5)
            async with httpx.AsyncClient(
                base_url=base, headers=headers, timeout=60, limits=limits
            ) as client:
                tasks = [
                    asyncio.create_task(client.get(f"/api/v1/handoffs/{pk}", params={"wait": 50}))
                    for pk in ids
                ]
                while not stop.is_set():
                    await asyncio.sleep(0.05)
                outcome["answered_early"] = sum(t.done() for t in tasks)
                for task in tasks:
                    task.cancel()  # closes each connection: the server sees http.disconnect
                await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run(main())

    with asgi_server_process(SWITCHBOARD_METRICS_TOKEN=TOKEN) as (base, process):
        server = psutil.Process(process.pid)
        warm_up(base, headers, ids[0])
        before = server.num_threads()
        thread = threading.Thread(target=waiters, args=(base,))
        thread.start()
        try:
            name = "switchboard_handoff_longpolls_waiting"
            eventually(lambda: metric(base, name) == WAITERS, timeout=30)
            during = server.num_threads()
            # Each waits in its handoff's group (joined just after the wait is counted).
            eventually(lambda: group_members(ids) == WAITERS, timeout=10)
        finally:
            stop.set()
            thread.join(timeout=60)
        gone = eventually(lambda: metric(base, name) == 0, timeout=5)
        eventually(lambda: group_members(ids) == 0, timeout=5)
        ended = metric(base, 'switchboard_handoff_longpolls_ended_total{how="disconnected"}')
        after = server.num_threads()
    print(
        f"\nserver threads: before {before}, with {WAITERS} long-polls waiting {during}, "
        f"after they left {after}; waits ended {gone:.2f} s after the agents left"
    )
    assert outcome["answered_early"] == 0
    # The loop's default executor (at most cpu+4 threads) may add one or two; one per waiting
    # request (the old behaviour) would add 120.
    assert during - before <= 8, (before, during)
    assert ended == WAITERS


def test_answers_and_errors_come_from_the_endpoint_in_the_one_shape(transactional_db, project):
    _, raw_key = make_api_key(project)
    other_key = make_api_key(make_project(), scope=KeyScope.AGENT)[1]
    handoff = ask(make_session(project))
    user = operator(project)
    svc.claim_handoff(handoff, user=user)
    url = f"/api/v1/handoffs/{handoff.pk}"

    def error(response, status, code):
        assert response.status_code == status, response.text
        assert response.headers["Content-Type"] == "application/json"
        body = response.json()
        assert set(body) == {"error"} and body["error"]["code"] == code, body
        assert set(body["error"]) == {"code", "message", "detail"}
        return body["error"]

    with asgi_server_process() as (base, _), httpx.Client(base_url=base, timeout=30) as client:
        mine = {"Authorization": f"Bearer {raw_key}", "X-Request-ID": "req-longpoll-1"}
        started = time.monotonic()
        error(
            client.get(url, params={"wait": 5}, headers={"Authorization": "Bearer nope"}),
            401,
            "unauthorized",
        )
        error(client.get(url, params={"wait": 5}), 401, "unauthorized")
        error(
            client.get(url, params={"wait": 5}, headers={"Authorization": f"Bearer {other_key}"}),
            404,
            "not_found",
        )
        detail = error(client.get(url, params={"wait": 61}, headers=mine), 422, "invalid_input")
        assert detail["detail"][0]["loc"][-1] == "wait"
        error(client.get(url, params={"wait": "soon"}, headers=mine), 422, "invalid_input")
        error(client.get(url, params={"wait": -1}, headers=mine), 422, "invalid_input")
        error(
            client.get("/api/v1/handoffs/not-a-uuid", params={"wait": 5}, headers=mine),
            422,
            "invalid_input",
        )
        assert time.monotonic() - started < 3  # none of them waited

        # A wait that ends: the endpoint's answer, with its headers, and the wait's time counted.
        def answer_soon():
            time.sleep(0.5)
            svc.accept(type(handoff).objects.get(pk=handoff.pk), user=user)

        answering = threading.Thread(target=answer_soon)
        answering.start()
        response = client.get(url, params={"wait": 20}, headers=mine)
        answering.join()
        assert response.status_code == 200 and response.json()["status"] == "answered"
        assert response.json()["id"] == str(handoff.pk)
        assert response.headers["X-Request-ID"] == "req-longpoll-1"
        assert "RateLimit-Remaining" in response.headers
        assert response.headers.get("X-Content-Type-Options") == "nosniff"
        plain = client.get(url, headers=mine)
        assert plain.json() == response.json()


def test_a_key_over_its_rate_limit_is_refused_at_once_and_counted_once(transactional_db, project):
    _, raw_key = make_api_key(project)
    headers = {"Authorization": f"Bearer {raw_key}"}
    handoff = ask(make_session(project))
    url = f"/api/v1/handoffs/{handoff.pk}"
    with (
        asgi_server_process(SWITCHBOARD_API_RATE_PER_MINUTE="3") as (base, _),
        httpx.Client(base_url=base, headers=headers, timeout=30) as client,
    ):
        if time.time() % 60 > 50:  # the counts' window is the clock minute: start a fresh one
            time.sleep(61 - time.time() % 60)
        # A wait that times out is one request of the key's three, counted when it answers.
        waited = client.get(url, params={"wait": 1})
        assert waited.status_code == 200 and waited.headers["RateLimit-Remaining"] == "2"
        assert client.get(url).headers["RateLimit-Remaining"] == "1"
        assert client.get(url).headers["RateLimit-Remaining"] == "0"
        started = time.monotonic()
        refused = client.get(url, params={"wait": 20})
        assert time.monotonic() - started < 3  # refused without waiting
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
        assert "Retry-After" in refused.headers
