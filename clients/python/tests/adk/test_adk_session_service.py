"""SwitchboardSessionService against a live server, on what ADK's own contract tests leave
implicit: None kept in state, temp: never stored, app: and user: shared across sessions,
stale writers refused, an unknown session neither found nor made, namespaces apart."""

import asyncio

import httpx
import pytest
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types
from switchboard_client import AsyncClient, Client, RetryPolicy
from switchboard_client.adk import SwitchboardSessionService

# As the client tests: no long waits between retries, nothing is retried on purpose.
FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)


def run(url, key, scenario, namespace="t:"):
    async def main():
        async with AsyncClient(url, key, retry=FAST) as client:
            await scenario(SwitchboardSessionService(client, namespace=namespace), client)

    asyncio.run(main())


def state_event(delta, author="agent", text=None):
    content = types.Content(role="model", parts=[types.Part(text=text)]) if text else None
    return Event(
        invocation_id="inv", author=author, content=content, actions=EventActions(state_delta=delta)
    )


def test_it_keeps_none_and_nested_values_in_state(server_url, api_key):
    async def scenario(service, client):
        session = await service.create_session(
            app_name="app", user_id="u", session_id="s1", state={"a": None, "b": {"x": None}}
        )
        await service.append_event(session, state_event({"c": None, "b": {"y": 1}, "d": [None]}))
        await service.append_event(session, state_event({"e": 1}))
        await service.append_event(session, state_event({"e": None}))
        got = await service.get_session(app_name="app", user_id="u", session_id="s1")
        # A merge patch would have deleted a, c and e and merged b; ADK replaces per key.
        assert got.state == {"a": None, "b": {"y": 1}, "c": None, "d": [None], "e": None}
        assert got.state == session.state
        listed = await service.list_sessions(app_name="app", user_id="u")
        assert listed.sessions[0].state == got.state
        # In Switchboard's working state each value is wrapped: [null] survives the patch.
        stored = await client.find_session("t:adk:s:app:u:s1", include_state=True)
        assert stored.state["adk_state"]["e"] == [None]

    run(server_url, api_key, scenario)


def test_it_never_stores_temp_keys(server_url, api_key):
    async def scenario(service, client):
        session = await service.create_session(
            app_name="app", user_id="u", session_id="s1", state={"temp:a": 1, "k": 1}
        )
        assert "temp:a" not in session.state
        event = await service.append_event(session, state_event({"temp:b": 2, "k": 2}))
        # The invocation still reads it; the stored event and state never hold it.
        assert session.state["temp:b"] == 2
        assert event.actions.state_delta == {"k": 2}
        got = await service.get_session(app_name="app", user_id="u", session_id="s1")
        assert got.state == {"k": 2}
        assert got.events[0].actions.state_delta == {"k": 2}
        stored = await client.find_session("t:adk:s:app:u:s1")
        async for stored_event in client.iter_events(stored.id):
            assert "temp:" not in str(stored_event.content)

    run(server_url, api_key, scenario)


def test_it_shares_app_and_user_state_across_sessions(server_url, api_key):
    async def scenario(service, client):
        s1 = await service.create_session(
            app_name="app", user_id="u1", session_id="s1", state={"app:k": 1, "user:k": "u1"}
        )
        await service.append_event(s1, state_event({"app:j": None, "user:j": 2, "k": 3}))
        s2 = await service.create_session(app_name="app", user_id="u1", session_id="s2")
        assert s2.state == {"app:k": 1, "app:j": None, "user:k": "u1", "user:j": 2}
        other = await service.create_session(app_name="app", user_id="u2", session_id="s3")
        assert other.state == {"app:k": 1, "app:j": None}
        elsewhere = await service.create_session(app_name="app2", user_id="u1", session_id="s4")
        assert elsewhere.state == {}
        # Written through one session, read in the others (get and list alike).
        await service.append_event(other, state_event({"app:k": "new", "user:z": 0}))
        got = await service.get_session(app_name="app", user_id="u1", session_id="s1")
        assert got.state == {"app:k": "new", "app:j": None, "user:k": "u1", "user:j": 2, "k": 3}
        listed = await service.list_sessions(app_name="app")
        states = {s.id: s.state for s in listed.sessions}
        assert states["s3"] == {"app:k": "new", "app:j": None, "user:z": 0}
        assert states["s2"] == {"app:k": "new", "app:j": None, "user:k": "u1", "user:j": 2}
        assert await service.get_user_state(app_name="app", user_id="u2") == {"z": 0}
        # The shared-state sessions are not ADK sessions of the app.
        assert sorted(states) == ["s1", "s2", "s3"]

    run(server_url, api_key, scenario)


def test_it_refuses_a_stale_writer(server_url, api_key):
    async def scenario(service, client):
        await service.create_session(app_name="app", user_id="u", session_id="s1")
        first = await service.get_session(app_name="app", user_id="u", session_id="s1")
        second = await service.get_session(app_name="app", user_id="u", session_id="s1")
        await service.append_event(first, state_event({"k": 1}, text="one"))
        with pytest.raises(StaleSessionError):
            await service.append_event(second, state_event({"k": 2}, text="two"))
        # Refused whole: nothing of it stored; the up-to-date copy goes on writing.
        got = await service.get_session(app_name="app", user_id="u", session_id="s1")
        assert got.state == {"k": 1} and [e.content.parts[0].text for e in got.events] == ["one"]
        await service.append_event(first, state_event({"k": 3}))
        # A write through another process's service (no shared lock) makes `first` stale too.
        other = SwitchboardSessionService(client, namespace="t:")
        latest = await other.get_session(app_name="app", user_id="u", session_id="s1")
        await other.append_event(latest, state_event({"k": 4}))
        with pytest.raises(StaleSessionError):
            await service.append_event(first, state_event({"k": 5}))
        # An equal event delivered again is answered, not stored twice.
        fresh = await service.get_session(app_name="app", user_id="u", session_id="s1")
        event = state_event({"k": 6})
        await service.append_event(fresh, event)
        again = await service.get_session(app_name="app", user_id="u", session_id="s1")
        await service.append_event(again, event.model_copy(deep=True))
        final = await service.get_session(app_name="app", user_id="u", session_id="s1")
        assert len(final.events) == 4 and final.state == {"k": 6}

    run(server_url, api_key, scenario)


def test_it_creates_nothing_for_an_unknown_session(server_url, api_key):
    async def scenario(service, client):
        assert await service.get_session(app_name="app", user_id="u", session_id="nope") is None
        assert (await service.list_sessions(app_name="app")).sessions == []
        await service.delete_session(app_name="app", user_id="u", session_id="nope")
        assert await service.get_user_state(app_name="app", user_id="u") == {}
        assert (await client.list_sessions()).sessions == []
        # Created once; a second create of the same id is refused.
        await service.create_session(app_name="app", user_id="u", session_id="s1")
        with pytest.raises(AlreadyExistsError):
            await service.create_session(app_name="app", user_id="u", session_id="s1")

    run(server_url, api_key, scenario)


def test_it_keeps_namespaces_apart(server_url, api_key):
    async def scenario(service, client):
        other = SwitchboardSessionService(client, namespace="other:")
        plain = SwitchboardSessionService(client)
        for svc in (service, other, plain):
            await svc.create_session(
                app_name="app", user_id="u", session_id="s1", state={"app:n": svc.namespace}
            )
        for svc in (service, other, plain):
            got = await svc.get_session(app_name="app", user_id="u", session_id="s1")
            assert got.state == {"app:n": svc.namespace}
            listed = await svc.list_sessions(app_name="app")
            assert [s.state for s in listed.sessions] == [{"app:n": svc.namespace}]
        await other.delete_session(app_name="app", user_id="u", session_id="s1")
        assert await other.get_session(app_name="app", user_id="u", session_id="s1") is None
        assert await service.get_session(app_name="app", user_id="u", session_id="s1")
        assert await plain.get_session(app_name="app", user_id="u", session_id="s1")

    run(server_url, api_key, scenario)


def test_it_writes_events_an_operator_can_read(server_url, api_key):
    async def scenario(service, client):
        session = await service.create_session(
            app_name="odd/app:name", user_id="a:b/c", session_id="x" * 150
        )
        user = Event(
            invocation_id="i1",
            author="user",
            content=types.Content(role="user", parts=[types.Part(text="Weather in Paris?")]),
        )
        call = Event(
            invocation_id="i1",
            author="agent",
            content=types.Content(
                role="model",
                parts=[types.Part.from_function_call(name="weather", args={"city": "Paris"})],
            ),
            long_running_tool_ids={"c1"},
        )
        result = Event(
            invocation_id="i1",
            author="agent",
            content=types.Content(
                role="user",
                parts=[types.Part.from_function_response(name="weather", response={"t": 21})],
            ),
        )
        for event in (user, call, result):
            await service.append_event(session, event)
        stored = await client.list_sessions(metadata={"app_name": "odd/app:name"})
        (item,) = stored.sessions
        assert len(item.external_id) <= 200  # hashed: the readable one is longer
        log = [
            e
            async for e in client.iter_events(item.id, kind=["message", "tool_call", "tool_result"])
        ]
        assert [(e.kind, e.role) for e in log] == [
            ("message", "user"),
            ("tool_call", "assistant"),
            ("tool_result", "tool"),
        ]
        assert log[0].content["text"] == "Weather in Paris?"
        assert log[1].content["name"] == "weather" and log[1].content["arguments"] == {
            "city": "Paris"
        }
        assert log[2].content["result"] == {"t": 21}
        got = await service.get_session(
            app_name="odd/app:name", user_id="a:b/c", session_id="x" * 150
        )
        assert got.events == session.events == [user, call, result]
        # num_recent_events and after_timestamp as InMemorySessionService applies them.
        recent = await service.get_session(
            app_name="odd/app:name",
            user_id="a:b/c",
            session_id="x" * 150,
            config=GetSessionConfig(num_recent_events=2),
        )
        assert recent.events == [call, result]
        after = await service.get_session(
            app_name="odd/app:name",
            user_id="a:b/c",
            session_id="x" * 150,
            config=GetSessionConfig(after_timestamp=call.timestamp),
        )
        assert after.events == [call, result]

    run(server_url, api_key, scenario)


def test_it_takes_a_sync_client_or_the_environment(server_url, api_key, monkeypatch):
    async def closes_what_it_made(service, given=None):
        async with service:
            assert (await service.list_sessions(app_name="app")).sessions == []
        assert service.client._http.is_closed is (given is None)
        if given is not None:
            await given.aclose()

    with Client(server_url, api_key) as client:
        service = SwitchboardSessionService(client)
        assert isinstance(service.client, AsyncClient)
        asyncio.run(closes_what_it_made(service))
    given = AsyncClient(server_url, api_key)
    asyncio.run(closes_what_it_made(SwitchboardSessionService(given), given))
    monkeypatch.setenv("SWITCHBOARD_URL", server_url)
    monkeypatch.setenv("SWITCHBOARD_API_KEY", api_key)
    service = SwitchboardSessionService()
    assert service.client.url == server_url and service.namespace == ""
    asyncio.run(closes_what_it_made(service))


class LosesOneAppendAnswer(httpx.AsyncHTTPTransport):
    """Sends every request; the answer to the second append of events (the first ADK event's)
    is lost on the way back, so the client sends it again and the server replays it."""

    appends = 0

    async def handle_async_request(self, request):
        response = await super().handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith("/events"):
            self.appends += 1
            if self.appends == 2:
                await response.aclose()
                raise httpx.ReadError("connection reset", request=request)
        return response


def test_it_goes_on_after_the_client_retried_an_append(server_url, api_key):
    async def main():
        transport = LosesOneAppendAnswer()
        async with AsyncClient(server_url, api_key, retry=FAST, transport=transport) as client:
            service = SwitchboardSessionService(client, namespace="t:")
            session = await service.create_session(app_name="app", user_id="u", session_id="s1")
            await service.append_event(session, state_event({"k": 1}, text="one"))
            assert transport.appends == 3  # written, its answer lost, sent again: replayed
            await service.append_event(session, state_event({"k": 2}, text="two"))
            got = await service.get_session(app_name="app", user_id="u", session_id="s1")
            assert [e.content.parts[0].text for e in got.events] == ["one", "two"]
            assert got.state == {"k": 2} and got == session

    asyncio.run(main())


def test_it_reads_a_session_in_one_request_and_lists_in_two(server_url, api_key):
    """get_session: the session, its state, its last events and the app's and user's shared
    state from one GET /sessions (issue 27 §2: it was four); list_sessions of a user: the
    sessions and both shared states in two (it was three). The events are those the events
    endpoint pages to when the listed tail is short: an operator's messages between ADK's,
    every event asked for (num_recent_events None), a time cut."""
    sent: list[httpx.Request] = []

    async def count(request):
        sent.append(request)

    async def scenario(service, client):
        session = await service.create_session(
            app_name="app", user_id="u", session_id="s1", state={"app:a": 1, "user:b": 2}
        )
        await service.create_session(app_name="app", user_id="u", session_id="s2")
        for n in range(130):
            await service.append_event(session, state_event({"n": n}, text=f"said {n}"))
            if n % 3 == 0:  # an operator's message: in the log, not one of ADK's events
                sid = (await client.find_session("t:adk:s:app:u:s1")).id
                await client.append(
                    sid, [{"kind": "message", "role": "human", "content": {"text": "hi"}}]
                )
                session = await service.get_session(app_name="app", user_id="u", session_id="s1")
        said = [e.content.parts[0].text for e in session.events if e.content]

        for wanted, expected in ((5, said[-5:]), (60, said[-60:]), (None, said), (0, [])):
            del sent[:]
            got = await service.get_session(
                app_name="app",
                user_id="u",
                session_id="s1",
                config=GetSessionConfig(num_recent_events=wanted),
            )
            assert [e.content.parts[0].text for e in got.events if e.content] == expected
            assert got.state == {"app:a": 1, "user:b": 2, "n": 129}
            if wanted in (0, 5):
                assert len(sent) == 1, [r.url for r in sent]  # the tail held them all
        middle = session.events[70].timestamp
        got = await service.get_session(
            app_name="app",
            user_id="u",
            session_id="s1",
            config=GetSessionConfig(after_timestamp=middle),
        )
        assert [e.id for e in got.events] == [e.id for e in session.events[70:]]

        del sent[:]
        listed = await service.list_sessions(app_name="app", user_id="u")
        assert len(sent) == 2
        assert {s.id: s.state for s in listed.sessions} == {
            "s1": {"app:a": 1, "user:b": 2, "n": 129},
            "s2": {"app:a": 1, "user:b": 2},
        }
        assert await service.get_session(app_name="app", user_id="u", session_id="nope") is None

    async def main():
        options = {"event_hooks": {"request": [count]}}
        async with AsyncClient(server_url, api_key, retry=FAST, httpx_options=options) as client:
            await scenario(SwitchboardSessionService(client, namespace="t:"), client)

    asyncio.run(main())
