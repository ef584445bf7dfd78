"""Each agent framework's human in the loop, end to end in a browser (issue 25): the framework's
run (no model calls: plain LangGraph nodes, the OpenAI Agents SDK's ScriptedModel, a scripted
ADK BaseLlm) goes on in a thread of this process against the live server with an API key, asks
through its adapter, the request appears in the queue page, an operator signs in, claims and
answers it there, and the run finishes with that answer. The LangGraph test goes on to fork the
thread on the session page and continues the fork by the name the fork's page shows.
"""

import asyncio
import json
import operator
import re
import threading
import time
from collections.abc import AsyncGenerator, Callable
from typing import Annotated, Any, TypedDict

import pytest
from agents import Agent, Runner, function_tool
from agents.testing import ScriptedModel
from google.adk.agents.llm_agent import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner as AdkRunner
from google.adk.tools.function_tool import FunctionTool
from google.genai import types
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from playwright.sync_api import Page, expect
from switchboard_client import AsyncClient, Client
from switchboard_client.adk import SwitchboardSessionService, ask_person
from switchboard_client.langgraph import SwitchboardSaver, run_with_handoffs
from switchboard_client.openai_agents import SwitchboardSession, approve_in_switchboard

from core.models import Role
from handoffs_app.models import Handoff
from sessions_app.models import Session
from tests.browser.conftest import ARTIFACTS, sign_in
from tests.browser.test_content_security_policy import watched  # noqa: F401  (the CSP watch)
from tests.dashboard.conftest import Team, team  # noqa: F401
from tests.factories import make_api_key, make_member

pytestmark = pytest.mark.django_db(transaction=True)

# The run asks within seconds of starting; a loaded machine gets more.
ASKED_MS = 30_000
# An answer shows on the page once its request and the push it makes are through: well under a
# second here, past the 5 s default on a CI machine running two suites and their browsers.
ANSWERED_MS = 15_000


class Run:
    """A framework run in a thread: what it returned, or the error it raised."""

    def __init__(self, main: Callable[[], Any]) -> None:
        self.outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                self.outcome["result"] = main()
            except BaseException as error:  # shown by result(), not lost in the thread
                self.outcome["error"] = error

        self.thread = threading.Thread(target=work, daemon=True)
        self.thread.start()

    def result(self, timeout: float = 60) -> Any:
        self.thread.join(timeout=timeout)
        assert not self.thread.is_alive(), "the framework run did not finish"
        if "error" in self.outcome:
            raise self.outcome["error"]
        return self.outcome["result"]


def open_next_request(page: Page, live_url: str, team: Team, run: Run, shot: str = "") -> str:
    """In the queue: wait for the next open request (live), open its workspace and claim it.
    Returns the handoff's id."""
    page.goto(f"{live_url}/p/{team.project.pk}/handoffs/")
    expect(page.locator(".live-dot.on")).to_be_attached()
    row = page.locator("#queue-rows tr.queue-row[data-status=open]").first
    deadline = time.monotonic() + ASKED_MS / 1000
    while not row.count():
        assert "error" not in run.outcome, run.outcome.get("error")
        assert time.monotonic() < deadline, "the framework asked nobody"
        page.wait_for_timeout(100)
    handoff_id = (row.get_attribute("id") or "").removeprefix("handoff-row-")
    if shot:
        page.screenshot(path=shot, full_page=True)
    page.goto(f"{live_url}/handoffs/{handoff_id}/")
    page.click("#claim-button")
    expect(page.locator(".you-hold")).to_be_visible()
    return handoff_id


def hand_back(page: Page) -> None:
    page.fill("#hand-back-reason", "Answered in the queue.")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#hand-back-button")
    expect(page.locator("#handoff-status")).to_have_text("Handed back")


# --- LangGraph: interrupt() -> a question; the answer resumes the thread ----------------------


class Ticket(TypedDict):
    log: Annotated[list[str], operator.add]


def ticket_graph(saver):

    def ask(state):
        address = interrupt(
            {"question": "Ship the replacement to which address?", "choices": ["old", "new"]}
        )
        return {"log": [f"address: {address}"]}

    builder = StateGraph(Ticket)
    builder.add_node("triage", lambda state: {"log": ["triaged"]})
    builder.add_node("ask", ask)
    builder.add_node("reply", lambda state: {"log": [f"replied after {len(state['log'])}"]})
    builder.add_edge(START, "triage")
    builder.add_edge("triage", "ask")
    builder.add_edge("ask", "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def test_langgraph_interrupt_answered_in_the_queue_and_the_fork_continued(
    team: Team, live_url, page, screenshot
):

    alice = make_member(team.project, Role.OPERATOR, "alice")
    _, raw_key = make_api_key(team.project)
    client = Client(live_url, raw_key)
    graph = ticket_graph(SwitchboardSaver(client, namespace="support/"))
    config = {"configurable": {"thread_id": "ticket-7"}}
    run = Run(lambda: run_with_handoffs(graph, {"log": ["hello"]}, config, poll=1))

    sign_in(page, live_url, alice.username)
    handoff_id = open_next_request(page, live_url, team, run)
    handoff = Handoff.objects.get(pk=handoff_id)
    # The run waits at the interrupt: where the fork below is made.
    asked_at = Session.objects.get(pk=handoff.session_id).head_seq
    expect(page.locator("#handoff-request")).to_contain_text(
        "Ship the replacement to which address?"
    )
    page.check("input[name=choice][value=new]")
    page.fill("#respond-text", "the new address")
    page.click("#send-answer-button")
    expect(page.locator("#handoff-status")).to_have_text("Answered", timeout=ANSWERED_MS)
    result = run.result()
    assert result == {"log": ["hello", "triaged", "address: the new address", "replied after 3"]}
    hand_back(page)

    # The session page, back at the interrupt: fork there, and read the fork's name.
    page.goto(f"{live_url}/sessions/{handoff.session_id}/?at={asked_at}")
    page.fill("#fork-title", "Ticket 7, other address")
    page.get_by_role("button", name=f"Fork at seq {asked_at}").click()
    expect(page.get_by_role("heading", name="Ticket 7, other address")).to_be_visible()
    fork = Session.objects.get(parent_id=handoff.session_id)
    name = page.locator("#framework-hint code.framework-id").inner_text()
    assert name == f"switchboard:{fork.pk}"
    screenshot("loops_fork_hint")
    # The graph, given that name, is at the interrupt again and goes on with another answer.
    forked = {"configurable": {"thread_id": name}}
    at_fork = graph.get_state(forked)
    assert at_fork.values == {"log": ["hello", "triaged"]} and at_fork.next == ("ask",)
    again = graph.invoke(Command(resume="the old address"), forked)
    assert again == {"log": ["hello", "triaged", "address: the old address", "replied after 3"]}
    assert graph.get_state(config).values == result  # the parent thread as it was


# --- OpenAI Agents SDK: needs_approval -> an approval; edited arguments go back into the run --


def said(text: str):

    return ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])],
    )


def refund_call(call_id: str, arguments: dict[str, Any]):

    return ResponseFunctionToolCall(
        id=f"fc-{call_id}",
        type="function_call",
        name="refund",
        arguments=json.dumps(arguments),
        call_id=call_id,
    )


def test_openai_agents_approval_with_edited_arguments_in_the_queue(
    team: Team, live_url, page, screenshot
):

    refunded: list[tuple[str, float]] = []

    @function_tool(needs_approval=True)
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        refunded.append((order_id, amount))
        return f"refunded {amount} on {order_id}"

    model = ScriptedModel()
    # The model proposes 120; told the person's edit, it proposes 80; then it reports.
    model.enqueue([refund_call("call-1", {"order_id": "A-1", "amount": 120})])
    model.enqueue([refund_call("call-2", {"order_id": "A-1", "amount": 80})])
    model.enqueue([said("Refunded 80 on A-1, as approved.")])
    agent = Agent(name="refunds", model=model, tools=[refund])
    alice = make_member(team.project, Role.OPERATOR, "alice")
    _, raw_key = make_api_key(team.project)
    session = SwitchboardSession("customer-42", Client(live_url, raw_key), agent="refunds")

    async def until_done():
        result = await Runner.run(agent, "Refund order A-1, it came late", session=session)
        while result.interruptions:
            state = await approve_in_switchboard(result, session, timeout=60)
            result = await Runner.run(agent, state, session=session)
        return result.final_output

    run = Run(lambda: asyncio.run(until_done()))
    sign_in(page, live_url, alice.username)
    first = open_next_request(
        page, live_url, team, run, shot=str(screenshot_dir() / "loops_queue_openai.png")
    )
    expect(page.locator("#proposed-action")).to_have_text("refund")
    expect(page.locator("#proposed-args")).to_contain_text("120")
    page.fill("#edit-args", json.dumps({"order_id": "A-1", "amount": 80}))
    page.click("#preview-edit-button")
    expect(page.locator("#preview-diff .diff-add")).to_contain_text(["80"])
    page.click("#confirm-button")
    expect(page.locator("#handoff-status")).to_have_text("Answered", timeout=ANSWERED_MS)
    hand_back(page)
    # The edit reached the model, whose new call (with 80) asks again.
    second = open_next_request(page, live_url, team, run)
    assert second != first
    expect(page.locator("#proposed-args")).to_contain_text("80")
    page.click("#accept-button")
    expect(page.locator("#handoff-status")).to_have_text("Answered", timeout=ANSWERED_MS)
    assert run.result() == "Refunded 80 on A-1, as approved."
    assert refunded == [("A-1", 80.0)]  # the tool ran once, with the person's arguments
    assert "Call refund again with exactly these arguments" in str(model.calls[1].input)
    screenshot("loops_openai_answered")


# --- ADK: a tool confirmation -> an approval; the answer is the function response -------------


class ScriptedLlm(BaseLlm):
    """Each model call answered by the next scripted turn: no network."""

    script: list[types.Content]
    calls: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.calls += 1
        yield LlmResponse(content=self.script[self.calls - 1])


def test_adk_tool_confirmation_approved_in_the_queue(team: Team, live_url, page):

    refunded: list[dict[str, Any]] = []

    def refund(order: str, amount: float) -> dict[str, Any]:
        """Refund an order."""
        refunded.append({"order": order, "amount": amount})
        return {"refunded": order, "amount": amount}

    model = ScriptedLlm(
        model="scripted",
        script=[
            types.Content(
                role="model",
                parts=[
                    types.Part.from_function_call(
                        name="refund", args={"order": "B-9", "amount": 30.0}
                    )
                ],
            ),
            types.Content(role="model", parts=[types.Part(text="Refund of 30 issued.")]),
        ],
    )
    agent = LlmAgent(
        name="support", model=model, tools=[FunctionTool(refund, require_confirmation=True)]
    )
    alice = make_member(team.project, Role.OPERATOR, "alice")
    _, raw_key = make_api_key(team.project)

    def say(text: str) -> types.Content:
        return types.Content(role="user", parts=[types.Part(text=text)])

    async def until_done():
        async with AsyncClient(live_url, raw_key) as client:
            service = SwitchboardSessionService(client, namespace="shop/")
            runner = AdkRunner(agent=agent, app_name="shop", session_service=service)
            await service.create_session(app_name="shop", user_id="ada", session_id="s1")
            paused = [
                e
                async for e in runner.run_async(
                    user_id="ada", session_id="s1", new_message=say("Refund B-9")
                )
            ]
            session = await service.get_session(app_name="shop", user_id="ada", session_id="s1")
            answer = await ask_person(service, session, paused, timeout=60, poll=1)
            finished = [
                e
                async for e in runner.run_async(user_id="ada", session_id="s1", new_message=answer)
            ]
            return finished[-1].content.parts[0].text

    run = Run(lambda: asyncio.run(until_done()))
    sign_in(page, live_url, alice.username)
    open_next_request(page, live_url, team, run, shot=str(screenshot_dir() / "loops_queue_adk.png"))
    expect(page.locator("#proposed-action")).to_have_text("refund")
    expect(page.locator("#proposed-args")).to_contain_text("B-9")
    page.click("#accept-button")
    expect(page.locator("#handoff-status")).to_have_text("Answered", timeout=ANSWERED_MS)
    assert run.result() == "Refund of 30 issued."
    assert refunded == [{"order": "B-9", "amount": 30.0}]  # run once, after the person's yes
    # ask_person resumed the session for the run; the page says so.
    expect(page.locator("#handoff-status")).to_have_text(re.compile("Answered|Handed back"))


def screenshot_dir():
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
