"""ADK's human in the loop answered in Switchboard's handoff queue, end to end: a real Runner
pauses on a tool confirmation (or on adk_request_input), switchboard_client.adk.ask_person
turns the pause into a handoff, a person answers it through the server's own services (in this
process, as the dashboard would), and the run finishes with the answer."""

import asyncio
import threading
from typing import Any

from google.adk.agents.llm_agent import LlmAgent
from google.adk.runners import Runner
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.long_running_tool import LongRunningFunctionTool
from google.genai import types
from switchboard_client import AsyncClient, RetryPolicy
from switchboard_client.adk import SwitchboardSessionService, ask_person
from test_adk_runner import ScriptedLlm, model_turn

from handoffs_app.models import Handoff
from handoffs_app.services import handoffs as svc
from tests.handoffs.helpers import operator
from tests.handoffs.readiness import eventually

FAST = RetryPolicy(max_retries=2, backoff=0.05, max_backoff=0.2)
refunds: list[dict[str, Any]] = []


def refund(order: str, amount: float) -> dict[str, Any]:
    """Refund an order."""
    refunds.append({"order": order, "amount": amount})
    return {"refunded": order, "amount": amount}


def wait_for_shipment(order: str) -> None:
    """Wait until a person reports the order shipped."""
    return None


def agent(tool, call: types.Part) -> LlmAgent:
    return LlmAgent(
        name="support",
        model=ScriptedLlm(
            model="scripted", script=[model_turn(call), model_turn(types.Part(text="Done."))]
        ),
        tools=[tool],
    )


def run_with_a_person(server_url, api_key, project, tool, call, answer):
    """Run the agent until it pauses, ask a person (who answers with `answer(handoff, user)`
    here, in the test's thread), resume the run with the answer; what the run and the store
    hold afterwards."""
    person = operator(project)
    found: dict[str, Any] = {}

    async def flow():
        async with AsyncClient(server_url, api_key, retry=FAST) as client:
            service = SwitchboardSessionService(client, namespace="hitl:")
            runner = Runner(agent=agent(tool, call), app_name="shop", session_service=service)
            session = await service.create_session(app_name="shop", user_id="ada", session_id="t1")
            message = types.Content(role="user", parts=[types.Part(text="Refund order A-1")])
            paused = [
                e
                async for e in runner.run_async(user_id="ada", session_id="t1", new_message=message)
            ]
            session = await service.get_session(app_name="shop", user_id="ada", session_id="t1")
            resume = await ask_person(service, session, paused, timeout=60, poll=1)
            found["resume"] = resume
            finished = [
                e
                async for e in runner.run_async(user_id="ada", session_id="t1", new_message=resume)
            ]
            found["final"] = finished[-1]
            found["stored"] = await service.get_session(
                app_name="shop", user_id="ada", session_id="t1"
            )
            item = await client.find_session("hitl:adk:s:shop:ada:t1")
            found["status"] = (await client.get_session(item.id)).status

    def work():
        try:
            asyncio.run(flow())
        except BaseException as error:  # reported by the test's thread
            found["error"] = error

    worker = threading.Thread(target=work)
    worker.start()
    eventually(
        lambda: "error" in found or Handoff.objects.filter(status="open").exists(),
        timeout=60,
        what="a handoff",
    )
    if "error" in found:
        raise found["error"]
    handoff = Handoff.objects.get(status="open")
    svc.claim_handoff(handoff, user=person)
    answer(handoff, person)
    worker.join(timeout=60)
    assert not worker.is_alive()
    if "error" in found:
        raise found["error"]
    return handoff, found


def test_a_tool_confirmation_is_an_approval_the_person_accepts(server_url, api_key, project):
    refunds.clear()
    tool = FunctionTool(refund, require_confirmation=True)
    call = types.Part.from_function_call(name="refund", args={"order": "A-1", "amount": 12.5})
    handoff, found = run_with_a_person(
        server_url, api_key, project, tool, call, lambda h, user: svc.accept(h, user=user)
    )
    assert handoff.kind == "approval"
    assert handoff.payload["action_request"] == {
        "action": "refund",
        "args": {"order": "A-1", "amount": 12.5},
    }
    (part,) = found["resume"].parts
    assert part.function_response.name == "adk_request_confirmation"
    assert part.function_response.response["confirmed"] is True
    # The tool ran once, after the person's yes, and the run finished.
    assert refunds == [{"order": "A-1", "amount": 12.5}]
    assert found["final"].content.parts[0].text == "Done."
    results = [
        r.response
        for e in found["stored"].events
        for r in e.get_function_responses()
        if r.name == "refund"
    ]
    assert results[-1] == {"refunded": "A-1", "amount": 12.5}
    assert found["status"] == "resumed"


def test_a_rejected_confirmation_does_not_run_the_tool(server_url, api_key, project):
    refunds.clear()
    tool = FunctionTool(refund, require_confirmation=True)
    call = types.Part.from_function_call(name="refund", args={"order": "A-2", "amount": 99.0})
    handoff, found = run_with_a_person(
        server_url,
        api_key,
        project,
        tool,
        call,
        lambda h, user: svc.reject(h, user=user, reason="too much"),
    )
    assert found["resume"].parts[0].function_response.response["confirmed"] is False
    assert refunds == []
    assert found["final"].content.parts[0].text == "Done."


def test_an_ignored_confirmation_does_not_run_the_tool_and_the_run_goes_on(
    server_url, api_key, project
):
    refunds.clear()
    tool = FunctionTool(refund, require_confirmation=True)
    call = types.Part.from_function_call(name="refund", args={"order": "A-4", "amount": 5.0})
    handoff, found = run_with_a_person(
        server_url, api_key, project, tool, call, lambda h, user: svc.ignore(h, user=user)
    )
    assert Handoff.objects.get(pk=handoff.pk).status == "ignored"
    response = found["resume"].parts[0].function_response.response
    assert response == {"confirmed": False, "payload": {"ignored": True}}
    assert refunds == []
    assert found["final"].content.parts[0].text == "Done."
    assert found["status"] == "resumed"


def test_a_long_running_tool_gets_the_persons_answer_as_its_result(server_url, api_key, project):
    tool = LongRunningFunctionTool(wait_for_shipment)
    call = types.Part.from_function_call(name="wait_for_shipment", args={"order": "A-3"})
    handoff, found = run_with_a_person(
        server_url,
        api_key,
        project,
        tool,
        call,
        lambda h, user: svc.respond(h, user=user, text="Shipped on Monday."),
    )
    assert handoff.kind == "question" and "wait_for_shipment" in handoff.payload["question"]
    response = found["resume"].parts[0].function_response
    assert (response.name, response.response) == (
        "wait_for_shipment",
        {"result": "Shipped on Monday."},
    )
    stored = [
        r.response
        for e in found["stored"].events
        for r in e.get_function_responses()
        if r.name == "wait_for_shipment"
    ]
    assert stored[-1] == {"result": "Shipped on Monday."}
    assert found["final"].content.parts[0].text == "Done."
