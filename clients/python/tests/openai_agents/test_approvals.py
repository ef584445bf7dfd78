"""Tool approval end to end: a tool with needs_approval interrupts the run; the adapter asks a
person with a Switchboard approval handoff; the person answers through the server's own
services (accept, edit the arguments, reject); the resumed run finishes with that answer."""

import asyncio
import threading
import time

import pytest
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel
from django.db import connection
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from switchboard_client.openai_agents import SwitchboardSession, approve_in_switchboard

from handoffs_app.models import Handoff
from handoffs_app.services import handoffs as svc
from tests.handoffs.helpers import operator


def said(text):
    return ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])],
    )


def person_answers(project, session_id, answer):
    """A person, in a thread of their own (committed rows), claims the session's open handoff
    and answers it; the handoff as they found it is put in `seen`."""
    seen = {}

    def act():
        try:
            deadline = time.monotonic() + 60
            while (handoff := Handoff.objects.filter(session_id=session_id).first()) is None:
                assert time.monotonic() < deadline, "no handoff asked"
                time.sleep(0.1)
            seen["payload"] = handoff.payload
            person = operator(project)
            svc.claim_handoff(handoff, user=person)
            answer(handoff, person)
        except Exception as error:  # shown by the test, not lost in the thread
            seen["error"] = error
            raise
        finally:
            connection.close()

    thread = threading.Thread(target=act)
    thread.start()
    return thread, seen


@pytest.mark.parametrize(
    ("answer", "refunded", "model_reads"),
    [
        (lambda h, p: svc.accept(h, user=p), [("A-1", 120.0)], "refunded 120.0 on A-1"),
        # The SDK runs no call changed after the model made it: the edit reaches the model.
        (
            lambda h, p: svc.edit_and_accept(h, user=p, args={"order_id": "A-1", "amount": 80}),
            [],
            'Call refund again with exactly these arguments: {"amount": 80, "order_id": "A-1"}',
        ),
        (
            lambda h, p: svc.reject(h, user=p, reason="Over the limit: ask the manager."),
            [],
            "Over the limit: ask the manager.",
        ),
        # Dismissed (the handoff ends ignored): not called, and the model goes on without it.
        (
            lambda h, p: svc.ignore(h, user=p),
            [],
            "A person dismissed this request: refund was not called. Go on without it.",
        ),
    ],
    ids=["accept", "edit", "reject", "ignore"],
)
def test_a_person_answers_a_tool_approval(sb, oa_project, namespace, answer, refunded, model_reads):
    calls = []

    @function_tool(needs_approval=True)
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        calls.append((order_id, amount))
        return f"refunded {amount} on {order_id}"

    model = ScriptedModel()
    agent = Agent(name="refunds", model=model, tools=[refund])
    model.enqueue(
        [
            ResponseFunctionToolCall(
                id="fc",
                type="function_call",
                name="refund",
                arguments='{"order_id": "A-1", "amount": 120}',
                call_id="call-1",
            )
        ]
    )
    model.enqueue([said("Done.")])
    session = SwitchboardSession("refund-chat", sb, namespace=namespace)

    async def scenario():
        first = await Runner.run(agent, "Refund order A-1", session=session)
        assert [i.tool_name for i in first.interruptions] == ["refund"]
        sid = await session.switchboard_id()
        person, seen = person_answers(oa_project, sid, answer)
        try:
            state = await approve_in_switchboard(first, session, timeout=60)
        finally:
            person.join(timeout=30)
            assert "error" not in seen, seen.get("error")
        finished = await Runner.run(agent, state, session=session)
        return seen, finished

    seen, finished = asyncio.run(scenario())
    assert seen["payload"]["action_request"] == {
        "action": "refund",
        "args": {"order_id": "A-1", "amount": 120},
    }
    assert finished.final_output == "Done."
    assert calls == refunded
    # What the tool said (or the person's reason) is what the model read next.
    assert model_reads in str(model.calls[-1].input)
