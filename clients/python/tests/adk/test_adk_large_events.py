"""ADK events over the server's event size limit (a tool's large response: ADK's own stores take
any size): kept in the session's blobs, read back exactly (as JSON, byte for byte) by
get_session, from this service, a fresh one (another process's view) and a fork; shown on the
session page as a readable preview; small events cost the requests they always did; deleting
the session still works; a server set lower than the default is followed. State values over
the limit (ADK's stores take any size there too) are kept in blobs the same way."""

import asyncio
import hashlib
import json

import pytest
from django.test import Client as PageClient
from google.adk.errors import StaleSessionError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types
from switchboard_client import AsyncClient, RetryPolicy
from switchboard_client.adk import DEFAULT_EVENT_BYTES, SwitchboardSessionService

from tests.factories import make_member
from tests.servers import asgi_server

FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)
STORED = "adk_in_blobs"
REF = "t:adk:s:app:u:s1"


def said(text, author="agent", invocation="inv"):
    return Event(
        invocation_id=invocation,
        author=author,
        content=types.Content(role="model", parts=[types.Part(text=text)]),
    )


def tool_response(size):
    """A function response of about `size` bytes, non-ASCII characters among them (the server
    counts them escaped: up to 12 bytes each)."""
    line = "row é 😀 " + "x" * 90
    rows = "\n".join(f"{n:06d} {line}" for n in range(size // 110))
    return Event(
        invocation_id="inv",
        author="agent",
        content=types.Content(
            role="user",
            parts=[types.Part.from_function_response(name="read_file", response={"rows": rows})],
        ),
    )


def at_size(size):
    """A text event whose Switchboard event has `size` bytes of content as the server counts
    them (`{"text", "author", "adk": <the event>}`, compact, ASCII-escaped): the text counts
    twice, one more character of the invocation id makes up an odd byte."""

    def content(event):
        data = event.model_dump(exclude_none=True, mode="json")
        readable = {"text": event.content.parts[0].text, "author": event.author, "adk": data}
        return len(json.dumps(readable, separators=(",", ":")))

    empty = said("")
    rest = size - content(empty)
    event = said("y" * (rest // 2), invocation="inv" + "z" * (rest % 2))
    event.id, event.timestamp = empty.id, empty.timestamp
    assert content(event) == size
    return event


def dumped(events):
    """Each event's JSON, as its length and SHA-256 (a failure names which differ, not 1 MiB)."""
    texts = [event.model_dump_json() for event in events]
    return [(len(text), hashlib.sha256(text.encode()).hexdigest()[:12]) for text in texts]


def run(url, key, scenario, **options):
    async def main():
        async with AsyncClient(url, key, retry=FAST, httpx_options=options) as client:
            return await scenario(SwitchboardSessionService(client, namespace="t:"), client)

    return asyncio.run(main())


def test_an_event_over_the_limit_round_trips_exactly(server_url, api_key):
    # Made in this order: their timestamps are too (after_timestamp below).
    events = [
        said("Read the file", author="user"),
        tool_response(1024 * 1024),
        at_size(DEFAULT_EVENT_BYTES + 1),
        at_size(DEFAULT_EVENT_BYTES),
        said("done"),
    ]
    big, over, at_limit = events[1:4]

    async def write(service, client):
        session = await service.create_session(app_name="app", user_id="u", session_id="s1")
        for event in events:
            await service.append_event(session, event)
        got = await service.get_session(app_name="app", user_id="u", session_id="s1")
        assert dumped(got.events) == dumped(session.events) == dumped(events)
        log = (await client.events((await client.find_session(REF)).id, kind=["message"])).events
        return log

    log = run(server_url, api_key, write)
    stored = [e.content[STORED] for e in log if STORED in e.content]
    assert [s["id"] for s in stored] == [over.id]
    # The event at the limit is an ordinary one: the server counts as the adapter does.
    assert [e.content["adk"]["id"] for e in log if "adk" in e.content][1] == at_limit.id

    async def read(service, client):  # another process: a fresh client and service
        got = await service.get_session(app_name="app", user_id="u", session_id="s1")
        recent = await service.get_session(
            app_name="app",
            user_id="u",
            session_id="s1",
            config=GetSessionConfig(num_recent_events=3),
        )
        after = await service.get_session(
            app_name="app",
            user_id="u",
            session_id="s1",
            config=GetSessionConfig(after_timestamp=big.timestamp),
        )
        listed = await service.list_sessions(app_name="app", user_id="u")
        return got, recent, after, listed

    got, recent, after, listed = run(server_url, api_key, read)
    assert dumped(got.events) == dumped(events)
    assert got.events == events
    assert dumped(recent.events) == dumped(events[-3:])
    assert dumped(after.events) == dumped(events[1:])
    assert [s.id for s in listed.sessions] == ["s1"]

    async def delete(service, client):
        await service.delete_session(app_name="app", user_id="u", session_id="s1")
        return await service.get_session(app_name="app", user_id="u", session_id="s1")

    assert run(server_url, api_key, delete) is None


def test_a_large_event_shows_as_a_readable_preview(server_url, api_key, project):
    big = tool_response(400 * 1024)
    long_text = said("Z" * 300_000)

    async def scenario(service, client):
        session = await service.create_session(app_name="app", user_id="u", session_id="s1")
        await service.append_event(session, big)
        await service.append_event(session, long_text)
        sid = (await client.find_session(REF)).id
        return sid, (await client.events(sid, kind=["tool_result", "message"])).events

    sid, (result, message) = run(server_url, api_key, scenario)
    assert (result.kind, result.role, result.content["name"]) == (
        "tool_result",
        "tool",
        "read_file",
    )
    assert result.content["result"].startswith('{"rows": "000000 row é 😀')
    assert "the whole event" in result.content["result"] and "adk" not in result.content
    assert result.content[STORED]["id"] == big.id
    assert (message.kind, message.role, message.content["author"]) == (
        "message",
        "assistant",
        "agent",
    )
    assert message.content["text"].startswith("Z" * 2000) and len(message.content["text"]) < 2100
    assert len(message.content[STORED]["blobs"]) == 2  # 300 KB in pieces of 256 KiB

    page = PageClient()
    page.force_login(make_member(project))
    html = page.get(f"/sessions/{sid}/").content.decode()
    assert "read_file → {&quot;rows&quot;: &quot;000000 row é 😀" in html
    assert "Z" * 300 in html and "Z" * 2001 not in html
    assert str(message.content[STORED]["bytes"]) in html


def test_a_small_event_costs_the_requests_it_did(server_url, api_key):
    sent = []

    async def count(request):
        sent.append(f"{request.method} {request.url.path.rsplit('/', 1)[-1]}")

    async def scenario(service, client):
        session = await service.create_session(app_name="app", user_id="u", session_id="s1")
        counts = []
        for step in (
            service.append_event(session, said("small " * 1000)),
            service.get_session(app_name="app", user_id="u", session_id="s1"),
            service.append_event(session, tool_response(300 * 1024)),
            service.get_session(app_name="app", user_id="u", session_id="s1"),
        ):
            sent.clear()
            await step
            counts.append(list(sent))
        return counts

    small, read, large, read_large = run(
        server_url, api_key, scenario, event_hooks={"request": [count]}
    )
    assert small == ["POST events"]
    assert read == ["GET sessions"]
    # A large one: which pieces the session lacks, then its event with them.
    assert large == ["POST lookup", "POST events"]
    assert read_large == ["GET sessions", "POST lookup"]


def test_a_fork_reads_the_events_its_parent_kept_in_blobs(server_url, api_key):
    big = tool_response(700 * 1024)

    async def scenario(service, client):
        session = await service.create_session(app_name="app", user_id="u", session_id="s1")
        await service.append_event(session, said("Read it", author="user"))
        await service.append_event(session, big)
        parent = await client.find_session(REF)
        await service.append_event(session, said("later"))
        fork = await client.fork(parent.id, parent.head_seq, metadata=parent.metadata)
        forked = await service.get_session(
            app_name="app", user_id="u", session_id=f"switchboard:{fork.id}"
        )
        seen = list(forked.events)
        await service.append_event(forked, more)
        again = await service.get_session(
            app_name="app", user_id="u", session_id=f"switchboard:{fork.id}"
        )
        return seen, again, session

    more = tool_response(300 * 1024)
    seen, again, parent = run(server_url, api_key, scenario)
    assert dumped(seen) == dumped(parent.events[:2])
    assert dumped(seen[1:]) == dumped([big])
    assert dumped(again.events) == dumped([*seen, more])


def test_a_server_set_lower_than_the_default_is_followed(server_url, api_key):
    """The API does not say the server's limit: its refusal does, and the service keeps in
    blobs what is over it from then on."""
    events = [said("a" * 30_000), said("short"), tool_response(25_000), said("b" * 40_000)]

    async def scenario(service, client):
        session = await service.create_session(app_name="app", user_id="u", session_id="s1")
        for event in events:
            await service.append_event(session, event)

    async def read(service, client):
        return await service.get_session(app_name="app", user_id="u", session_id="s1")

    with asgi_server(SWITCHBOARD_MAX_EVENT_BYTES="20000") as url:
        run(url, api_key, scenario)
        got = run(url, api_key, read)
    assert dumped(got.events) == dumped(events)


def test_a_stale_writer_of_a_large_event_stores_none_of_it(server_url, api_key):
    """The pieces go with the append that writes the event (one request up to about 800 KiB):
    an append refused as stale leaves none of them behind."""
    big = tool_response(300 * 1024)
    data = big.model_dump(exclude_none=True, mode="json")
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    names = [hashlib.sha256(raw[i : i + 256 * 1024]).hexdigest() for i in (0, 256 * 1024)]

    async def scenario(service, client):
        first = await service.create_session(app_name="app", user_id="u", session_id="s1")
        second = await service.get_session(app_name="app", user_id="u", session_id="s1")
        await service.append_event(first, said("first"))
        with pytest.raises(StaleSessionError):
            await service.append_event(second, big)
        sid = (await client.find_session(REF)).id
        missing = await client.missing_blobs(sid, names)
        await service.append_event(first, big)
        return missing, await client.missing_blobs(sid, names)

    before, after = run(server_url, api_key, scenario)
    assert before == names and after == []


def stated(delta, author="agent"):
    """An event that only changes state (as a tool's `tool_context.state[...] = ...` does)."""
    return Event(invocation_id="inv", author=author, actions=EventActions(state_delta=delta))


def test_state_values_over_the_limit_round_trip_in_blobs(server_url, api_key, project):
    """ADK's stores keep a state value of any size: one over the event limit, in the session's
    state or the app's or the user's, is kept in blobs and read back equal, by this service and
    a fresh one, through get_session, list_sessions and get_user_state; its place in the
    working state shows its size and a preview; a later small write of the key replaces it."""
    doc = "chapter é 😀 " + "x" * (400 * 1024)
    manual = {"pages": ["p" * 1000] * 300}  # ~300 KB, an object
    prefs = ["é" * 100_000]  # 100,000 characters, ~600 KB as the server counts them (escaped)
    later = "y" * (300 * 1024)
    initial = {"doc": doc, "small": 1, "app:manual": manual, "user:prefs": prefs}
    expected = {
        "doc": later,
        "small": 1,
        "gone": None,
        "app:manual": manual,
        "user:prefs": prefs,
    }

    async def write(service, client):
        session = await service.create_session(
            app_name="app", user_id="u", session_id="s1", state=initial
        )
        await service.append_event(session, stated({"doc": later, "gone": None}))
        return session.state

    assert run(server_url, api_key, write) == expected

    async def read(service, client):
        got = await service.get_session(app_name="app", user_id="u", session_id="s1")
        of_user = await service.list_sessions(app_name="app", user_id="u")
        of_app = await service.list_sessions(app_name="app")
        user_state = await service.get_user_state(app_name="app", user_id="u")
        sid = (await client.find_session(REF)).id
        working = (await client.state(sid)).state["adk_state"]
        return got, of_user, of_app, user_state, working

    got, of_user, of_app, user_state, working = run(server_url, api_key, read)
    assert got.state == expected
    assert [s.state for s in of_user.sessions] == [expected]
    assert [s.state for s in of_app.sessions] == [expected]
    assert user_state == {"prefs": prefs}
    # The operator's view of the session's working state: the kept value's size and preview.
    kept = working["doc"][STORED]
    assert kept["bytes"] == len(json.dumps(later)) and kept["preview"].startswith("y" * 100)
    assert "[cut: the whole value" in kept["preview"] and working["small"] == [1]

    async def shrink(service, client):
        session = await service.get_session(app_name="app", user_id="u", session_id="s1")
        await service.append_event(session, stated({"doc": "short", "user:prefs": ["p"]}))
        return await SwitchboardSessionService(client, namespace="t:").get_session(
            app_name="app", user_id="u", session_id="s1"
        )

    smaller = run(server_url, api_key, shrink)
    assert smaller.state == {**expected, "doc": "short", "user:prefs": ["p"]}


def test_a_state_read_with_nothing_in_blobs_costs_no_more_requests(server_url, api_key):
    sent = []

    async def count(request):
        sent.append(f"{request.method} {request.url.path.rsplit('/', 1)[-1]}")

    async def scenario(service, client):
        await service.create_session(
            app_name="app", user_id="u", session_id="s1", state={"small": 1, "user:x": 2}
        )
        sent.clear()
        got = await service.get_session(app_name="app", user_id="u", session_id="s1")
        read = list(sent)
        sent.clear()
        await service.list_sessions(app_name="app", user_id="u")
        return got, read, list(sent)

    got, read, listed = run(server_url, api_key, scenario, event_hooks={"request": [count]})
    assert got.state == {"small": 1, "user:x": 2}
    assert read == ["GET sessions"]
    assert listed == ["GET sessions", "GET sessions"]
