"""An interrupt's approval that the person ignores (the handoff ends `ignored`): the run goes on
with Agent Inbox's `{"type": "ignore", "args": None}`, nothing to hand back."""

import uuid

from switchboard_client.langgraph import SwitchboardSaver
from test_langgraph_handoffs import answer_next, start_run, ticket_graph, wait_for_session

from handoffs_app.services import handoffs as svc


def test_an_ignored_approval_resumes_the_graph_with_ignore(sb, project):
    namespace = f"ignore-{uuid.uuid4().hex}/"
    graph = ticket_graph(SwitchboardSaver(sb, namespace=namespace))
    config = {"configurable": {"thread_id": "ticket-ignored"}}
    runner, outcome = start_run(graph, config)
    session = wait_for_session(sb, namespace + "ticket-ignored")
    answer_next(project, session.id, lambda row, p: svc.respond(row, user=p, text="old"), outcome)
    ignored = answer_next(project, session.id, lambda row, p: svc.ignore(row, user=p), outcome)
    runner.join(timeout=60)
    assert "error" not in outcome, outcome.get("error")
    assert ignored.status == "ignored"
    assert outcome["result"]["log"] == ["address: old", "refund: ignore None"]
    assert sb.get_handoff(str(ignored.pk)).ignored
