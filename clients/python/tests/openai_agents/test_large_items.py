"""Items over the server's event size limit (a tool's large output: the SDK's own stores take any
size): kept in the session's blobs, read back exactly (as JSON, byte for byte) by add_items,
get_items and pop_item, from this session, a fresh process's and a fork; shown on the session
page as a readable preview; small items cost the requests they always did; a server set lower
than the default is followed."""

import asyncio
import hashlib
import json

from django.test import Client as PageClient
from switchboard_client import AsyncClient
from switchboard_client.openai_agents import DEFAULT_EVENT_BYTES, STORED, SwitchboardSession

from tests.factories import make_member
from tests.servers import asgi_server

from .conftest import FAST


def run(coroutine):
    return asyncio.run(coroutine)


def user(text):
    return {"role": "user", "content": text}


def tool_output(call_id, size):
    """A function call's output of about `size` bytes of JSON, non-ASCII characters among them
    (the server counts them escaped: up to 12 bytes each)."""
    line = "row é 😀 " + "x" * 90
    return {
        "type": "function_call_output",
        "call_id": call_id,
        "output": "\n".join(f"{n:06d} {line}" for n in range(size // 110)),
    }


def at_size(size):
    """A user message whose event content is `size` bytes as the server counts them
    (`{"text": t, "item": {"role": "user", "content": t, "id": …}}`, compact, ASCII-escaped):
    the text counts twice, the id (`,"id":"…"`: 8 bytes and its own) makes up the odd byte."""
    empty = len(json.dumps({"text": "", "item": user("")}, separators=(",", ":")))
    rest = size - empty - 8
    item = {**user("y" * (rest // 2)), "id": "z" * (rest % 2)}
    content = {"text": item["content"], "item": item}
    assert len(json.dumps(content, separators=(",", ":"))) == size
    return item


def dumped(items, *, sort_keys=False):
    """Each item's JSON, as its length and SHA-256 (a failure names which differ, not 1 MiB)."""
    texts = [json.dumps(item, sort_keys=sort_keys) for item in items]
    return [(len(text), hashlib.sha256(text.encode()).hexdigest()[:12]) for text in texts]


def same(read, items, kept_in_blobs=None):
    """The items read are those added: those kept in blobs (by default, any over 150,000
    characters of JSON) byte for byte as JSON, the others as the server keeps JSON (it orders
    an object's keys its own way, as it always did)."""
    if kept_in_blobs is None:
        kept_in_blobs = [n for n, item in enumerate(items) if len(json.dumps(item)) > 150_000]
    assert dumped(read, sort_keys=True) == dumped(items, sort_keys=True)
    assert dumped([read[n] for n in kept_in_blobs]) == dumped([items[n] for n in kept_in_blobs])
    return True


def test_items_over_the_event_limit_round_trip_exactly(sb, server_url, oa_key, namespace):
    big = tool_output("c1", 1024 * 1024)
    over = at_size(DEFAULT_EVENT_BYTES + 1)
    at_limit = at_size(DEFAULT_EVENT_BYTES)
    items = [
        user("Read the file"),
        {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"},
        big,
        over,
        at_limit,
        user("thanks"),
        tool_output("c2", 600 * 1024),
    ]
    session = SwitchboardSession("big", sb, namespace=namespace)

    async def fresh_process():
        async with AsyncClient(server_url, oa_key, retry=FAST) as client:
            reader = SwitchboardSession("big", client, namespace=namespace)
            return await reader.get_items(), await reader.get_items(3)

    run(session.add_items(items))
    in_blobs = [2, 3, 6]
    assert same(run(session.get_items()), items, in_blobs)
    everything, last = run(fresh_process())
    assert same(everything, items, in_blobs)
    assert same(last, items[-3:], [2])

    log = sb.events(sb.find_session(namespace + "big").id).events
    stored = [e.content[STORED] for e in log if STORED in e.content]
    assert [s["bytes"] for s in stored] == [
        len(json.dumps(i, ensure_ascii=False, separators=(",", ":")).encode())
        for i in (big, over, items[-1])
    ]
    # The item at the limit is an ordinary event: the server counts as the adapter does.
    assert same([log[4].content["item"]], [at_limit]) and STORED not in log[4].content

    assert same([run(session.pop_item())], [items[-1]])
    assert same([run(session.pop_item())], [user("thanks")])
    assert same(run(session.get_items()), items[:5], [2, 3])


def test_a_large_item_shows_as_a_readable_preview(sb, namespace, oa_project):
    big = tool_output("c1", 400 * 1024)
    message = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Z" * 300_000, "annotations": []}],
    }
    session = SwitchboardSession("shown", sb, namespace=namespace)
    call = {"type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{}"}
    run(session.add_items([call, big, message]))
    sid = sb.find_session(namespace + "shown").id
    result, said = sb.events(sid).events[1:]

    assert (result.kind, result.content["name"], result.content["call_id"]) == (
        "tool_result",
        "read_file",
        "c1",
    )
    assert result.content["result"].startswith(big["output"][:2000])
    assert "the whole item" in result.content["result"] and "item" not in result.content
    assert result.content[STORED]["type"] == "function_call_output"
    assert (said.kind, said.role) == ("message", "assistant")
    assert said.content["text"].startswith("Z" * 2000) and len(said.content["text"]) < 2100
    assert said.content[STORED]["role"] == "assistant"
    assert len(said.content[STORED]["blobs"]) == 2  # 300 KB in pieces of 256 KiB

    page = PageClient()
    page.force_login(make_member(oa_project))
    html = page.get(f"/sessions/{sid}/").content.decode()
    assert "read_file → 000000 row é 😀" in html
    assert "Z" * 300 in html and "Z" * 2001 not in html
    assert str(said.content[STORED]["bytes"]) in html


def test_a_small_item_costs_the_requests_it_did(server_url, oa_key, namespace):
    sent = []

    async def count(request):
        sent.append(f"{request.method} {request.url.path.rsplit('/', 1)[-1]}")

    async def scenario():
        options = {"event_hooks": {"request": [count]}}
        async with AsyncClient(server_url, oa_key, retry=FAST, httpx_options=options) as client:
            session = SwitchboardSession("counted", client, namespace=namespace)
            await session.add_items([user("first")])
            counts = [list(sent)]
            for step in (
                session.add_items([user("small"), tool_output("c1", 20 * 1024)]),
                session.get_items(),
                SwitchboardSession("counted", client, namespace=namespace).get_items(),
                session.pop_item(),
                session.add_items([tool_output("c2", 300 * 1024)]),
                session.get_items(),
            ):
                sent.clear()
                await step
                counts.append(list(sent))
            return counts

    first, small, read, fresh, pop, large, read_large = run(scenario())
    assert first == ["GET sessions", "POST sessions", "POST events"]
    assert small == ["POST events"]
    assert read == ["GET events"]
    assert fresh == ["GET sessions"]
    assert pop == ["GET events", "POST events"]
    # A large one: which pieces the session lacks, then its event with them.
    assert large == ["POST lookup", "POST events"]
    assert read_large == ["GET events", "POST lookup"]


def test_a_fork_reads_the_items_its_parent_kept_in_blobs(sb, namespace):
    big = tool_output("c1", 700 * 1024)
    session = SwitchboardSession("parent", sb, namespace=namespace)
    run(session.add_items([user("read it"), big]))
    sid = sb.find_session(namespace + "parent").id
    run(session.add_items([user("later")]))
    fork = sb.fork(sid, at_seq=2)

    forked = SwitchboardSession(f"switchboard:{fork.id}", sb, namespace=namespace)
    assert same(run(forked.get_items()), [user("read it"), big])
    run(forked.add_items([tool_output("c2", 300 * 1024)]))
    assert same([run(forked.pop_item())], [tool_output("c2", 300 * 1024)])
    assert same([run(forked.pop_item())], [big])
    assert same(run(session.get_items()), [user("read it"), big, user("later")])

    run(session.clear_session())
    assert run(session.get_items()) == []
    sb.delete_session(fork.id)
    sb.delete_session(sid)
    assert run(SwitchboardSession("parent", sb, namespace=namespace).get_items()) == []


def test_a_server_set_lower_than_the_default_is_followed(oa_key, namespace):
    """The API does not say the server's limit: its refusal does, and the session keeps in
    blobs what is over it from then on."""
    items = [user("a" * 30_000), user("short"), tool_output("c1", 25_000)]
    with asgi_server(SWITCHBOARD_MAX_EVENT_BYTES="20000") as url:

        async def scenario():
            async with AsyncClient(url, oa_key, retry=FAST) as client:
                session = SwitchboardSession("lower", client, namespace=namespace)
                await session.add_items(items)
                await session.add_items([user("b" * 40_000)])
                fresh = SwitchboardSession("lower", client, namespace=namespace)
                return await fresh.get_items(), await session.pop_item()

        read, popped = run(scenario())
    assert same(read, [*items, user("b" * 40_000)], [0, 2, 3])
    assert same([popped], [user("b" * 40_000)], [0])


def test_items_near_the_limit_go_in_appends_under_the_body_limit(server_url, oa_key, namespace):
    """Four events at the event limit are more than the server's 1 MiB body: two appends."""
    sent = []

    async def count(request):
        sent.append(f"{request.method} {request.url.path.rsplit('/', 1)[-1]}")

    items = [at_size(DEFAULT_EVENT_BYTES) for _ in range(4)]

    async def scenario():
        options = {"event_hooks": {"request": [count]}}
        async with AsyncClient(server_url, oa_key, retry=FAST, httpx_options=options) as client:
            session = SwitchboardSession("near", client, namespace=namespace)
            await session.add_items(items)
            return await session.get_items()

    assert same(run(scenario()), items)
    assert sent.count("POST events") == 2 and "POST blobs" not in sent
