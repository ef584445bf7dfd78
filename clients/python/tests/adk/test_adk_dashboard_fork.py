"""A fork made in the dashboard is a session ADK continues: three turns of a real Runner (a
scripted BaseLlm, no network), a fork at the seq where the first turn ended (through
fork_session, the service the dashboard's Fork button calls: no external_id), and the session
service, given `switchboard:<fork id>` as the session id, reads the events and state up to that
point, lists the fork under that id, and runs the next turn on it."""

import asyncio
import uuid

from google.adk.agents.llm_agent import LlmAgent
from google.adk.runners import Runner
from google.genai import types
from switchboard_client import AsyncClient, RetryPolicy
from switchboard_client.adk import SwitchboardSessionService
from test_adk_runner import ScriptedLlm, comparable, model_turn

from core.actors import Actor
from sessions_app.models import Session
from sessions_app.services.sessions import fork_session

FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)
SAID = ["one", "two", "three", "instead"]


def echo_agent() -> LlmAgent:
    return LlmAgent(
        name="echo",
        model=ScriptedLlm(
            model="scripted", script=[model_turn(types.Part(text=text)) for text in SAID]
        ),
        output_key="last",
    )


def test_a_dashboard_fork_is_a_session_adk_continues_from_its_fork_point(server_url, api_key):
    namespace = f"fork-{uuid.uuid4().hex[:8]}:"
    agent = echo_agent()  # one script for the parent's three turns and the fork's one
    found = {}

    def say(text):
        return types.Content(role="user", parts=[types.Part(text=text)])

    async def three_turns():
        async with AsyncClient(server_url, api_key, retry=FAST) as client:
            service = SwitchboardSessionService(client, namespace=namespace)
            runner = Runner(agent=agent, app_name="shop", session_service=service)
            await service.create_session(app_name="shop", user_id="ada", session_id="c1")
            for turn, text in enumerate(("first", "second", "third")):
                async for _ in runner.run_async(
                    user_id="ada", session_id="c1", new_message=say(text)
                ):
                    pass
                if turn == 0:
                    ref = f"{namespace}adk:s:shop:ada:c1"
                    found["sid"] = (await client.find_session(ref)).id
                    found["head"] = (await client.get_session(found["sid"])).head_seq
                    found["first"] = await service.get_session(
                        app_name="shop", user_id="ada", session_id="c1"
                    )

    asyncio.run(three_turns())
    fork = fork_session(
        Session.objects.get(pk=found["sid"]), at_seq=found["head"], actor=Actor.system("dashboard")
    )
    assert fork.external_id is None
    forked_id = f"switchboard:{fork.pk}"

    async def on_the_fork():
        async with AsyncClient(server_url, api_key, retry=FAST) as client:
            service = SwitchboardSessionService(client, namespace=namespace)
            seen = await service.get_session(app_name="shop", user_id="ada", session_id=forked_id)
            listed = await service.list_sessions(app_name="shop", user_id="ada")
            other_user = await service.get_session(
                app_name="shop", user_id="bob", session_id=forked_id
            )
            runner = Runner(agent=agent, app_name="shop", session_service=service)
            async for _ in runner.run_async(
                user_id="ada", session_id=forked_id, new_message=say("something else")
            ):
                pass
            after = await service.get_session(app_name="shop", user_id="ada", session_id=forked_id)
            parent = await service.get_session(app_name="shop", user_id="ada", session_id="c1")
            return seen, listed, other_user, after, parent

    seen, listed, other_user, after, parent = asyncio.run(on_the_fork())
    first = found["first"]
    assert len(first.events) == 2  # the user's message and the answer
    assert comparable(seen.events) == comparable(first.events)
    assert seen.state == first.state == {"last": "one"}
    assert sorted(s.id for s in listed.sessions) == sorted(["c1", forked_id])
    assert other_user is None  # the fork is ada's, as its parent
    # The turn on the fork: its history is the fork point's, then its own.
    assert comparable(after.events[:2]) == comparable(first.events)
    assert [e.content.parts[0].text for e in after.events[2:]] == ["something else", "instead"]
    assert after.state == {"last": "instead"}
    assert parent.state == {"last": "three"} and len(parent.events) == 6
