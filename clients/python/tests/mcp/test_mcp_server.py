"""The MCP server (switchboard_client.mcp) as an MCP client sees it: launched as a subprocess
and spoken to over stdio by the official SDK's ClientSession, against a live Switchboard
server. A person answers the handoffs through the server's own services (in the test's thread,
as the dashboard would) while the tool call waits in another thread.

(This folder has no __init__.py on purpose: a package named `mcp` here would shadow the SDK.)
"""

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client
from switchboard_client import AsyncClient

from handoffs_app.models import Handoff
from handoffs_app.services import handoffs as svc
from sessions_app.models import Event, Session
from tests.handoffs.helpers import operator
from tests.handoffs.readiness import eventually

NAMESPACE = "mcp-tests/"


def server_params(server_url: str, api_key: str, *, command: str | None = None):
    """The MCP server as a client configures it: a command and its environment."""
    if command is None:
        command, args = sys.executable, ["-m", "switchboard_client.mcp"]
    else:
        args = []
    return StdioServerParameters(
        command=command,
        args=[*args, "--namespace", NAMESPACE, "--poll", "1"],
        env={"SWITCHBOARD_URL": server_url, "SWITCHBOARD_API_KEY": api_key},
    )


def with_mcp(params, work) -> Any:
    """`await work(session)` on an initialised MCP client session with the server; its stderr
    (logs) to a file, as a desktop client would keep it."""

    async def connect():
        with tempfile.TemporaryFile("w+") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await work(session)

    return asyncio.run(connect())


class InBackground:
    """`with_mcp(params, work)` in a thread, while the test acts as the person."""

    def __init__(self, params, work) -> None:
        self.outcome: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, args=(params, work), daemon=True)
        self.thread.start()

    def _run(self, params, work) -> None:
        try:
            self.outcome["result"] = with_mcp(params, work)
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            self.outcome["error"] = error

    def result(self, timeout: float = 60) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the MCP call did not finish"
        if "error" in self.outcome:
            raise self.outcome["error"]
        return self.outcome["result"]


def call(name: str, arguments: dict[str, Any], progress: list | None = None):
    async def work(session: ClientSession):
        async def noted(value: float, total: float | None, message: str | None) -> None:
            if progress is not None:
                progress.append((value, total, message))

        return await session.call_tool(name, arguments, progress_callback=noted)

    return work


def pending_handoff(name: str) -> Handoff:
    """The handoff the tool asked on session `name`, once it is in the queue."""
    found = Handoff.objects.filter(session__external_id=NAMESPACE + name)
    eventually(lambda: found.exists(), timeout=60, what="the handoff in the queue")
    return found.get()


def error_text(result) -> str:
    assert result.is_error, result
    return " ".join(block.text for block in result.content)


def test_it_lists_its_three_tools_with_their_schemas(server_url, api_key):
    async def work(session: ClientSession):
        return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in with_mcp(server_params(server_url, api_key), work)}
    assert sorted(tools) == ["ask_person", "read_state", "record_event"]
    ask = tools["ask_person"].input_schema
    assert ask["required"] == ["session", "kind", "prompt"]
    assert ask["properties"]["kind"]["enum"] == ["question", "approval", "takeover"]
    assert {"choices", "action", "args", "timeout_seconds"} <= set(ask["properties"])
    outcome = tools["ask_person"].output_schema["properties"]["outcome"]["enum"]
    assert {"answered", "approved", "rejected", "handed_back", "timed_out"} <= set(outcome)
    record = tools["record_event"].input_schema
    assert record["required"] == ["session", "kind", "content"]
    assert "fact" in record["properties"]["kind"]["enum"]
    assert record["properties"]["tier"]["anyOf"][0]["enum"] == ["transient", "durable"]
    assert tools["read_state"].input_schema["required"] == ["session"]
    assert tools["record_event"].output_schema["required"] == ["seq", "head_seq", "session_id"]


def test_recorded_events_are_read_back_as_state(server_url, api_key):
    async def work(session: ClientSession):
        results = []
        for kind, content in [
            ("message", "Where is my order?"),
            ("state", {"step": "lookup", "order": "A-1"}),
            ("fact", {"key": "customer", "value": {"name": "Ada"}}),
            ("state", {"step": "answer"}),
        ]:
            arguments = {"session": "ticket-1", "kind": kind, "content": content}
            if kind == "message":
                arguments["role"] = "user"
            results.append(await session.call_tool("record_event", arguments))
        results.append(await session.call_tool("read_state", {"session": "ticket-1"}))
        results.append(await session.call_tool("read_state", {"session": "ticket-1", "at_seq": 2}))
        return results

    *recorded, now, then = with_mcp(server_params(server_url, api_key), work)
    assert not any(r.is_error for r in [*recorded, now, then])
    seqs = [r.structured_content["seq"] for r in recorded]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    stored = Session.objects.get(external_id=NAMESPACE + "ticket-1")
    assert stored.agent.name == "mcp"
    assert {r.structured_content["session_id"] for r in recorded} == {str(stored.pk)}
    message = Event.objects.get(session_id=stored.pk, seq=seqs[0])
    assert (message.kind, message.role, message.content) == (
        "message",
        "user",
        {"text": "Where is my order?"},
    )
    state = now.structured_content
    assert state["state"] == {"step": "answer", "order": "A-1"}
    assert state["facts"] == {"customer": {"name": "Ada"}}
    assert state["seq"] == seqs[-1]
    # The structured content is also the text a model reads.
    assert json.loads(now.content[0].text) == state
    assert then.structured_content["state"] == {"step": "lookup", "order": "A-1"}
    assert then.structured_content["facts"] == {}


def test_a_session_named_by_its_switchboard_id_is_that_session(server_url, api_key, sb):
    """`switchboard:<id>`, as a dashboard fork's page gives it: no session of that name made."""
    parent = sb.open_session("elsewhere")
    head = sb.append(parent.id, [{"kind": "state", "content": {"step": "before"}}]).head_seq
    fork = sb.fork(parent.id, head)
    name = f"switchboard:{fork.id}"

    async def work(session: ClientSession):
        recorded = await session.call_tool(
            "record_event", {"session": name, "kind": "note", "content": "picked up the fork"}
        )
        return recorded, await session.call_tool("read_state", {"session": name})

    recorded, state = with_mcp(server_params(server_url, api_key), work)
    assert recorded.structured_content["session_id"] == fork.id
    assert state.structured_content["session_id"] == fork.id
    assert state.structured_content["state"] == {"step": "before"}
    assert Event.objects.filter(
        session_id=fork.id, kind="note", content={"text": "picked up the fork"}
    ).exists()
    assert not Session.objects.filter(external_id__startswith=NAMESPACE).exists()


def test_a_question_waits_for_the_persons_answer(server_url, api_key, project):
    progress: list = []
    asked = {"session": "q-1", "kind": "question", "prompt": "Ship to the old address?"}
    asked["choices"] = ["yes", "no"]
    waiting = InBackground(server_params(server_url, api_key), call("ask_person", asked, progress))
    handoff = pending_handoff("q-1")
    assert (handoff.kind, handoff.status, handoff.reason) == (
        "question",
        "open",
        "Ship to the old address?",
    )
    assert handoff.payload == {"question": "Ship to the old address?", "choices": ["yes", "no"]}
    assert handoff.session.status == "paused"
    # Still waiting after a few polls, telling the client so.
    eventually(lambda: len(progress) >= 2, timeout=30, what="progress notifications")
    assert waiting.thread.is_alive()
    person = operator(project)
    svc.claim_handoff(handoff, user=person)
    svc.respond(handoff, user=person, text="Yes, the old one.", choice="yes")

    result = waiting.result()
    assert not result.is_error, result
    answer = result.structured_content
    assert answer["outcome"] == "answered" and answer["status"] == "answered"
    assert (answer["text"], answer["choice"]) == ("Yes, the old one.", "yes")
    assert answer["handoff_id"] == str(handoff.pk) and answer["by"]
    values = [value for value, _, _ in progress]
    assert values == sorted(values) and all(total is None for _, total, _ in progress)
    assert f"handoff {handoff.pk} is open" in progress[0][2]
    # The agent has its answer and its session back.
    handoff.session.refresh_from_db()
    assert handoff.session.status == "resumed"


def test_an_approval_comes_back_with_the_persons_edited_arguments(server_url, api_key, project):
    asked = {
        "session": "refund-1",
        "kind": "approval",
        "prompt": "Refund a late order",
        "action": "refund",
        "args": {"order": "A-1", "amount": "120.00"},
    }
    waiting = InBackground(server_params(server_url, api_key), call("ask_person", asked))
    handoff = pending_handoff("refund-1")
    assert handoff.payload["action_request"] == {"action": "refund", "args": asked["args"]}
    assert handoff.payload["description"] == "Refund a late order"
    person = operator(project)
    svc.claim_handoff(handoff, user=person)
    svc.edit_and_accept(handoff, user=person, args={"order": "A-1", "amount": "80.00"})

    answer = waiting.result().structured_content
    assert answer["outcome"] == "approved" and answer["edited"] is True
    assert (answer["action"], answer["args"]) == ("refund", {"order": "A-1", "amount": "80.00"})


def test_a_rejected_approval_says_why(server_url, api_key, project):
    asked = {"session": "refund-2", "kind": "approval", "prompt": "Refund?", "action": "refund"}
    waiting = InBackground(server_params(server_url, api_key), call("ask_person", asked))
    handoff = pending_handoff("refund-2")
    assert handoff.payload["action_request"]["args"] == {}
    person = operator(project)
    svc.claim_handoff(handoff, user=person)
    svc.reject(handoff, user=person, reason="Delivered on time.")

    answer = waiting.result().structured_content
    assert answer["outcome"] == "rejected" and answer["reason"] == "Delivered on time."
    assert answer["args"] is None and answer["edited"] is False


def test_an_ignored_approval_is_no_verdict(server_url, api_key, project):
    asked = {"session": "refund-3", "kind": "approval", "prompt": "Refund?", "action": "refund"}
    waiting = InBackground(server_params(server_url, api_key), call("ask_person", asked))
    handoff = pending_handoff("refund-3")
    person = operator(project)
    svc.claim_handoff(handoff, user=person)
    svc.ignore(handoff, user=person)

    answer = waiting.result().structured_content
    assert (answer["outcome"], answer["status"]) == ("ignored", "ignored")
    assert answer["reason"] is None and answer["args"] is None


def test_a_takeover_waits_until_the_person_hands_back(server_url, api_key, project):
    asked = {"session": "angry-1", "kind": "takeover", "prompt": "The customer asks for a human."}
    waiting = InBackground(server_params(server_url, api_key), call("ask_person", asked))
    handoff = pending_handoff("angry-1")
    person = operator(project)
    svc.claim_handoff(handoff, user=person)
    svc.take_over(handoff, user=person)
    svc.send_human_message(handoff, user=person, text="Hello, I am Grace; refund done.")
    # Taken over is not the end: the agent waits until the conversation is handed back.
    eventually(
        lambda: Handoff.objects.get(pk=handoff.pk).status == "taken_over", timeout=5, what="x"
    )
    waiting.thread.join(2.5)
    assert waiting.thread.is_alive()
    svc.hand_back(handoff, user=person, reason="sorted out")

    answer = waiting.result().structured_content
    assert answer["outcome"] == "handed_back"
    assert answer["messages"] == ["Hello, I am Grace; refund done."]


def test_no_answer_in_time_withdraws_the_request(server_url, api_key):
    asked = {"session": "late-1", "kind": "question", "prompt": "Anyone?", "timeout_seconds": 2}
    result = with_mcp(server_params(server_url, api_key), call("ask_person", asked))
    assert not result.is_error, result
    answer = result.structured_content
    assert (answer["outcome"], answer["status"]) == ("timed_out", "cancelled")
    handoff = Handoff.objects.get(pk=answer["handoff_id"])
    assert handoff.status == "cancelled"
    assert handoff.session.status == "resumed"


def test_a_cancelled_call_withdraws_the_request(server_url, api_key):
    asked = {"session": "gone-1", "kind": "question", "prompt": "Still there?"}

    async def work(session: ClientSession):
        async with AsyncClient(server_url, api_key) as person_side:

            async def status() -> str | None:
                found = (await person_side.list_handoffs()).handoffs
                return found[0].status if found else None

            call_task = asyncio.create_task(session.call_tool("ask_person", asked))
            while await status() is None:  # until the question is in the queue
                await asyncio.sleep(0.05)
            call_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call_task
            # The client stays connected while the server withdraws the request.
            for _ in range(200):
                if await status() != "open":
                    break
                await asyncio.sleep(0.05)
            return await status()

    assert with_mcp(server_params(server_url, api_key), work) == "cancelled"


def test_bad_arguments_are_tool_errors_naming_what_is_wrong(server_url, api_key):
    async def work(session: ClientSession):
        calls = [
            ("ask_person", {"session": "bad-1", "kind": "maybe", "prompt": "?"}),
            ("ask_person", {"session": "bad-1", "kind": "approval", "prompt": "Do it?"}),
            ("ask_person", {"session": "bad-1", "kind": "question", "prompt": "?", "choices": []}),
            ("record_event", {"session": "bad-1", "kind": "fact", "content": {"value": 1}}),
            ("read_state", {"session": "bad-1", "at_seq": 99}),
        ]
        results = [await session.call_tool(name, arguments) for name, arguments in calls]
        # The server is still serving.
        results.append(await session.call_tool("read_state", {"session": "bad-1"}))
        return results

    kind, action, choices, fact, seq, fine = with_mcp(server_params(server_url, api_key), work)
    assert "kind" in error_text(kind) and "'question', 'approval' or 'takeover'" in error_text(kind)
    assert "An approval needs `action`" in error_text(action)
    # The API's own refusal, its status, code and message.
    assert error_text(choices).startswith(
        "Error executing tool ask_person: Switchboard refused: 422 invalid_input:"
    )
    assert '"choices" is a list of 1 to 50' in error_text(choices)
    assert 'Switchboard refused: 422 invalid_input: A fact needs a string "key"' in error_text(fact)
    assert (
        "Switchboard refused: 422 invalid_input: at_seq must be between 0 and the head (0). "
        '{"at_seq": 99, "head_seq": 0}' in error_text(seq)
    )
    assert not fine.is_error and fine.structured_content["state"] == {}
    # Nothing was asked.
    assert not Handoff.objects.filter(session__external_id=NAMESPACE + "bad-1").exists()


def test_a_wrong_key_is_a_tool_error_and_the_console_script_serves(server_url, api_key):
    command = shutil.which("switchboard-mcp", path=str(Path(sys.executable).parent))
    assert command, "the switchboard-mcp console script is installed"

    async def work(session: ClientSession):
        return [
            await session.call_tool("read_state", {"session": "k-1"}),
            await session.call_tool(
                "ask_person", {"session": "k-1", "kind": "question", "prompt": "?"}
            ),
        ]

    params = server_params(server_url, "sb_wrong_key", command=command)
    for result in with_mcp(params, work):
        assert "Switchboard refused: 401 unauthorized: Send a valid API key" in error_text(result)
    assert not Session.objects.filter(external_id=NAMESPACE + "k-1").exists()


def test_without_url_and_key_it_says_so_and_exits():
    # The client's default environment (what stdio_client passes): no SWITCHBOARD_* variables.
    environment = {
        name: value for name, value in os.environ.items() if not name.startswith("SWITCHBOARD_")
    }
    started = subprocess.run(
        [sys.executable, "-m", "switchboard_client.mcp"],
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 2
    assert started.stderr.startswith(
        "switchboard-mcp: set SWITCHBOARD_URL and SWITCHBOARD_API_KEY in the server's environment"
    )
    assert started.stdout == ""
