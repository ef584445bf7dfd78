"""Real LangGraph graphs of plain Python nodes (no model, no network) run with
SwitchboardSaver and with LangGraph's InMemorySaver: after the same runs, the stored history
(every checkpoint, its channel values, metadata and pending writes, and the graph's own view
of it, get_state_history) is the same."""

import asyncio
import json
import operator
import re
import time
import uuid
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt
from switchboard_client import AsyncClient, Client
from switchboard_client.langgraph import SwitchboardSaver

# --- Graphs ----------------------------------------------------------------------------------


class Counter(TypedDict):
    count: int
    log: Annotated[list[str], operator.add]


class Inner(TypedDict):
    log: Annotated[list[str], operator.add]


def counting_graph(checkpointer):
    """Branches, a node that fans out to two, a subgraph (its own checkpoint namespace) and
    an interrupt answered on resume."""
    inner = StateGraph(Inner)
    inner.add_node("deep", lambda s: {"log": ["deep"]})
    inner.add_edge(START, "deep")

    def start(state):
        return {"count": state["count"] + 1, "log": [f"start {state['count']}"]}

    def ask(state):
        answer = interrupt({"question": "go on?", "count": state["count"]})
        return {"log": [f"answer {answer}"]}

    builder = StateGraph(Counter)
    builder.add_node("start", start)
    builder.add_node("left", lambda s: {"log": ["left"]})
    builder.add_node("right", lambda s: {"log": ["right"]})
    builder.add_node("sub", inner.compile())
    builder.add_node("ask", ask)
    builder.add_edge(START, "start")
    builder.add_conditional_edges(
        "start", lambda s: ["left", "right"] if s["count"] % 2 else ["left"]
    )
    builder.add_edge("left", "sub")
    builder.add_edge("right", "sub")
    builder.add_edge("sub", "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=checkpointer)


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def chat_graph(checkpointer):
    def bot(state):
        last = state["messages"][-1]
        turn = len(state["messages"]) // 2
        return {"messages": [AIMessage(f"echo: {last.content}", id=f"ai-{turn}")]}

    builder = StateGraph(Chat)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=checkpointer)


def say(turn: int) -> dict[str, Any]:
    text = f"message {turn}: " + "the customer asks about an order " * 5
    return {"messages": [HumanMessage(text, id=f"human-{turn}")]}


# --- Comparing histories -----------------------------------------------------------------------


def history(saver, thread_id: str) -> list[dict[str, Any]]:
    """The thread's checkpoints, newest first, with everything a run makes differently each
    time (checkpoint and task ids, version fractions, timestamps) replaced by their order."""
    tuples = list(saver.list({"configurable": {"thread_id": thread_id}}))
    # Checkpoint ids grow with time: their order is the order the run made them in.
    ids = {cid: n for n, cid in enumerate(sorted(t.checkpoint["id"] for t in tuples))}
    rows = []
    for t in tuples:
        ns = t.config["configurable"]["checkpoint_ns"]
        rows.append(
            {
                "ns": ns.split(":")[0],
                "id": ids[t.checkpoint["id"]],
                "parent": ids.get(t.parent_config["configurable"]["checkpoint_id"])
                if t.parent_config
                else None,
                "values": t.checkpoint["channel_values"],
                "versions": {
                    k: str(v).split(".")[0] for k, v in t.checkpoint["channel_versions"].items()
                },
                "seen": {
                    node: {k: str(v).split(".")[0] for k, v in seen.items()}
                    for node, seen in t.checkpoint["versions_seen"].items()
                },
                "source": t.metadata.get("source"),
                "step": t.metadata.get("step"),
                # Task ids and interrupt ids are hashes of checkpoint ids: left out.
                "writes": sorted(
                    (channel, re.sub(r"id='\w+'", "id=…", repr(value)))
                    for _, channel, value in t.pending_writes or []
                ),
            }
        )
    return sorted(rows, key=lambda r: (r["ns"], r["id"]))


def state_history(graph, config) -> list[tuple[Any, ...]]:
    return [
        (
            s.values,
            s.next,
            s.metadata.get("step") if s.metadata else None,
            [(t.name, [i.value for i in t.interrupts]) for t in s.tasks],
        )
        for s in graph.get_state_history(config)
    ]


def run_counting(graph, thread_id: str) -> None:
    config = {"configurable": {"thread_id": thread_id}}
    for run in range(2):
        result = graph.invoke({"count": run * 10, "log": []}, config)
        assert "__interrupt__" in result
        graph.invoke(Command(resume=f"yes {run}"), config)


def test_a_branching_graph_with_a_subgraph_and_an_interrupt_stores_what_inmemorysaver_does(
    sb,
):
    namespace = f"graphs-{uuid.uuid4().hex}/"
    ours, theirs = SwitchboardSaver(sb, namespace=namespace), InMemorySaver()
    graph_ours, graph_theirs = counting_graph(ours), counting_graph(theirs)
    run_counting(graph_ours, "counting")
    run_counting(graph_theirs, "counting")

    stored = history(ours, "counting")
    assert stored == history(theirs, "counting")
    assert len(stored) > 10 and {r["ns"] for r in stored} == {"", "sub"}
    config = {"configurable": {"thread_id": "counting"}}
    assert state_history(graph_ours, config) == state_history(graph_theirs, config)
    assert graph_ours.get_state(config).values["log"][-1] == "answer yes 1"

    # A fresh process (a new saver: nothing remembered) reads the same.
    fresh = SwitchboardSaver(Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace)
    assert history(fresh, "counting") == stored
    assert state_history(counting_graph(fresh), config) == state_history(graph_theirs, config)


def test_a_chat_graph_stores_what_inmemorysaver_does_sync_and_async(server_url, api_key, sb):
    namespace = f"chat-{uuid.uuid4().hex}/"
    theirs = InMemorySaver()
    graph_theirs = chat_graph(theirs)
    config = {"configurable": {"thread_id": "chat"}}
    for turn in range(20):
        graph_theirs.invoke(say(turn), config)

    ours = SwitchboardSaver(sb, namespace=namespace)
    graph_ours = chat_graph(ours)
    for turn in range(20):
        graph_ours.invoke(say(turn), config)
    assert history(ours, "chat") == history(theirs, "chat")

    async def run_async():
        async with AsyncClient(server_url, api_key, retry=sb.retry) as client:
            saver = SwitchboardSaver(client, namespace="a" + namespace)
            graph = chat_graph(saver)
            for turn in range(20):
                await graph.ainvoke(say(turn), config)
            return [t async for t in saver.alist(config)]

    async_tuples = asyncio.run(run_async())
    assert len(async_tuples) == len(history(theirs, "chat"))
    assert (
        async_tuples[0].checkpoint["channel_values"]
        == theirs.get_tuple(config).checkpoint["channel_values"]
    )
    messages = graph_ours.get_state(config).values["messages"]
    assert [m.id for m in messages[-2:]] == ["human-19", "ai-19"]


def test_a_thousand_turn_thread_stays_within_the_servers_limits(sb):
    """LangGraph re-sends the whole messages list at every checkpoint. Driven here as a
    graph's loop drives the saver (a checkpoint per turn holding the whole list; the turn's
    pending writes, inline in their events, are left out to keep the test short) for 1,000
    turns, 2,000 messages of ~600 bytes (1.2 MB, far over the 256 KiB event limit): each
    message is one blob, so a turn sends its new messages and a piece of names, never the
    list again, and no request is refused. (A real graph of 1,000 turns takes LangGraph
    itself over a minute with InMemorySaver: add_messages and the savers' serialising are
    linear in the list at every step.)"""
    namespace = f"long-{uuid.uuid4().hex}/"
    saver = SwitchboardSaver(sb, namespace=namespace)
    sent: list[int] = []
    original = sb._send

    def counting(request, **options):
        sent.append(len(request.content or b""))
        return original(request, **options)

    sb._send = counting
    turns = 1000
    config = {"configurable": {"thread_id": "long", "checkpoint_ns": ""}}
    messages: list[AnyMessage] = []
    version = None
    marks: list[int] = []  # bytes sent by the end of turn 100, 200 and 900
    started = time.monotonic()
    for turn in range(turns):
        new = [*say(turn)["messages"], AIMessage("ok " * 100, id=f"ai-{turn}")]
        messages = messages + new  # a new list of the same messages, as add_messages makes
        version = saver.get_next_version(version, None)
        checkpoint = {
            "v": 4,
            "id": str(uuid6(clock_seq=turn)),
            "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": {"messages": messages, "turn": turn},
            "channel_versions": {"messages": version, "turn": version},
            "versions_seen": {"bot": {"messages": version}},
            "updated_channels": ["messages", "turn"],
        }
        metadata = {"source": "loop", "step": turn, "parents": {}}
        config = saver.put(config, checkpoint, metadata, {"messages": version, "turn": version})
        if turn + 1 in (turns // 10, turns // 5, turns - turns // 10):
            marks.append(sum(sent))
    elapsed = time.monotonic() - started
    tenth = turns // 10
    per_turn_early = (marks[1] - marks[0]) / tenth  # turns 100 to 200: a list of ~300
    per_turn_late = (sum(sent) - marks[2]) / tenth  # the last 100 turns: a list of ~1,900
    print(
        f"\n{turns} turns in {elapsed:.1f}s, {len(sent) / turns:.1f} requests and "
        f"{per_turn_late / 1024:.1f} KiB sent per turn"
    )
    # Bytes per turn stay flat as the list grows six-fold (the whole list is ~1.2 MB by the
    # end): a turn sends its two messages (~1.3 KB), a piece of names (at most 4 KiB) and
    # its checkpoint event (the top pieces' names: at most 16).
    assert per_turn_late < 1.5 * per_turn_early, (per_turn_early, per_turn_late)
    assert per_turn_late < 10 * 1024

    # A fresh process reads the newest checkpoint back whole, and its event stays small.
    fresh = SwitchboardSaver(Client(sb.url, sb.api_key, retry=sb.retry), namespace=namespace)
    latest = fresh.get_tuple({"configurable": {"thread_id": "long"}})
    assert latest.checkpoint["channel_values"] == {"messages": messages, "turn": turns - 1}
    session = sb.find_session(namespace + "long")
    (event,) = sb.events(session.id, order="desc", limit=1).events
    assert len(json.dumps(event.content)) < 4096


def test_an_invoke_of_a_one_node_graph_makes_one_request_per_checkpoint_and_write(
    server_url, api_key
):
    """A step's checkpoint goes in one request (its event and its values' new blobs), so an
    invoke of the one-node chat graph on a thread this process knows is: get_tuple (one read
    of the thread's events while they fit in one page, else two), then three checkpoints and
    two tasks' writes, one request each. Counted as bench/frameworks.py counts them: an httpx
    event hook on the client."""
    sent: list[Any] = []
    hooks = {"event_hooks": {"request": [sent.append]}}
    namespace = f"count-{uuid.uuid4().hex}/"
    config = {"configurable": {"thread_id": "chat"}}
    with Client(server_url, api_key, httpx_options=hooks) as client:
        saver = SwitchboardSaver(client, namespace=namespace)
        graph = chat_graph(saver)
        graph.invoke(say(0), config)  # opens the thread

        sent.clear()
        graph.invoke(say(1), config)
        assert len(sent) == 6, [(r.method, r.url.path) for r in sent]
        assert sum(r.url.path.endswith("/blobs") for r in sent) == 0

        for turn in range(2, 12):
            graph.invoke(say(turn), config)
        sent.clear()
        graph.invoke(say(12), config)  # the thread's events are more than a page now
        assert len(sent) == 7, [(r.method, r.url.path) for r in sent]

        sent.clear()
        latest = saver.get_tuple(config)
        assert len(sent) == 2
        sent.clear()
        # A checkpoint with a new message: its blobs go with its event.
        before = latest.checkpoint
        version = saver.get_next_version(before["channel_versions"]["messages"], None)
        messages = [*before["channel_values"]["messages"], AIMessage("ok " * 300, id="ai-x")]
        step = {
            **before,
            "id": str(uuid6(clock_seq=99)),
            "channel_values": {**before["channel_values"], "messages": messages},
            "channel_versions": {**before["channel_versions"], "messages": version},
        }
        saver.put(latest.config, step, {"source": "update", "step": 99}, {"messages": version})
        assert [(r.method, r.url.path.rsplit("/", 1)[-1]) for r in sent] == [("POST", "events")]
        assert saver.get_tuple(config).checkpoint["channel_values"]["messages"] == messages
