"""SwitchboardSession against a live server: what it stores and how it reads, unknown sessions,
namespaces, pop_item and clear_session on an append-only log, and concurrent writers (two OS
processes adding, several sessions popping at once)."""

import asyncio

from switchboard_client import AsyncClient
from switchboard_client.openai_agents import SwitchboardSession

from .adder import go, start_adders


def user(text):
    return {"role": "user", "content": text}


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_read_of_an_unknown_session_creates_nothing(sb, namespace):
    session = SwitchboardSession("nobody", sb, namespace=namespace)

    async def reads():
        return await session.get_items(), await session.get_items(3), await session.pop_item()

    assert run(reads()) == ([], [], None)
    run(session.clear_session())
    assert sb.find_session(namespace + "nobody") is None


def test_each_item_is_an_event_an_operator_reads(sb, namespace):
    session = SwitchboardSession("readable", sb, namespace=namespace, agent="shop-bot")
    items = [
        user("Where is order 7?"),
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "find_order",
            "arguments": '{"id": 7}',
        },
        {"type": "function_call_output", "call_id": "c1", "output": "shipped"},
        {
            "type": "message",
            "role": "assistant",
            "id": "m1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "It shipped.", "annotations": []}],
        },
        {"type": "reasoning", "id": "r1", "summary": []},
    ]
    run(session.add_items(items))
    assert run(session.get_items()) == items

    found = sb.find_session(namespace + "readable")
    assert found is not None and found.agent == "shop-bot"
    events = sb.events(found.id).events
    assert [(e.kind, e.role) for e in events] == [
        ("message", "user"),
        ("tool_call", ""),
        ("tool_result", ""),
        ("message", "assistant"),
        ("note", ""),
    ]
    assert events[0].content["text"] == "Where is order 7?"
    assert (events[1].content["name"], events[1].content["arguments"]) == (
        "find_order",
        '{"id": 7}',
    )
    assert events[2].content["name"] == "find_order"
    assert events[2].content["result"] == "shipped"
    assert events[3].content["text"] == "It shipped."
    assert events[4].content["text"] == "reasoning"
    assert all(e.content["item"] == item for e, item in zip(events, items, strict=True))


def test_namespaces_keep_sessions_apart(sb, namespace):
    first = SwitchboardSession("chat", sb, namespace=namespace + "app-a/")
    second = SwitchboardSession("chat", sb, namespace=namespace + "app-b/")
    run(first.add_items([user("for a")]))
    run(second.add_items([user("for b")]))
    assert run(first.get_items()) == [user("for a")]
    assert run(second.get_items()) == [user("for b")]
    assert (
        sb.find_session(namespace + "app-a/chat").id != sb.find_session(namespace + "app-b/chat").id
    )
    # The same id and namespace from another instance is the same session.
    assert run(SwitchboardSession("chat", sb, namespace=namespace + "app-a/").get_items()) == [
        user("for a")
    ]


def test_pop_and_clear_change_what_the_session_returns_and_keep_the_log(sb, namespace):
    session = SwitchboardSession("edits", sb, namespace=namespace)

    async def scenario():
        await session.add_items([user("one"), user("two"), user("three")])
        popped = await session.pop_item()
        after_pop = await session.get_items()
        newest = await session.get_items(1)
        await session.clear_session()
        after_clear = await session.get_items()
        none_left = await session.pop_item()
        await session.add_items([user("four")])
        return popped, after_pop, newest, after_clear, none_left, await session.get_items()

    popped, after_pop, newest, after_clear, none_left, fresh = run(scenario())
    assert popped == user("three")
    assert after_pop == [user("one"), user("two")]
    assert newest == [user("two")]
    assert after_clear == [] and none_left is None
    assert fresh == [user("four")]

    # Nothing was deleted: the operator reads every item and what happened to it.
    log = sb.events(sb.find_session(namespace + "edits").id).events
    assert [e.content.get("text") for e in log] == [
        "one",
        "two",
        "three",
        f"popped: the item at seq {log[2].seq}",
        "session cleared (openai-agents clear_session)",
        "four",
    ]
    assert log[3].content["drop"] == [log[2].seq]


def test_get_items_with_a_limit_reads_only_the_tail(server_url, oa_key, namespace):
    asked = []

    async def note(request):
        if request.url.path.endswith("/events") and request.method == "GET":
            asked.append(dict(request.url.params))

    async def scenario():
        async with AsyncClient(
            server_url, oa_key, httpx_options={"event_hooks": {"request": [note]}}
        ) as client:
            session = SwitchboardSession("long", client, namespace=namespace)
            await session.add_items([user(f"m{i}") for i in range(300)])
            await session.pop_item()
            asked.clear()
            return await session.get_items(5)

    assert run(scenario()) == [user(f"m{i}") for i in range(294, 299)]
    # One request, newest first, a few events more than asked for (the pop's note among them).
    assert len(asked) == 1
    assert asked[0]["order"] == "desc" and int(asked[0]["limit"]) <= 5 + 8
    assert asked[0]["key_prefix"] == "oai:"


def test_a_fresh_process_reads_its_items_in_one_request(server_url, oa_key, namespace):
    """A session not looked up yet (a new process) finds the Switchboard session and its last
    events in one GET /sessions (include=events): issue 27 §2's "opening a session from a
    fresh process". The listed tail holds every event (an operator's note among them, a pop
    and a clear); a read wanting more than it holds pages back through the events endpoint."""
    sent = []

    async def count(request):
        sent.append(f"{request.method} {request.url.path}")

    async def scenario():
        options = {"event_hooks": {"request": [count]}}
        async with AsyncClient(server_url, oa_key, httpx_options=options) as client:
            writer = SwitchboardSession("fresh", client, namespace=namespace)
            await writer.add_items([user(f"old{i}") for i in range(5)])
            await writer.clear_session()
            await writer.add_items([user(f"m{i}") for i in range(400)])
            await writer.pop_item()
            sid = await writer.switchboard_id()
            await client.append(sid, [{"kind": "note", "content": {"text": "an operator's"}}])
            results = []
            for limit in (3, None):
                sent.clear()
                reader = SwitchboardSession("fresh", client, namespace=namespace)
                results.append((await reader.get_items(limit), list(sent)))
            sent.clear()
            missing = SwitchboardSession("never-added", client, namespace=namespace)
            results.append((await missing.get_items(), list(sent)))
            return results

    (last, first_read), (everything, all_read), (none, missing_read) = run(scenario())
    assert last == [user(f"m{i}") for i in range(396, 399)]
    assert first_read == ["GET /api/v1/sessions"]
    assert everything == [user(f"m{i}") for i in range(399)]  # the clear ends the read
    assert all_read[0] == "GET /api/v1/sessions" and len(all_read) == 2
    assert none == [] and missing_read == ["GET /api/v1/sessions"]


def test_concurrent_pops_each_take_a_different_item(server_url, oa_key, namespace):
    """Each pop is conditioned on the head it read; the losers of a race read again."""

    async def scenario():
        async with AsyncClient(server_url, oa_key) as client:
            writer = SwitchboardSession("popped", client, namespace=namespace)
            await writer.add_items([user(f"m{i}") for i in range(8)])
            poppers = [SwitchboardSession("popped", client, namespace=namespace) for _ in range(8)]
            popped = await asyncio.gather(*(p.pop_item() for p in poppers))
            return popped, await writer.get_items()

    popped, left = run(scenario())
    assert sorted(item["content"] for item in popped) == sorted(f"m{i}" for i in range(8))
    assert left == []


def test_two_processes_adding_at_once_lose_nothing(sb, server_url, oa_key, namespace):
    """Neither has the session when it starts: both open it (the same one) and append."""
    count = 30
    processes = start_adders(server_url, oa_key, namespace, "shared", count, ("a", "b"))
    go(processes)
    assert [p.wait(timeout=120) for p in processes] == [0, 0]
    items = run(SwitchboardSession("shared", sb, namespace=namespace).get_items())
    contents = [item["content"] for item in items]
    assert len(contents) == 2 * count
    for who in ("a", "b"):
        assert [c for c in contents if c.startswith(who)] == [f"{who}-{i}" for i in range(count)]
    assert len(sb.list_sessions(external_id=namespace + "shared").sessions) == 1
