"""One scripted agent per agent framework for the demo (seed_demo, simulate_agents): a LangGraph
graph of plain Python nodes, an OpenAI Agents SDK agent on the SDK's ScriptedModel, an ADK
LlmAgent on a scripted BaseLlm. No model is called; each framework's own runner drives the
real adapter of switchboard_client (SwitchboardSaver, SwitchboardSession,
SwitchboardSessionService) over the HTTP API, so their sessions are what a team's agents would
write, and each episode ends by asking a person through the framework's human-in-the-loop path
(interrupt(), needs_approval, a tool confirmation) as a handoff.

The frameworks are the client's optional extras, installed by the test environment
(`scripts/test`, the dev group) and not by `scripts/run`: installed() says which are here,
and the demo leaves the others out.

`wait` is how long an episode waits for the person's answer: 0 leaves the handoff open in the
queue (seed_demo), None waits (simulate_agents) and finishes the run with the answer.
"""

import asyncio
import importlib.util
import json
import queue
import threading
import time
from collections.abc import AsyncGenerator
from concurrent.futures import Future
from typing import Any

import httpx

FRAMEWORKS = ("langgraph", "openai-agents", "adk")
# The module each framework's adapter needs, beside switchboard_client.
_NEEDS = {"langgraph": "langgraph", "openai-agents": "agents", "adk": "google.adk"}
# The ADK agent's app (its sessions' agent is "adk:<app>", as the session service names it).
ADK_APP = "shop"
# Agent names in the dashboard.
AGENTS = {
    "langgraph": "langgraph-returns",
    "openai-agents": "openai-refunds",
    "adk": f"adk:{ADK_APP}",
}
NAMESPACE = "demo/"


def installed() -> list[str]:
    """The frameworks whose adapter can run here (the client and the framework installed)."""
    if importlib.util.find_spec("switchboard_client") is None:
        return []
    found = []
    for framework in FRAMEWORKS:
        try:
            if importlib.util.find_spec(_NEEDS[framework]) is not None:
                found.append(framework)
        except ModuleNotFoundError:  # google installed, google.adk not
            pass
    return found


class InProcessTransport(httpx.AsyncBaseTransport):
    """The adapters' requests, handed to the thread that serves them (run_in_process)."""

    def __init__(self, calls: queue.Queue[tuple[httpx.Request, Future[httpx.Response]] | None]):
        self.calls = calls

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        answered: Future[httpx.Response] = Future()
        plain = httpx.Request(request.method, request.url, headers=request.headers, content=body)
        self.calls.put((plain, answered))
        return await asyncio.wrap_future(answered)


def run_in_process(api_key: str, frameworks: list[str], names: dict[str, str]) -> dict[str, str]:
    """One episode per framework, each in the session `names[framework]`, leaving each request
    to a person open; what happened, per framework. No server: seed_demo runs before
    `scripts/run` starts one. The adapters run on an event loop in a thread of their own; their
    requests are answered here, in the calling thread, by Django's WSGI handler, so they use
    the caller's database connection (and its transaction, when there is one: a test's), and
    no ORM call is made on an event loop's thread (unless this thread runs one: see below).
    The connection is kept across requests, as Django's test client keeps it."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections, connections
    from switchboard_client import AsyncClient

    calls: queue.Queue[tuple[httpx.Request, Future[httpx.Response]] | None] = queue.Queue()
    outcome: dict[str, Any] = {}

    async def episodes() -> dict[str, str]:
        async with AsyncClient(
            "http://localhost", api_key, transport=InProcessTransport(calls)
        ) as client:
            return {fw: await run_episode(fw, client, names[fw], wait=0) for fw in frameworks}

    def agents() -> None:
        try:
            outcome["done"] = asyncio.run(episodes())
        except BaseException as error:  # raised in the calling thread below
            outcome["error"] = error
        finally:
            calls.put(None)

    wsgi = httpx.WSGITransport(app=WSGIHandler())

    def serve() -> None:
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            while (call := calls.get()) is not None:
                request, answered = call
                try:
                    response = wsgi.handle_request(request)
                    answered.set_result(
                        httpx.Response(
                            response.status_code,
                            headers=response.headers,
                            content=response.read(),
                        )
                    )
                except BaseException as error:
                    answered.set_exception(error)
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)

    def serve_elsewhere() -> None:
        try:
            serve()
        finally:
            connections.close_all()  # this thread's, opened for the requests

    loop_thread = threading.Thread(target=agents, name="demo-framework-agents", daemon=True)
    loop_thread.start()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        serve()  # no event loop runs in this thread: the requests are served here
    else:
        # One does (a caller's, Playwright's in the browser tests): Django runs its async
        # views (the handoff long-poll) by async_to_sync, which refuses a thread with a
        # running loop, so the requests are served by a thread of their own (and its own
        # database connection: the caller's transaction, if any, is not seen).
        server = threading.Thread(target=serve_elsewhere, name="demo-framework-server")
        server.start()
        server.join()
    loop_thread.join()
    if "error" in outcome:
        raise outcome["error"]
    done: dict[str, str] = outcome["done"]
    return done


async def run_episode(framework: str, client: Any, name: str, *, wait: float | None) -> str:
    """One conversation of the framework's agent in the session named `name` (its thread /
    session id), ending with a request to a person. What happened, in a line."""
    episode = {"langgraph": _langgraph, "openai-agents": _openai_agents, "adk": _adk}[framework]
    return await episode(client, name, wait)


# --- LangGraph: plain nodes, interrupt() for the refund ----------------------------------------


async def _langgraph(client: Any, name: str, wait: float | None) -> str:
    import operator
    from typing import Annotated, TypedDict

    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt
    from switchboard_client.langgraph import HandoffNotAnswered, SwitchboardSaver
    from switchboard_client.langgraph import arun_with_handoffs as run

    class Return(TypedDict):
        log: Annotated[list[str], operator.add]
        order: str

    def read_request(state: Return) -> dict[str, Any]:
        return {"log": [f"customer asks to return order {state['order']}"]}

    def check_order(state: Return) -> dict[str, Any]:
        return {"log": [f"order {state['order']}: delivered 12 days ago, 189.00 USD"]}

    def approve_refund(state: Return) -> dict[str, Any]:
        answer = interrupt(
            {
                "action_request": {
                    "action": "refund_return",
                    "args": {"order": state["order"], "amount": "189.00", "currency": "USD"},
                },
                "config": {
                    "allow_accept": True,
                    "allow_edit": True,
                    "allow_respond": True,
                    "allow_ignore": True,
                },
                "description": "Returns after 10 days need a person's approval.",
            }
        )
        return {"log": [f"refund decision: {answer['type']} {answer.get('args') or ''}".strip()]}

    builder = StateGraph(Return)
    builder.add_node("read_request", read_request)
    builder.add_node("check_order", check_order)
    builder.add_node("approve_refund", approve_refund)
    builder.add_edge(START, "read_request")
    builder.add_edge("read_request", "check_order")
    builder.add_edge("check_order", "approve_refund")
    builder.add_edge("approve_refund", END)
    saver = SwitchboardSaver(client, namespace=NAMESPACE, agent=AGENTS["langgraph"])
    graph = builder.compile(checkpointer=saver)
    config: Any = {"configurable": {"thread_id": name}}
    order = f"R-{sum(map(ord, name)) % 9000 + 1000}"
    try:
        result = await run(graph, {"log": [], "order": order}, config, timeout=wait, poll=30)
    except HandoffNotAnswered as error:
        return f"interrupt() asked a person ({error.handoff.status})"
    return str(result["log"][-1])


# --- OpenAI Agents SDK: ScriptedModel, a tool with needs_approval --------------------------------


async def _openai_agents(client: Any, name: str, wait: float | None) -> str:
    from agents import Agent, Runner, function_tool
    from agents.testing import ScriptedModel
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
    from switchboard_client.openai_agents import SwitchboardSession, approve_in_switchboard

    def said(text: str) -> ResponseOutputMessage:
        part = ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])
        return ResponseOutputMessage(
            id="msg", type="message", role="assistant", status="completed", content=[part]
        )

    @function_tool(needs_approval=True)
    def issue_refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        return f"refunded {amount:.2f} USD on {order_id}"

    model = ScriptedModel()
    model.enqueue([said("I found your order 7781: 2 items, 540.00 USD, arrived damaged.")])
    arguments = {"order_id": "7781", "amount": 540.0}
    model.enqueue(
        [
            ResponseFunctionToolCall(
                id="fc-1",
                type="function_call",
                name="issue_refund",
                arguments=json.dumps(arguments),
                call_id="call-refund-1",
            )
        ]
    )
    # After the person's answer (the refund made, or the model told why not): the report.
    model.enqueue([said("The refund is settled as the reviewer decided.")])
    agent = Agent(
        name=AGENTS["openai-agents"], model=model, tools=[issue_refund], instructions="Refunds."
    )
    session = SwitchboardSession(
        name,
        client,
        namespace=NAMESPACE,
        agent=AGENTS["openai-agents"],
        title="Order 7781 arrived damaged",
    )
    await Runner.run(agent, "My order 7781 arrived damaged.", session=session)
    result = await Runner.run(agent, "Please refund all of it.", session=session)
    while result.interruptions:
        try:
            state = await approve_in_switchboard(
                result, session, reason="Refund over 500 USD", timeout=wait
            )
        except TimeoutError:
            return "needs_approval asked a person"
        result = await Runner.run(agent, state, session=session)
    return str(result.final_output)


# --- ADK: a scripted BaseLlm, a tool that asks for confirmation ----------------------------------


async def _adk(client: Any, name: str, wait: float | None) -> str:
    from google.adk.agents.llm_agent import LlmAgent
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.adk.tools.function_tool import FunctionTool
    from google.genai import types
    from switchboard_client.adk import HandoffUnanswered, SwitchboardSessionService, ask_person

    class ScriptedLlm(BaseLlm):  # type: ignore[misc]
        """Answers each model call with the next scripted turn."""

        script: list[types.Content]
        calls: int = 0

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            self.calls += 1
            yield LlmResponse(content=self.script[min(self.calls, len(self.script)) - 1])

    def cancel_subscription(plan: str, refund_days: int) -> dict[str, Any]:
        """Cancel the customer's subscription and refund the unused days."""
        return {"cancelled": plan, "refunded_days": refund_days}

    def model(*parts: types.Part) -> types.Content:
        return types.Content(role="model", parts=list(parts))

    llm = ScriptedLlm(
        model="scripted",
        script=[
            model(types.Part(text="You are on the Team plan, renewed 9 days ago.")),
            model(
                types.Part.from_function_call(
                    name="cancel_subscription", args={"plan": "team", "refund_days": 21}
                )
            ),
            model(types.Part(text="Your subscription is settled as our reviewer decided.")),
        ],
    )
    tool = FunctionTool(cancel_subscription, require_confirmation=True)
    agent = LlmAgent(name="shop_assistant", model=llm, tools=[tool], output_key="last_reply")
    service = SwitchboardSessionService(client, namespace=NAMESPACE)
    app, user = ADK_APP, "customer-311"
    runner = Runner(agent=agent, app_name=app, session_service=service)
    if await service.get_session(app_name=app, user_id=user, session_id=name) is None:
        await service.create_session(
            app_name=app, user_id=user, session_id=name, state={"plan": "team"}
        )

    async def say(message: types.Content) -> list[Any]:
        return [
            e async for e in runner.run_async(user_id=user, session_id=name, new_message=message)
        ]

    await say(types.Content(role="user", parts=[types.Part(text="Which plan am I on?")]))
    paused = await say(
        types.Content(role="user", parts=[types.Part(text="Cancel it and refund me.")])
    )
    session = await service.get_session(app_name=app, user_id=user, session_id=name)
    assert session is not None
    try:
        answer = await ask_person(service, session, paused, timeout=wait, poll=30)
    except HandoffUnanswered:
        return "a tool confirmation asked a person"
    if answer is None:
        return "nothing to ask"
    finished = await say(answer)
    return str(finished[-1].content.parts[0].text) if finished else "finished"


class LiveEpisodes:
    """simulate_agents' framework agents: now and then an episode of each installed framework,
    in a thread of its own, against the running server; each waits (long-poll) for the
    person's answer in the queue, then finishes its run with it. One episode per framework at
    a time."""

    def __init__(self, base_url: str, api_key: str, log: Any) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.log = log
        self.frameworks = installed()
        self._running: dict[str, threading.Thread] = {}
        self._count = 0

    def step(self, chance: float, roll: float) -> None:
        """Start an episode of the next idle framework when `roll` < `chance`."""
        if roll >= chance:
            return
        idle = [fw for fw in self.frameworks if not self._busy(fw)]
        if not idle:
            return
        framework = idle[self._count % len(idle)]
        self._count += 1
        name = f"{framework}-live-{time.strftime('%Y%m%d-%H%M%S')}"
        thread = threading.Thread(
            target=self._run, args=(framework, name), daemon=True, name=f"agent-{framework}"
        )
        self._running[framework] = thread
        self.log(f"{AGENTS[framework]}: started {name} ({framework})")
        thread.start()

    def _busy(self, framework: str) -> bool:
        thread = self._running.get(framework)
        return thread is not None and thread.is_alive()

    def _run(self, framework: str, name: str) -> None:
        from switchboard_client import AsyncClient

        async def episode() -> str:
            async with AsyncClient(self.base_url, self.api_key) as client:
                return await run_episode(framework, client, name, wait=None)

        agent = AGENTS[framework]
        try:
            self.log(f"{agent}: {name} finished: {asyncio.run(episode())}")
        except Exception as error:  # the server stopped, or the person closed the session
            self.log(f"{agent}: {name} stopped: {type(error).__name__}: {error}")
