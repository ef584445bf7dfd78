"""Waiting long-polls hold no database connection: with a pool of 3 connections, 30 agents
waiting on one server process leave appends and reads answering at once (were a waiting
request to keep its connection, the pool would be empty and they would fail after the pool's
timeout)."""

import asyncio
import threading
import time

import httpx
import pytest

from tests.factories import make_api_key, make_session
from tests.servers import asgi_server

from .helpers import ask
from .readiness import eventually, group_members

pytestmark = [pytest.mark.slow, pytest.mark.requires_redis("the long-poll's channel layer")]

WAITERS = 30


def test_waiting_long_polls_leave_the_pool_to_others(transactional_db, project):
    _, raw_key = make_api_key(project)
    headers = {"Authorization": f"Bearer {raw_key}"}
    handoffs = [ask(make_session(project)) for _ in range(WAITERS)]
    ids = [h.pk for h in handoffs]
    target = make_session(project)
    done = []

    def waiters(base):
        async def main():
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
                responses = await asyncio.gather(
                    *(client.get(f"/api/v1/handoffs/{h.pk}", params={"wait": 8}) for h in handoffs)
                )
            done.extend(r.status_code for r in responses)

        asyncio.run(main())

    with asgi_server(DB_POOL_MIN="1", DB_POOL_MAX="3", DB_POOL_TIMEOUT="3") as base:
        thread = threading.Thread(target=waiters, args=(base,))
        started = time.monotonic()
        thread.start()
        # Every long-poll is waiting: its handoff checked, its connection given back, its group
        # joined (after reading the handoff and the key, just before it reads the row again).
        eventually(
            lambda: group_members(ids) == WAITERS, timeout=30, what="every long-poll waiting"
        )
        with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
            timings = []
            for n in range(10):
                began = time.monotonic()
                response = client.post(
                    f"/api/v1/sessions/{target.pk}/events",
                    json={"events": [{"kind": "note", "content": {"n": n}}]},
                )
                timings.append(time.monotonic() - began)
                assert response.status_code == 201, response.text
            read = client.get(f"/api/v1/handoffs/{handoffs[0].pk}")
            assert read.status_code == 200 and read.json()["status"] == "open"
        assert not done, "the long-polls returned before their wait was over"
        thread.join(timeout=30)
    assert done == [200] * WAITERS
    assert time.monotonic() - started >= 8
    assert max(timings) < 2, timings  # never waited out the pool's 3 s timeout
