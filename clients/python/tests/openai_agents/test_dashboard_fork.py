"""A fork made in the dashboard is a session the SDK continues: three turns of a real Runner (a
scripted model, no network), a fork at the seq where the first turn ended (through
fork_session, the service the dashboard's Fork button calls: no external_id), and a
SwitchboardSession named `switchboard:<fork id>` reads the items up to that point and goes on
from there."""

import asyncio
import threading
import uuid

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel
from django.db import connection
from openai.types.responses import ResponseOutputMessage, ResponseOutputText
from switchboard_client.errors import NotFound
from switchboard_client.openai_agents import SwitchboardSession

from core.actors import Actor
from sessions_app.models import Session
from sessions_app.services.sessions import fork_session


def said(text):
    return ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])],
    )


def fork_in_the_dashboard(session_id: str, at_seq: int) -> Session:
    """fork_session in a thread of its own: its row committed for the server to see (this
    test's own connection is in a transaction rolled back at its end)."""
    made = {}

    def fork():
        try:
            made["fork"] = fork_session(
                Session.objects.get(pk=session_id), at_seq=at_seq, actor=Actor.system("dashboard")
            )
        finally:
            connection.close()

    worker = threading.Thread(target=fork)
    worker.start()
    worker.join(timeout=30)
    return made["fork"]


def test_a_dashboard_fork_is_a_session_the_sdk_continues_from_its_fork_point(sb, namespace):
    model = ScriptedModel()
    agent = Agent(name="echo", model=model)
    for text in ("one", "two", "three", "instead"):
        model.enqueue([said(text)])
    session = SwitchboardSession("chat", sb, namespace=namespace)

    async def three_turns():
        await Runner.run(agent, "first", session=session)
        sid = await session.switchboard_id()
        after_first = sb.get_session(sid).head_seq
        first_items = await session.get_items()
        await Runner.run(agent, "second", session=session)
        await Runner.run(agent, "third", session=session)
        return sid, after_first, first_items

    sid, after_first, first_items = asyncio.run(three_turns())
    assert len(first_items) == 2  # the user's message and the answer
    fork = fork_in_the_dashboard(sid, after_first)
    assert fork.external_id is None

    async def on_the_fork():
        forked = SwitchboardSession(f"switchboard:{fork.pk}", sb, namespace=namespace)
        seen = await forked.get_items()
        await Runner.run(agent, "something else", session=forked)
        return seen, await forked.get_items(), await session.get_items()

    seen, after, parent = asyncio.run(on_the_fork())
    assert seen == first_items
    # The model read the fork's history, not the parent's later turns.
    assert "second" not in str(model.calls[-1].input)
    assert "first" in str(model.calls[-1].input)
    assert (after[2]["role"], after[2]["content"]) == ("user", "something else")
    assert after[3]["role"] == "assistant" and "instead" in str(after[3]["content"])
    assert after[:2] == first_items and len(after) == 4
    assert len(parent) == 6  # the parent session goes on as it was

    async def unknown():
        await SwitchboardSession(f"switchboard:{uuid.uuid4()}", sb).get_items()

    with pytest.raises(NotFound):
        asyncio.run(unknown())
