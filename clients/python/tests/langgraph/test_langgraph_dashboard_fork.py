"""A fork made in the dashboard is a thread LangGraph continues: the thread is run three turns,
forked at the seq where the first turn ended (through fork_session, the service the dashboard's
Fork button calls: no external_id), and the graph, given `switchboard:<fork id>` as its
thread_id, sees the checkpoint as of that point and goes on from there."""

import operator
import uuid
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from switchboard_client.langgraph import SwitchboardSaver

from core.actors import Actor
from sessions_app.models import Session
from sessions_app.services.sessions import fork_session


class Turns(TypedDict):
    said: Annotated[list[str], operator.add]


def echo_graph(saver):
    builder = StateGraph(Turns)
    builder.add_node("echo", lambda state: {"said": [f"echo {len(state['said'])}"]})
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)
    return builder.compile(checkpointer=saver)


def test_a_dashboard_fork_is_a_thread_the_graph_continues_from_its_fork_point(sb, project):
    # The project is the test's own: the empty namespace, where a fork's missing external_id
    # would read as the thread "" if it were taken for a thread of the namespace.
    namespace = ""
    graph = echo_graph(SwitchboardSaver(sb, namespace=namespace))
    config = {"configurable": {"thread_id": "chat"}}
    graph.invoke({"said": ["hello"]}, config)
    session_id = sb.find_session(namespace + "chat").id
    after_first = sb.get_session(session_id).head_seq
    graph.invoke({"said": ["again"]}, config)
    graph.invoke({"said": ["and again"]}, config)
    assert graph.get_state(config).values["said"] == [
        "hello",
        "echo 1",
        "again",
        "echo 3",
        "and again",
        "echo 5",
    ]

    fork = fork_session(
        Session.objects.get(pk=session_id),
        at_seq=after_first,
        actor=Actor.system("dashboard-test"),
    )
    assert fork.external_id is None  # as the dashboard makes it
    forked = {"configurable": {"thread_id": f"switchboard:{fork.pk}"}}
    # A fresh saver (another process): it finds the fork by its id, nothing cached.
    fresh = echo_graph(SwitchboardSaver(sb, namespace=namespace))
    state = fresh.get_state(forked)
    assert state.values["said"] == ["hello", "echo 1"]
    assert state.next == ()
    # The checkpoint it shows is the parent's last one at or before the fork point.
    parent_history = [
        s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)
    ]
    assert state.config["configurable"]["checkpoint_id"] in parent_history

    result = fresh.invoke({"said": ["instead"]}, forked)
    assert result["said"] == ["hello", "echo 1", "instead", "echo 3"]
    # The fork's turn is in the fork's log; the parent thread is as it was.
    assert sb.get_session(str(fork.pk)).head_seq > after_first
    assert graph.get_state(config).values["said"][-1] == "echo 5"
    # A thread id naming no session is an unknown thread, as any other.
    assert (
        fresh.get_state({"configurable": {"thread_id": f"switchboard:{uuid.uuid4()}"}}).values == {}
    )
    # The namespace's threads are the parent only: the fork (its metadata, no external_id) is
    # no thread of it.
    saver = SwitchboardSaver(sb, namespace=namespace)
    assert [thread for thread, _ in saver._run(saver._threads)] == ["chat"]
