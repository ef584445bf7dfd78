"""A SwitchboardSession keeps the items a whole read found, and its next get_items reads only
the adapter's events since (what another process added, popped or cleared included) instead of
the whole log again; a compaction of the history since makes it read the whole log again."""

import asyncio
from contextlib import asynccontextmanager

from switchboard_client import AsyncClient
from switchboard_client.openai_agents import SwitchboardSession

from tests.multiproc import run_in_processes
from tests.retention.children import compact_now

from .adder import go, start_adders


def user(text):
    return {"role": "user", "content": text}


def run(coroutine):
    return asyncio.run(coroutine)


class Reads:
    """The GET …/events requests a client sends (their query), as an httpx event hook."""

    def __init__(self):
        self.asked = []

    async def __call__(self, request):
        if request.method == "GET" and request.url.path.endswith("/events"):
            self.asked.append(dict(request.url.params))

    def options(self):
        return {"event_hooks": {"request": [self]}}


@asynccontextmanager
async def keeper_and_other(server_url, key, namespace, name, reads):
    """One session twice, with their clients: the keeper's client records its reads in `reads`;
    the other's stands for another process."""
    async with (
        AsyncClient(server_url, key, httpx_options=reads.options()) as client,
        AsyncClient(server_url, key) as other_client,
    ):
        yield (
            (client, SwitchboardSession(name, client, namespace=namespace)),
            (other_client, SwitchboardSession(name, other_client, namespace=namespace)),
        )


def test_the_next_whole_read_asks_only_for_what_was_written_since(server_url, oa_key, namespace):
    reads = Reads()

    async def scenario():
        async with keeper_and_other(server_url, oa_key, namespace, "kept", reads) as (
            (client, keeper),
            (other_client, other),
        ):
            await keeper.add_items([user(f"m{i}") for i in range(1200)])
            first = await keeper.get_items()  # two pages of 1,000 events: kept
            head = (await client.get_session(await keeper.switchboard_id())).head_seq

            await other.add_items([user("from the other"), user("popped by the other")])
            await other.pop_item()
            await keeper.add_items([user("mine")])
            sid = await keeper.switchboard_id()
            await client.append(sid, [{"kind": "note", "content": {"text": "an operator's"}}])
            reads.asked.clear()
            second = await keeper.get_items()
            second_reads = list(reads.asked)
            last_two = await keeper.get_items(2)

            await other.clear_session()
            await other.add_items([user("after the clear")])
            third = await keeper.get_items()
            fresh = await SwitchboardSession("kept", other_client, namespace=namespace).get_items()
            return first, head, second, second_reads, last_two, third, fresh

    first, head, second, second_reads, last_two, third, fresh = run(scenario())
    everything = [user(f"m{i}") for i in range(1200)]
    assert first == everything
    assert second == [*everything, user("from the other"), user("mine")]
    # One request: the adapter's events after the head the whole read saw, oldest first.
    assert len(second_reads) == 1
    (asked,) = second_reads
    assert (asked["after_seq"], asked["order"], asked["key_prefix"]) == (str(head), "asc", "oai:")
    assert last_two == [user("from the other"), user("mine")]
    assert third == fresh == [user("after the clear")]


def test_a_read_on_over_more_than_a_page_folds_every_page(server_url, oa_key, namespace):
    reads = Reads()

    async def scenario():
        async with keeper_and_other(server_url, oa_key, namespace, "paged", reads) as (
            (_, keeper),
            (other_client, other),
        ):
            await keeper.add_items([user("first")])
            assert await keeper.get_items() == [user("first")]  # kept
            await other.add_items([user(f"m{i}") for i in range(1100)])  # over a page of 1,000
            reads.asked.clear()
            kept_read = await keeper.get_items()
            fresh = await SwitchboardSession("paged", other_client, namespace=namespace).get_items()
            return kept_read, list(reads.asked), fresh

    kept_read, asked, fresh = run(scenario())
    assert kept_read == fresh == [user("first")] + [user(f"m{i}") for i in range(1100)]
    assert [a["order"] for a in asked] == ["asc", "asc"]  # two pages on from the head


def test_kept_items_come_back_as_objects_of_their_own(server_url, oa_key, namespace):
    async def scenario():
        async with AsyncClient(server_url, oa_key) as client:
            session = SwitchboardSession("own", client, namespace=namespace)
            await session.add_items([user("a"), {"type": "reasoning", "id": "r", "summary": []}])
            first = await session.get_items()
            first[0]["content"] = "changed by the caller"
            first[1]["summary"].append("also")
            return await session.get_items()

    assert run(scenario()) == [user("a"), {"type": "reasoning", "id": "r", "summary": []}]


def test_a_compaction_since_the_whole_read_makes_the_next_one_whole_again(
    server_url, oa_key, namespace
):
    reads = Reads()

    async def scenario():
        async with AsyncClient(server_url, oa_key, httpx_options=reads.options()) as client:
            session = SwitchboardSession("compacted", client, namespace=namespace)
            await session.add_items([user(f"m{i}") for i in range(20)])
            assert len(await session.get_items()) == 20  # kept
            sid = await session.switchboard_id()
            (through,) = await asyncio.to_thread(run_in_processes, compact_now, [(sid,)])
            await session.add_items([user("after the compaction")])
            reads.asked.clear()
            kept_read = await session.get_items()
            kept_reads = list(reads.asked)
            fresh = await SwitchboardSession("compacted", client, namespace=namespace).get_items()
            return through, kept_read, kept_reads, fresh

    through, kept_read, kept_reads, fresh = run(scenario())
    assert through == 20  # every item's event was compacted away (they are transient)
    assert kept_read == fresh == [user("after the compaction")]
    # The read since the head saw a new compaction_mark, then read the whole log again.
    assert [asked["order"] for asked in kept_reads] == ["asc", "desc"]


def test_reads_while_two_processes_add_keep_every_item_once_in_order(server_url, oa_key, namespace):
    """The keeper reads on from its head while two other processes add: each read holds a
    prefix of each writer's items, in order, none twice, and the last equals a fresh read."""
    count = 40
    processes = start_adders(server_url, oa_key, namespace, "raced", count, ("a", "b"))

    async def scenario():
        async with AsyncClient(server_url, oa_key) as client:
            keeper = SwitchboardSession("raced", client, namespace=namespace)
            await keeper.add_items([user("first")])
            assert await keeper.get_items() == [user("first")]  # kept from here on
            go(processes)  # both at once
            seen = []
            while any(p.poll() is None for p in processes):
                seen.append(await keeper.get_items())
            seen.append(await keeper.get_items())
            fresh = await SwitchboardSession("raced", client, namespace=namespace).get_items()
            return seen, fresh

    seen, fresh = run(scenario())
    assert [p.wait(timeout=120) for p in processes] == [0, 0]
    assert len(seen) > 2  # reads ran while the writers wrote
    for items in seen:
        contents = [item["content"] for item in items]
        assert contents[0] == "first" and len(set(contents)) == len(contents)
        for who in ("a", "b"):
            mine = [c for c in contents if c.startswith(who + "-")]
            assert mine == [f"{who}-{i}" for i in range(len(mine))]
    assert seen[-1] == fresh and len(fresh) == 1 + 2 * count
