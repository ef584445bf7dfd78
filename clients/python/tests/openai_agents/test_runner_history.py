"""A real Runner.run, with no network (the SDK's ScriptedModel), once on the SDK's default store
(SQLiteSession) and once on SwitchboardSession: the stored histories are equal, turn after
turn, through a tool call, in the async, sync and streamed runners."""

import asyncio

from agents import Agent, Runner, function_tool
from agents.memory.sqlite_session import SQLiteSession
from agents.testing import ScriptedModel
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from switchboard_client.openai_agents import SwitchboardSession


def said(text):
    return ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])],
    )


def calls(name, arguments, call_id):
    return ResponseFunctionToolCall(
        id="fc", type="function_call", name=name, arguments=arguments, call_id=call_id
    )


@function_tool
def order_status(order_id: int) -> str:
    """The status of an order."""
    return f"order {order_id} shipped"


def conversation(session):
    """Three turns on `session` (one with a tool call), each runner flavour once; the model's
    inputs, turn after turn."""
    model = ScriptedModel()
    agent = Agent(name="shop", instructions="Help.", model=model, tools=[order_status])
    model.enqueue([calls("order_status", '{"order_id": 7}', "call-1")])
    model.enqueue([said("Order 7 shipped.")])
    asyncio.run(Runner.run(agent, "Where is order 7?", session=session))

    model.enqueue([said("You're welcome.")])
    Runner.run_sync(agent, "Thanks", session=session)

    async def streamed():
        result = Runner.run_streamed(agent, "Bye", session=session)
        async for _ in result.stream_events():
            pass

    model.enqueue([said("Goodbye.")])
    asyncio.run(streamed())
    return [call.input for call in model.calls]


def test_a_run_stores_what_the_default_store_stores(sb, namespace):
    sqlite = SQLiteSession("customer-7")
    switchboard = SwitchboardSession("customer-7", sb, namespace=namespace)

    seen_by_sqlite_model = conversation(sqlite)
    seen_by_switchboard_model = conversation(switchboard)

    stored = asyncio.run(sqlite.get_items())
    # Three user messages, the tool call and its output, three answers.
    assert len(stored) == 8
    assert asyncio.run(switchboard.get_items()) == stored
    assert asyncio.run(switchboard.get_items(4)) == asyncio.run(sqlite.get_items(4))
    # The model saw the same history from either store.
    assert seen_by_switchboard_model == seen_by_sqlite_model

    log = sb.events(sb.find_session(namespace + "customer-7").id).events
    assert [(e.kind, e.role) for e in log] == [
        ("message", "user"),
        ("tool_call", ""),
        ("tool_result", ""),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
    ]
    assert [e.content["text"] for e in log if e.kind == "message"] == [
        "Where is order 7?",
        "Order 7 shipped.",
        "Thanks",
        "You're welcome.",
        "Bye",
        "Goodbye.",
    ]
    assert [e.content["item"] for e in log] == stored
