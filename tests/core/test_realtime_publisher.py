"""core.realtime's sends: the pub/sub layer is published to from the calling thread (one
pipeline for a message's groups), any other layer through one long-lived event loop of the
process; either way the layer's own subscribers hear every message, in the order sent."""

import asyncio
import threading
import uuid

import pytest
import redis
from asgiref.sync import async_to_sync
from channels_redis.core import RedisChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer
from django.conf import settings

from core import realtime

pytestmark = pytest.mark.requires_redis("the Redis channel layer")


def _send_from_plain_threads(groups: list[str], count: int) -> None:
    def send(i: int) -> None:
        assert realtime.send_to_groups(groups, {"type": "t", "n": i})

    for i in range(count):  # a fresh thread each time, as a WSGI server's pool may use
        thread = threading.Thread(target=send, args=(i,))
        thread.start()
        thread.join()


def test_the_pubsub_layer_is_published_to_from_the_thread_and_heard_through_the_layer(
    listen, monkeypatch
):
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    assert isinstance(layer, RedisPubSubChannelLayer)
    listener = listen("publish-test-a", "publish-test-b")
    # No event loop takes part: a send that went through one fails here.
    monkeypatch.setattr(realtime, "_submit", lambda *a: pytest.fail("sent through a loop"))
    _send_from_plain_threads(["publish-test-a", "publish-test-b"], 3)
    received = listener.receive_all()
    # Each message once per group the listener joined, the messages in the order sent: the
    # channel names, serializer and shard are the layer's own.
    assert sorted(m["n"] for m in received) == [0, 0, 1, 1, 2, 2]
    assert [m["n"] for m in received][::2] == [0, 1, 2]
    assert realtime._publisher(layer) is realtime._publisher(layer)  # built once per layer


def test_a_message_for_several_groups_is_one_round_trip(listen, monkeypatch):
    from channels.layers import get_channel_layer

    publisher = realtime._publisher(get_channel_layer())
    client = publisher.clients[0]
    executed: list[int] = []
    pipeline = client.pipeline

    def counting_pipeline(*args, **kwargs):
        pipe = pipeline(*args, **kwargs)
        execute = pipe.execute

        def counted():
            executed.append(len(pipe.command_stack))
            return execute()

        pipe.execute = counted
        return pipe

    monkeypatch.setattr(client, "pipeline", counting_pipeline)
    listener = listen("publish-rt-a", "publish-rt-b")
    assert realtime.send_to_groups(["publish-rt-a", "publish-rt-b"], {"type": "t"})
    assert executed == [2]  # two PUBLISHes, one pipeline
    assert len(listener.receive_all()) == 2


def test_an_unreachable_redis_fails_the_send_within_the_timeout(monkeypatch):
    # A port nobody listens on: the send reports the failure (logged) instead of raising.
    layer = RedisPubSubChannelLayer(
        hosts=[{"address": "redis://127.0.0.1:1/0"}], prefix=f"down-{uuid.uuid4().hex}"
    )
    monkeypatch.setattr(realtime, "get_channel_layer", lambda: layer)
    assert realtime.send_to_groups(["g"], {"type": "t"}) is False
    assert realtime.send_to_groups(["g"], {"type": "t"}, wait=False) is False


def test_another_layer_sends_from_plain_threads_through_one_loop_in_order(monkeypatch):
    # The list-based Redis layer (any layer but pub/sub): its group_send runs on one
    # long-lived event loop of the process, whichever thread sends.
    hosts = [settings.CHANNEL_LAYERS["default"]["CONFIG"]["hosts"][0]["address"]]
    prefix = f"loop-{uuid.uuid4().hex}"
    layer = RedisChannelLayer(hosts=hosts, prefix=prefix)
    monkeypatch.setattr(realtime, "get_channel_layer", lambda: layer)
    assert realtime._publisher(layer) is None
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("loop-test", channel)
    loops = []
    real_submit = realtime._submit

    def submit(*args):
        done = real_submit(*args)
        loops.append(realtime._loop)
        return done

    monkeypatch.setattr(realtime, "_submit", submit)
    _send_from_plain_threads(["loop-test"], 3)
    assert len(loops) == 3 and len(set(map(id, loops))) == 1 and loops[0].is_running()

    async def receive_three():
        return [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(3)]

    assert [m["n"] for m in async_to_sync(receive_three)()] == [0, 1, 2]
    # The layer's connections belong to the loops that used them: clean its keys directly.
    client = redis.Redis.from_url(hosts[0])
    for key in client.scan_iter(f"{prefix}*"):
        client.delete(key)
