"""AsyncClient against a live server: the same calls as the sync Client (generated from it),
awaited, with concurrent appends on one connection pool and the export read as it streams."""

import asyncio

import pytest
from switchboard_client import AsyncClient, Conflict, NotFound, RetryPolicy

from tests.handoffs.helpers import QUESTION


async def scenario(url: str, key: str) -> None:
    async with AsyncClient(url, key, retry=RetryPolicy(backoff=0.05)) as sb:
        assert (await sb.health()) == {"status": "ok"}
        session = await sb.open_session("async-agent", external_id="async-1")
        # Twenty single-event appends at once: each gets its own seq, no gap, no duplicate.
        results = await asyncio.gather(
            *(sb.append(session.id, [{"kind": "note", "content": {"n": n}}]) for n in range(20))
        )
        assert sorted(r.events[0].seq for r in results) == list(range(1, 21))
        assert (await sb.get_session(session.id)).head_seq == 20

        seen = [event.content["n"] async for event in sb.iter_events(session.id, page_size=7)]
        assert sorted(seen) == list(range(20))
        page = await sb.events(session.id, after_seq=18)
        assert [e.seq for e in page.events] == [19, 20] and not page.has_more
        await sb.append(session.id, [{"kind": "state", "content": {"done": True}}])
        assert (await sb.state(session.id)).state == {"done": True}

        async with sb.export(session.id) as export:
            assert export.session.head_seq == 21
            exported = [event.seq async for event in export]
        assert exported == list(range(1, 22))

        ids = [s.id async for s in sb.iter_sessions(limit=1)]
        assert ids == [session.id]
        handoff = await sb.request_handoff(session.id, "question", payload=QUESTION)
        with pytest.raises(Conflict):
            await sb.request_handoff(session.id, "question", payload=QUESTION)
        await sb.cancel_handoff(handoff.id)
        assert (await sb.wait_handoff(handoff.id, timeout=10)).status == "cancelled"
        fork = await sb.fork(session.id, 10)
        assert fork.lineage.fork_seq == 10 and fork.head_seq == 10
        closed = await sb.close_session(session.id, "done")
        assert closed.status == "closed"
        with pytest.raises(NotFound):
            await sb.get_task("00000000-0000-0000-0000-000000000000")


def test_the_async_client_against_a_live_server(server_url, api_key):
    asyncio.run(scenario(server_url, api_key))
