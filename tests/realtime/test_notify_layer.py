"""core.notify_layer, the channel layer of a deployment without Redis: a group send made on one
database connection (a worker's, inside its transaction) reaches the channels joined through
another connection's LISTEN; nothing is heard of a rolled-back send; a message over NOTIFY's
8000 bytes arrives whole; a lost listening connection is told to every socket of the process.
(The browser test on the run command's setup: tests/browser/test_live_without_redis.py.)"""

import asyncio

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, transaction

from core.models import LiveNotice
from core.notify_layer import FEED_LOST, PostgresNotifyChannelLayer

pytestmark = pytest.mark.django_db(transaction=True)


async def _joined(layer: PostgresNotifyChannelLayer, *groups: str) -> str:
    channel = await layer.new_channel()
    for group in groups:
        await layer.group_add(group, channel)
    return channel


async def _next(layer: PostgresNotifyChannelLayer, channel: str, timeout: float = 5.0):
    return await asyncio.wait_for(layer.receive(channel), timeout)


async def _nothing(layer: PostgresNotifyChannelLayer, channel: str) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(layer.receive(channel), 0.5)


def _publish(layer: PostgresNotifyChannelLayer, groups: list[str], message: dict) -> None:
    """As core.realtime does from a sync thread: on this thread's Django connection."""
    layer.publish_from_thread(groups, message)


def test_committed_sends_arrive_rolled_back_ones_never():
    layer = PostgresNotifyChannelLayer()

    async def scenario():
        channel = await _joined(layer, "project-1-handoffs")
        loop = asyncio.get_running_loop()

        def write() -> None:
            with transaction.atomic():
                _publish(layer, ["project-1-handoffs"], {"type": "handoff.released", "n": 1})
            with transaction.atomic():
                _publish(layer, ["project-1-handoffs"], {"type": "handoff.released", "n": 2})
                transaction.set_rollback(True)
            _publish(layer, ["project-1-handoffs", "elsewhere"], {"type": "handoff.overdue"})

        await loop.run_in_executor(None, write)
        assert await _next(layer, channel) == {"type": "handoff.released", "n": 1}
        assert await _next(layer, channel) == {"type": "handoff.overdue"}
        await _nothing(layer, channel)
        await layer.close()

    async_to_sync(scenario)()


def test_a_message_over_notifys_limit_arrives_whole():
    layer = PostgresNotifyChannelLayer()
    big = {"type": "handoff.created", "request": {"text": "x" * 20_000}}

    async def scenario():
        channel = await _joined(layer, "handoff-1")
        await asyncio.get_running_loop().run_in_executor(None, _publish, layer, ["handoff-1"], big)
        assert await _next(layer, channel) == big
        await layer.close()

    async_to_sync(scenario)()
    assert LiveNotice.objects.count() == 1  # read from its row; dropped minutes later


def test_a_lost_listening_connection_is_told_to_every_socket():
    layer = PostgresNotifyChannelLayer()

    async def scenario():
        channel = await _joined(layer, "session-1")

        def end_the_listener() -> int:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE query = 'LISTEN switchboard_live' AND pid <> pg_backend_pid()"
                    " AND datname = current_database()"
                )
                return len(cursor.fetchall())

        assert await asyncio.get_running_loop().run_in_executor(None, end_the_listener) == 1
        assert await _next(layer, channel) == FEED_LOST
        # Joining again listens again.
        again = await _joined(layer, "session-1")
        await asyncio.get_running_loop().run_in_executor(
            None, _publish, layer, ["session-1"], {"type": "session.lifecycle"}
        )
        assert await _next(layer, again) == {"type": "session.lifecycle"}
        await layer.close()

    async_to_sync(scenario)()
