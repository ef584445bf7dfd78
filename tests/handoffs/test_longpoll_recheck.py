"""A waiting long-poll keeps one receive on its channel across its periodic re-reads. On the
Redis pub/sub layer a receive cancelled by a timeout gives up its channel's subscription, so a
notice published before the next receive subscribed again would be missed; one receive for the
whole wait leaves no such gap. Real Redis channel layer, in process."""

import asyncio

import pytest
from channels.layers import get_channel_layer

from handoffs_app import waiting
from handoffs_app.domain_events import handoff_group

pytestmark = pytest.mark.requires_redis("the long-poll's wake-up")


def test_one_receive_spans_the_rechecks_of_a_wait(monkeypatch):
    monkeypatch.setattr(waiting, "RECHECK_SECONDS", 0.1)
    layer = get_channel_layer()
    receives = []
    real_receive = layer.receive

    async def counted_receive(channel):
        receives.append(channel)
        return await real_receive(channel)

    monkeypatch.setattr(layer, "receive", counted_receive, raising=False)
    reads = []
    resolved = asyncio.Event()

    async def read():
        reads.append(resolved.is_set())
        return {"status": "answered" if resolved.is_set() else "open"}, resolved.is_set()

    async def main() -> dict:
        group = handoff_group("00000000-0000-0000-0000-000000000042")
        waiter = asyncio.create_task(waiting.wait_for_resolution(group[8:], timeout=30, read=read))
        await asyncio.sleep(0.55)  # five rechecks, each a re-read
        resolved.set()
        await layer.group_send(group, {"type": "handoff.changed"})
        return await asyncio.wait_for(waiter, timeout=5)

    body = asyncio.run(main())
    assert body == {"status": "answered"}
    assert len(receives) == 1  # one receive for the whole wait
    assert len(reads) >= 5  # the rechecks happened meanwhile
