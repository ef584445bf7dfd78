"""LangGraph's interrupt() as a Switchboard handoff, end to end: the graph stops, a person
answers in the queue (here through the server's own services, as the dashboard does), and the
run finishes with the answer (run_with_handoffs / arun_with_handoffs)."""

import asyncio
import operator
import threading
import time
import uuid
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from switchboard_client import AsyncClient
from switchboard_client.langgraph import (
    HandoffNotAnswered,
    SwitchboardSaver,
    arun_with_handoffs,
    run_with_handoffs,
)

from handoffs_app.models import Handoff
from handoffs_app.services import handoffs as svc
from tests.handoffs.helpers import operator as make_operator

REFUND = {
    "action_request": {"action": "refund", "args": {"order": "A-1", "amount": 120}},
    "config": {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": False,
        "allow_ignore": True,
    },
    "description": "Refund a late order.",
}


class Ticket(TypedDict):
    log: Annotated[list[str], operator.add]


def ticket_graph(saver):
    def address(state):
        choice = interrupt({"question": "Ship to which address?", "choices": ["old", "new"]})
        return {"log": [f"address: {choice}"]}

    def refund(state):
        response = interrupt(REFUND)
        return {"log": [f"refund: {response['type']} {response['args']}"]}

    builder = StateGraph(Ticket)
    builder.add_node("address", address)
    builder.add_node("refund", refund)
    builder.add_edge(START, "address")
    builder.add_edge("address", "refund")
    builder.add_edge("refund", END)
    return builder.compile(checkpointer=saver)


def answer_next(project, session_id, answer, outcome, *, hand_back_after=0.0, timeout=30):
    """Act as the person: wait for the session's open handoff, claim it, answer it, and
    (`hand_back_after` seconds later) hand the session back to the agent."""
    person = make_operator(project)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert "error" not in outcome, outcome["error"]
        row = Handoff.objects.filter(session_id=session_id, status="open").first()
        if row is not None:
            svc.claim_handoff(row, user=person)
            answer(Handoff.objects.get(pk=row.pk), person)
            answered = Handoff.objects.get(pk=row.pk)
            time.sleep(hand_back_after)
            if answered.status == "answered":
                svc.hand_back(answered, user=person)
            return answered
        time.sleep(0.05)
    raise AssertionError(f"no handoff was asked for: {outcome}")


def wait_for_session(sb, external_id, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (found := sb.find_session(external_id)) is not None:
            return found
        time.sleep(0.05)
    raise AssertionError(f"no session {external_id}")


def start_run(graph, config):
    """run_with_handoffs in a thread of its own; its result or error lands in the dict."""
    outcome = {}

    def run():
        try:
            outcome["result"] = run_with_handoffs(graph, {"log": []}, config, poll=1)
        except Exception as error:  # reported by the callers' assertions
            outcome["error"] = error

    runner = threading.Thread(target=run)
    runner.start()
    return runner, outcome


def test_interrupts_become_handoffs_and_the_answers_resume_the_run(sb, project):
    namespace = f"hitl-{uuid.uuid4().hex}/"
    graph = ticket_graph(SwitchboardSaver(sb, namespace=namespace))
    config = {"configurable": {"thread_id": "ticket-1"}}
    runner, outcome = start_run(graph, config)
    session = wait_for_session(sb, namespace + "ticket-1")
    question = answer_next(
        project,
        session.id,
        lambda row, person: svc.respond(row, user=person, text="new"),
        outcome,
        # The run goes on with the answer; its next question waits for the hand back.
        hand_back_after=1.5,
    )
    approval = answer_next(
        project,
        session.id,
        lambda row, person: svc.edit_and_accept(
            row, user=person, args={"order": "A-1", "amount": 100}
        ),
        outcome,
    )
    runner.join(timeout=60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"] == {
        "log": [
            "address: new",
            "refund: edit {'action': 'refund', 'args': {'order': 'A-1', 'amount': 100}}",
        ]
    }
    # What the person saw: the interrupt's value as the handoff's payload.
    assert (question.kind, question.payload["choices"]) == ("question", ["old", "new"])
    assert (approval.kind, approval.payload) == ("approval", REFUND)
    assert question.idempotency_key.startswith("langgraph-interrupt-")
    # The thread is finished: nothing pending, the log in the saver.
    state = graph.get_state(config)
    assert state.next == () and state.values["log"][0] == "address: new"


def test_the_async_run_goes_on_with_a_rejection_and_stops_on_a_cancelled_handoff(
    server_url, api_key, sb, project
):
    namespace = f"ahitl-{uuid.uuid4().hex}/"
    config = {"configurable": {"thread_id": "ticket-2"}}

    async def run():
        async with AsyncClient(server_url, api_key, retry=sb.retry) as client:
            graph = ticket_graph(SwitchboardSaver(client, namespace=namespace))
            return await arun_with_handoffs(graph, {"log": []}, config, poll=1)

    outcome = {}

    def runner_main():
        try:
            outcome["result"] = asyncio.run(run())
        except Exception as error:
            outcome["error"] = error

    runner = threading.Thread(target=runner_main)
    runner.start()
    session = wait_for_session(sb, namespace + "ticket-2")
    answer_next(project, session.id, lambda row, p: svc.respond(row, user=p, text="old"), outcome)
    answer_next(project, session.id, lambda row, p: svc.reject(row, user=p, reason="no"), outcome)
    runner.join(timeout=60)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["result"]["log"] == ["address: old", "refund: ignore None"]

    # A handoff withdrawn instead of answered: the run stops, saying so.
    graph = ticket_graph(SwitchboardSaver(sb, namespace=namespace))
    other = {"configurable": {"thread_id": "ticket-3"}}
    stopped = {}

    def cancelled_run():
        try:
            run_with_handoffs(graph, {"log": []}, other, poll=1)
        except HandoffNotAnswered as error:
            stopped["error"] = error

    runner = threading.Thread(target=cancelled_run)
    runner.start()
    session = wait_for_session(sb, namespace + "ticket-3")
    deadline = time.monotonic() + 30
    while not (handoffs := sb.list_handoffs(session_id=session.id).handoffs):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    sb.cancel_handoff(handoffs[0].id, "asked elsewhere")
    runner.join(timeout=60)
    assert stopped["error"].handoff.status == "cancelled"
