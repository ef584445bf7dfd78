#!/usr/bin/env python
"""The framework adapters beside each framework's own stores, in one run, as a history grows:
OpenAI Agents SDK, LangGraph and Google ADK (issue 25, "Measure and report"; issue 27 §2).

    .venv/bin/python bench/frameworks.py                  # the full measurement, ~20 min
    .venv/bin/python bench/frameworks.py --items 1000     # checkpoints 100 and 1,000, ~5 min
    .venv/bin/python bench/frameworks.py --only langgraph # one framework (repeatable)
    .venv/bin/python bench/frameworks.py --smoke          # tiny sizes, one round (CI), ~35 s

The full measurement is checkpoints 100, 1,000 and 5,000 items, `--reps 50`, `--turn-reps 10`,
`--fresh-runs 5`, all three frameworks. Its durations above are estimates for an idle 2-core
machine, from the CPU a loaded one spent on `--smoke` and on `--items 200`; the LangGraph
part grows fastest with the size (every checkpoint holds the whole message list). Run it on a
quiet machine (nothing else using the cores: check the load average printed with the results)
and compare runs by the CPU columns, which waiting for a core does not inflate.

Per framework, three stores (the default, its own PostgreSQL store, the adapter), each driven
by the framework's own calls:

- OpenAI Agents SDK: SQLiteSession (in memory); SQLAlchemySession (asyncpg);
  SwitchboardSession.
- LangGraph: InMemorySaver; PostgresSaver (psycopg 3); SwitchboardSaver.
- Google ADK: InMemorySessionService; DatabaseSessionService (asyncpg);
  SwitchboardSessionService.

The PostgreSQL stores use a scratch database of their own on the same PostgreSQL server as
Switchboard's scratch database; the adapters go through one server (uvicorn on config.asgi, as
bench/ingest.py starts it; `--server granian-wsgi`: granian on config.wsgi, the production
split's WSGI side) with a Client / AsyncClient each.

One thread or session per store grows to each checkpoint (100, 1,000 and 5,000 items by
default; `--items N` stops at N; OpenAI: add_items in batches of 100; LangGraph: invokes of the
chat graph with 99 user messages each, and its reply; ADK: append_event one by one), then at
that size, the stores in shuffled order for each operation, `--reps` calls each (`--turn-reps`
for the whole turns and LangGraph's list), after two unmeasured ones, once both databases
have been vacuumed (VACUUM ANALYZE, as autovacuum would have: Bench.vacuum), each call after
a garbage collection left out of its figures (Bench.settled):

- OpenAI: `add_items` of one item; `get_items(50)`; a `Runner.run` turn on the SDK's
  ScriptedModel (no network; the runner reads the whole session and adds the user's message
  and the answer).
- LangGraph: `graph.invoke` of a one-node chat graph (`messages` with `add_messages`) with one
  user message at turn n; `get_tuple` of the latest checkpoint; `list(limit=50)`, the last 50
  checkpoints (LangGraph's "last 50").
- ADK: `append_event` of one event; `get_session` with `GetSessionConfig(num_recent_events=50)`;
  `list_sessions` of the user (`--adk-sessions` sessions); a `Runner.run_async` turn on a
  scripted `BaseLlm` (no network).

Printed per operation, size and store: p50 and p95 latency (ms); requests per operation (the
adapters: every HTTP request counted by an httpx event hook on the adapter's client); CPU per
operation (ms): this bench process (time.process_time: the framework, the store's driver or
client), the Switchboard server's processes (/proc/<pid>/stat, as bench/ingest.py's CpuMeter)
and the PostgreSQL backends of the store's database; then the ratios adapter / the framework's
own PostgreSQL store (p50, p95, all CPU). Then bytes stored per item (pg_total_relation_size
growth of the store's tables since before its first write; Switchboard: the events and blobs
tables, which only this framework's adapter writes to meanwhile), and opening the thread or
session from a fresh process (bench/_fresh_open.py, `--fresh-runs` times: the in-process time of
its first read, and the whole process's wall time, imports included), beside the floor of any
adapter there: a fresh process's first request through httpx alone, to an API path that does
nothing. The in-memory default
stores have no bytes on disk and nothing a fresh process can open: `-` there. Nothing is
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest as ib  # noqa: E402
from _common import recreate_database  # noqa: E402

ROOT = ib.ROOT
FRESH_OPEN = ROOT / "bench" / "_fresh_open.py"
CHECKPOINTS = (100, 1000, 5000)
GROW_BATCH = 100  # items per growing call (OpenAI add_items, LangGraph invoke)
WARMUP = 2  # unmeasured calls per operation and store, before the measured ones
READ_LAST = 50

DEFAULT, PG, ADAPTER = "default", "pg", "adapter"
STORE_NAMES = {
    "openai_agents": {
        DEFAULT: "SQLiteSession",
        PG: "SQLAlchemySession",
        ADAPTER: "SwitchboardSession",
    },
    "langgraph": {DEFAULT: "InMemorySaver", PG: "PostgresSaver", ADAPTER: "SwitchboardSaver"},
    "adk": {
        DEFAULT: "InMemorySessionService",
        PG: "DatabaseSessionService",
        ADAPTER: "SwitchboardSessionService",
    },
}
TITLES = {"openai_agents": "OpenAI Agents SDK", "langgraph": "LangGraph", "adk": "Google ADK"}
# The tables each PostgreSQL store writes (its own database), and the adapters' (Switchboard's).
PG_TABLES = {
    "openai_agents": ["agent_sessions", "agent_messages"],
    "langgraph": ["checkpoints", "checkpoint_blobs", "checkpoint_writes"],
    "adk": ["sessions", "events", "app_states", "user_states"],
}
SWITCHBOARD_TABLES = ["sessions_app_event", "sessions_app_blob"]

WORDS = [
    *["the", "order", "refund", "shipping", "invoice", "customer", "account", "password"],
    *["reset", "delivery", "tracking", "address", "payment", "card", "declined", "support"],
    *["ticket", "escalate", "manager", "policy", "return", "window"],
]


def text(rng: random.Random, size: int = 200) -> str:
    """About `size` characters of support-chat words."""
    words = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


# --------------------------------------------------------------------------------------------
# Measuring: latency per call, requests and CPU per call
# --------------------------------------------------------------------------------------------


class RequestCount:
    """HTTP requests sent by the adapters' clients (an httpx event hook on each)."""

    def __init__(self) -> None:
        self.n = 0

    def hook(self, request: Any) -> None:
        self.n += 1

    async def async_hook(self, request: Any) -> None:
        self.n += 1

    def options(self, *, is_async: bool) -> dict[str, Any]:
        return {"event_hooks": {"request": [self.async_hook if is_async else self.hook]}}


@dataclass
class Row:
    framework: str
    operation: str
    items: int
    store: str  # DEFAULT, PG or ADAPTER
    latencies: list[float]
    requests: float | None
    bench_cpu_ms: float
    server_cpu_ms: float | None
    pg_cpu_ms: float | None

    @property
    def cpu_ms(self) -> float:
        return self.bench_cpu_ms + (self.server_cpu_ms or 0.0) + (self.pg_cpu_ms or 0.0)


@dataclass
class Fresh:
    framework: str
    items: int
    store: str
    first_read_ms: list[float] = field(default_factory=list)
    process_ms: list[float] = field(default_factory=list)
    read_items: int = 0


@dataclass
class Bench:
    """What every framework's part shares: the server, the databases, the counters, the
    results."""

    args: argparse.Namespace
    server: ib.Server
    base: str
    key: str
    sb_db: str
    pg_db: str
    meter_conn: Any  # psycopg, on the stores' database: pg_stat_activity and table sizes
    sb_conn: Any  # psycopg, on Switchboard's scratch database: its tables' sizes
    rng: random.Random
    namespace: str
    requests: RequestCount = field(default_factory=RequestCount)
    rows: list[Row] = field(default_factory=list)
    bytes_per_item: dict[tuple[str, int, str], float] = field(default_factory=dict)
    fresh: list[Fresh] = field(default_factory=list)
    collector_cpu: float = 0.0  # seconds spent in settled(), left out of the CPU figures

    def sqlalchemy_url(self) -> str:
        return ib.pg_url(self.pg_db).replace("postgres://", "postgresql+asyncpg://", 1)

    def psycopg_url(self) -> str:
        return ib.pg_url(self.pg_db).replace("postgres://", "postgresql://", 1)

    def client(self) -> Any:
        from switchboard_client import Client

        return Client(
            self.base, self.key, timeout=60, httpx_options=self.requests.options(is_async=False)
        )

    def async_client(self) -> Any:
        from switchboard_client import AsyncClient

        return AsyncClient(
            self.base, self.key, timeout=60, httpx_options=self.requests.options(is_async=True)
        )

    # --- CPU and requests around a batch of calls ----------------------------------------------

    def settled(self) -> None:
        """Collect this process's garbage before a measured call, outside its time and CPU: a
        5,000-item Runner turn makes some 170,000 objects (the SDK deep-copies the history), and
        a full collection left pending by earlier calls doubled the next call's time (the same
        turn took 300 or 600 ms as it fell), whichever store's it was. What the collector costs
        over a run is left out of every store's figures alike."""
        cpu0 = time.process_time()
        gc.collect()
        self.collector_cpu += time.process_time() - cpu0

    @contextlib.contextmanager
    def meter(
        self, framework: str, operation: str, items: int, store: str
    ) -> Iterator[list[float]]:
        """Yields the list the caller appends each call's latency (ms) to; records a Row."""
        latencies: list[float] = []
        server0 = ib.tree_cpu(self.server.proc.pid) if store == ADAPTER else 0.0
        db = self.sb_db if store == ADAPTER else self.pg_db
        pg0 = ib.pg_backends_cpu(self.meter_conn, db) if store != DEFAULT else 0.0
        # Taken last and read first: the /proc scan and the query above are not the calls'.
        requests0 = self.requests.n
        collector0 = self.collector_cpu
        cpu0 = time.process_time()
        yield latencies
        cpu = time.process_time() - cpu0 - (self.collector_cpu - collector0)
        requests = self.requests.n - requests0
        server = ib.tree_cpu(self.server.proc.pid) - server0 if store == ADAPTER else None
        pg = ib.pg_backends_cpu(self.meter_conn, db) - pg0 if store != DEFAULT else None
        n = max(len(latencies), 1)
        self.rows.append(
            Row(
                framework,
                operation,
                items,
                store,
                latencies,
                requests / n if store == ADAPTER else None,
                cpu * 1000 / n,
                None if server is None else server * 1000 / n,
                None if pg is None else pg * 1000 / n,
            )
        )

    def measure(
        self,
        framework: str,
        operation: str,
        items: int,
        calls: dict[str, Callable[[], Any]],
        reps: int,
    ) -> None:
        """`reps` calls of each store's `operation` (after WARMUP), stores in shuffled order."""
        order = list(calls)
        self.rng.shuffle(order)
        for store in order:
            for _ in range(WARMUP):
                calls[store]()
            with self.meter(framework, operation, items, store) as latencies:
                for _ in range(reps):
                    self.settled()
                    t0 = time.perf_counter()
                    calls[store]()
                    latencies.append((time.perf_counter() - t0) * 1000)

    async def ameasure(
        self,
        framework: str,
        operation: str,
        items: int,
        calls: dict[str, Callable[[], Awaitable[Any]]],
        reps: int,
    ) -> None:
        order = list(calls)
        self.rng.shuffle(order)
        for store in order:
            for _ in range(WARMUP):
                await calls[store]()
            with self.meter(framework, operation, items, store) as latencies:
                for _ in range(reps):
                    self.settled()
                    t0 = time.perf_counter()
                    await calls[store]()
                    latencies.append((time.perf_counter() - t0) * 1000)

    # --- Between growing and measuring -----------------------------------------------------------

    def vacuum(self) -> None:
        """VACUUM (ANALYZE) Switchboard's database and the stores', after each growth and
        before its measurements: what autovacuum does on a server that runs it. Growing leaves
        thousands of dead versions of the rows every write updates (a session's head, its
        updated_at: indexed, so never a HOT update), and a server with autovacuum off (as this
        machine's may be: printed) would otherwise measure them, in the adapter's operations
        most (a metadata look-up visits each dead version its GIN index still points to)."""
        for conn in (self.sb_conn, self.meter_conn):
            conn.commit()
            conn.autocommit = True
            try:
                conn.execute("VACUUM (ANALYZE)")
            finally:
                conn.autocommit = False

    # --- Bytes stored ---------------------------------------------------------------------------

    def table_bytes(self, store: str, framework: str) -> int:
        conn = self.sb_conn if store == ADAPTER else self.meter_conn
        tables = SWITCHBOARD_TABLES if store == ADAPTER else PG_TABLES[framework]
        (size,) = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname = ANY(%s)",
            (tables,),
        ).fetchone()
        conn.commit()
        return int(size)

    def record_bytes(
        self, framework: str, items: int, stored_items: int, baseline: dict[str, int]
    ) -> None:
        for store in (PG, ADAPTER):
            grown = self.table_bytes(store, framework) - baseline[store]
            self.bytes_per_item[(framework, items, store)] = grown / max(stored_items, 1)

    # --- A fresh process ------------------------------------------------------------------------

    def fresh_open(self, framework: str, items: int, specs: dict[str, dict[str, Any]]) -> None:
        """Each store's thread or session opened by `--fresh-runs` new processes
        (bench/_fresh_open.py), the stores alternating; and beside them, the floor: a new
        process's first request through httpx alone (the adapter's client library, sync for
        LangGraph's saver, async for the others) to an API path that does nothing."""
        mode = "sync" if framework == "langgraph" else "async"
        specs = {**specs, FLOOR: {"url": self.base + NO_SUCH_ENDPOINT, "mode": mode}}
        results = {store: Fresh(framework, items, store) for store in specs}
        for _ in range(self.args.fresh_runs):
            order = list(specs)
            self.rng.shuffle(order)
            for store in order:
                spec = {"framework": framework, "store": store, **specs[store]}
                t0 = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, str(FRESH_OPEN), json.dumps(spec)],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                wall = (time.perf_counter() - t0) * 1000
                if done.returncode:
                    raise RuntimeError(f"fresh open of {framework} {store}:\n{done.stderr[-3000:]}")
                answer = json.loads(done.stdout.strip().splitlines()[-1])
                results[store].first_read_ms.append(answer["first_read_ms"])
                results[store].process_ms.append(wall)
                results[store].read_items = answer["items"]
        self.fresh.extend(results.values())

    def switchboard_spec(self, **more: Any) -> dict[str, Any]:
        return {"url": self.base, "key": self.key, "namespace": self.namespace, **more}


def checkpoints(args: argparse.Namespace) -> list[int]:
    sizes = [n for n in CHECKPOINTS if n < args.items]
    return [*sizes, args.items]


# --------------------------------------------------------------------------------------------
# One request's floor
# --------------------------------------------------------------------------------------------

FLOOR = "floor"
# An API path no endpoint has: its JSON 404 goes through the server, the API's middleware and
# URL resolution, and touches neither PostgreSQL nor Redis (tests/core/test_api_handler.py).
NO_SUCH_ENDPOINT = "/api/v1/bench-floor/no-such-endpoint"


def request_floor(bench: Bench) -> None:
    """`--reps` API requests that do nothing, through the adapters' own httpx clients (sync, as
    LangGraph's saver; async, as the OpenAI and ADK adapters): what any operation that makes
    one request costs at least, beside which an own store's figure can be read."""
    url = bench.base + NO_SUCH_ENDPOINT
    calls = max(bench.args.reps, 20)
    with contextlib.closing(bench.client()) as client:
        bench.measure(
            FLOOR, "one request (sync)", 0, {ADAPTER: lambda: client._http.get(url)}, calls
        )

    async def run_async() -> None:
        client = bench.async_client()
        try:
            await bench.ameasure(
                FLOOR, "one request (async)", 0, {ADAPTER: lambda: client._http.get(url)}, calls
            )
        finally:
            await client.aclose()

    asyncio.run(run_async())


# --------------------------------------------------------------------------------------------
# OpenAI Agents SDK
# --------------------------------------------------------------------------------------------


def openai_user(t: str) -> dict[str, Any]:
    return {"role": "user", "content": t}


def openai_assistant(t: str, n: int) -> dict[str, Any]:
    """An answer as Runner stores it (a ResponseOutputMessage's input item)."""
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": t, "annotations": [], "logprobs": []}],
    }


async def openai_agents(bench: Bench) -> None:
    from agents import Agent, Runner, set_tracing_disabled
    from agents.extensions.memory import SQLAlchemySession
    from agents.memory.sqlite_session import SQLiteSession
    from agents.testing import ScriptedModel
    from openai.types.responses import ResponseOutputMessage, ResponseOutputText
    from switchboard_client.openai_agents import SwitchboardSession

    framework, args, rng = "openai_agents", bench.args, bench.rng
    set_tracing_disabled(True)  # no OPENAI_API_KEY, no network: nothing to export traces to
    session_id = "customer-1"
    client = bench.async_client()
    pg = SQLAlchemySession.from_url(session_id, url=bench.sqlalchemy_url(), create_tables=True)
    await pg.get_items(1)  # creates the tables: the baseline below is of empty tables
    sessions: dict[str, Any] = {
        DEFAULT: SQLiteSession(session_id),
        PG: pg,
        ADAPTER: SwitchboardSession(session_id, client, namespace=bench.namespace),
    }
    baseline = {store: bench.table_bytes(store, framework) for store in (PG, ADAPTER)}
    shop = Agent(name="shop", instructions="Help the customer.")
    stored = 0  # items in each session (the same calls go to every store)

    def said(t: str) -> ResponseOutputMessage:
        return ResponseOutputMessage(
            id=f"msg_{rng.getrandbits(48):x}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=t, annotations=[], logprobs=[])],
        )

    for size in checkpoints(args):
        ib.log(f"OpenAI Agents SDK: growing to {size} items")
        while stored < size:
            batch = []
            for i in range(min(GROW_BATCH, size - stored)):
                n = stored + i
                batch.append(
                    openai_user(text(rng)) if n % 2 == 0 else openai_assistant(text(rng), n)
                )
            for session in sessions.values():
                await session.add_items(batch)
            stored += len(batch)
        bench.vacuum()

        one = [openai_user(text(rng))]
        await bench.ameasure(
            framework,
            "add_items(1)",
            size,
            {store: (lambda s=s, one=one: s.add_items(one)) for store, s in sessions.items()},
            args.reps,
        )
        stored += (WARMUP + args.reps) * 1
        await bench.ameasure(
            framework,
            f"get_items({READ_LAST})",
            size,
            {store: (lambda s=s: s.get_items(READ_LAST)) for store, s in sessions.items()},
            args.reps,
        )

        def turn(store: str) -> Callable[[], Awaitable[Any]]:
            async def run() -> Any:
                # A model per turn: a ScriptedModel keeps every call's input (the whole
                # history), which would pile up over the run.
                agent = shop.clone(model=ScriptedModel([[said(text(rng, 400))]]))
                return await Runner.run(agent, text(rng), session=sessions[store])

            return run

        await bench.ameasure(
            framework, "Runner.run turn", size, {s: turn(s) for s in sessions}, args.turn_reps
        )
        stored += (WARMUP + args.turn_reps) * 2
        bench.record_bytes(framework, size, stored, baseline)
        ib.log(f"OpenAI Agents SDK: {size} items, opening from fresh processes")
        bench.fresh_open(
            framework,
            size,
            {
                PG: {"url": bench.sqlalchemy_url(), "id": session_id},
                ADAPTER: bench.switchboard_spec(id=session_id),
            },
        )
    await pg.engine.dispose()
    await client.aclose()


# --------------------------------------------------------------------------------------------
# LangGraph
# --------------------------------------------------------------------------------------------


def langgraph(bench: Bench) -> None:
    from typing import Annotated, TypedDict

    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages
    from switchboard_client.langgraph import SwitchboardSaver

    framework, args, rng = "langgraph", bench.args, bench.rng

    # Built at run time: the module's annotations are strings, and LangGraph evaluates a
    # class's against the module's globals, where these names are not.
    Chat = TypedDict("Chat", {"messages": Annotated[list[AnyMessage], add_messages]})  # noqa: UP013

    def reply(state: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(text(rng, 400))]}

    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")

    thread = "chat-1"
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(bench.client())
        pg = stack.enter_context(PostgresSaver.from_conn_string(bench.psycopg_url()))
        pg.setup()
        savers: dict[str, Any] = {
            DEFAULT: InMemorySaver(),
            PG: pg,
            ADAPTER: SwitchboardSaver(client, namespace=bench.namespace),
        }
        graphs = {store: builder.compile(checkpointer=saver) for store, saver in savers.items()}
        baseline = {store: bench.table_bytes(store, framework) for store in (PG, ADAPTER)}
        stored = 0

        for size in checkpoints(args):
            ib.log(f"LangGraph: growing to {size} messages")
            while stored < size:
                humans = [
                    HumanMessage(text(rng)) for _ in range(min(GROW_BATCH, size - stored) - 1)
                ]
                for graph in graphs.values():
                    graph.invoke({"messages": humans or [HumanMessage(text(rng))]}, config)
                stored += max(len(humans), 1) + 1
            bench.vacuum()

            def invoke(store: str) -> Callable[[], Any]:
                return lambda: graphs[store].invoke({"messages": [HumanMessage(text(rng))]}, config)

            bench.measure(
                framework, "invoke (1 turn)", size, {s: invoke(s) for s in graphs}, args.turn_reps
            )
            stored += (WARMUP + args.turn_reps) * 2
            bench.measure(
                framework,
                "get_tuple",
                size,
                {store: (lambda s=s: s.get_tuple(config)) for store, s in savers.items()},
                args.reps,
            )
            bench.measure(
                framework,
                f"list(limit={READ_LAST})",
                size,
                {
                    store: (lambda s=s: list(s.list(config, limit=READ_LAST)))
                    for store, s in savers.items()
                },
                args.turn_reps,
            )
            bench.record_bytes(framework, size, stored, baseline)
            ib.log(f"LangGraph: {size} messages, opening from fresh processes")
            bench.fresh_open(
                framework,
                size,
                {
                    PG: {"url": bench.psycopg_url(), "id": thread},
                    ADAPTER: bench.switchboard_spec(id=thread),
                },
            )


# --------------------------------------------------------------------------------------------
# Google ADK
# --------------------------------------------------------------------------------------------


async def adk(bench: Bench) -> None:
    from collections.abc import AsyncGenerator

    from google.adk.agents.llm_agent import LlmAgent
    from google.adk.events.event import Event
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import Runner
    from google.adk.sessions.base_session_service import GetSessionConfig
    from google.adk.sessions.database_session_service import DatabaseSessionService
    from google.adk.sessions.in_memory_session_service import InMemorySessionService
    from google.genai import types
    from switchboard_client.adk import SwitchboardSessionService

    framework, args, rng = "adk", bench.args, bench.rng

    class ScriptedLlm(BaseLlm):
        """Answers every model call with text; asks nothing of a network."""

        async def generate_content_async(
            self, llm_request: LlmRequest, stream: bool = False
        ) -> AsyncGenerator[LlmResponse, None]:
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=text(rng, 400))]),
                usage_metadata=types.GenerateContentResponseUsageMetadata(
                    prompt_token_count=10, candidates_token_count=5, total_token_count=15
                ),
            )

    app, user, session_id = "support", "ada", "chat-1"
    client = bench.async_client()
    pg = DatabaseSessionService(db_url=bench.sqlalchemy_url())
    await pg.prepare_tables()  # the baseline below is of empty tables
    services: dict[str, Any] = {
        DEFAULT: InMemorySessionService(),
        PG: pg,
        ADAPTER: SwitchboardSessionService(client, namespace=bench.namespace),
    }
    baseline = {store: bench.table_bytes(store, framework) for store in (PG, ADAPTER)}
    for service in services.values():
        for i in range(1, args.adk_sessions):
            await service.create_session(
                app_name=app, user_id=user, session_id=f"other-{i}", state={"lang": "en"}
            )
        await service.create_session(
            app_name=app, user_id=user, session_id=session_id, state={"lang": "en"}
        )
    runners = {
        store: Runner(
            agent=LlmAgent(name="support_agent", model=ScriptedLlm(model="scripted")),
            app_name=app,
            session_service=service,
        )
        for store, service in services.items()
    }
    latest: dict[str, Any] = {}

    async def refresh() -> None:
        """Each store's session, current (ADK refuses appends to a stale one)."""
        for store, service in services.items():
            latest[store] = await service.get_session(
                app_name=app,
                user_id=user,
                session_id=session_id,
                config=GetSessionConfig(num_recent_events=1),
            )

    def event(n: int) -> Event:
        author, role = ("user", "user") if n % 2 == 0 else ("support_agent", "model")
        return Event(
            invocation_id=f"inv-{n // 2}",
            author=author,
            content=types.Content(role=role, parts=[types.Part(text=text(rng))]),
        )

    recent = GetSessionConfig(num_recent_events=READ_LAST)
    stored = 0
    for size in checkpoints(args):
        ib.log(f"Google ADK: growing to {size} events")
        await refresh()
        while stored < size:
            for store, service in services.items():
                await service.append_event(latest[store], event(stored))
            stored += 1
        bench.vacuum()

        def append(store: str) -> Callable[[], Awaitable[Any]]:
            return lambda: services[store].append_event(latest[store], event(rng.getrandbits(8)))

        await bench.ameasure(
            framework, "append_event", size, {s: append(s) for s in services}, args.reps
        )
        stored += WARMUP + args.reps
        await bench.ameasure(
            framework,
            f"get_session({READ_LAST})",
            size,
            {
                store: (
                    lambda s=s: s.get_session(
                        app_name=app, user_id=user, session_id=session_id, config=recent
                    )
                )
                for store, s in services.items()
            },
            args.reps,
        )
        await bench.ameasure(
            framework,
            f"list_sessions ({args.adk_sessions})",
            size,
            {
                store: (lambda s=s: s.list_sessions(app_name=app, user_id=user))
                for store, s in services.items()
            },
            args.reps,
        )

        def turn(store: str) -> Callable[[], Awaitable[Any]]:
            async def run() -> None:
                message = types.Content(role="user", parts=[types.Part(text=text(rng))])
                async for _ in runners[store].run_async(
                    user_id=user, session_id=session_id, new_message=message
                ):
                    pass

            return run

        await bench.ameasure(
            framework, "Runner turn", size, {s: turn(s) for s in services}, args.turn_reps
        )
        stored += (WARMUP + args.turn_reps) * 2
        bench.record_bytes(framework, size, stored, baseline)
        ib.log(f"Google ADK: {size} events, opening from fresh processes")
        where = {"app": app, "user": user, "id": session_id}
        bench.fresh_open(
            framework,
            size,
            {
                PG: {"url": bench.sqlalchemy_url(), **where},
                ADAPTER: bench.switchboard_spec(**where),
            },
        )
    await pg.close()
    await client.aclose()


# --------------------------------------------------------------------------------------------
# Printing
# --------------------------------------------------------------------------------------------


def fmt(value: float | None, width: int, digits: int = 2) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


def ratio(a: float | None, b: float | None, width: int) -> str:
    if a is None or not b:
        return f"{'-':>{width}}"
    return f"{a / b:>{width - 1}.2f}×"


def render_floor(bench: Bench) -> None:
    print(
        f"\nOne request that does nothing (GET {NO_SUCH_ENDPOINT}: the API's JSON 404, no "
        "database), through an adapter's client and the server: the least any operation "
        "making one request costs"
    )
    print(
        f"{'operation':<28}{'p50 ms':>9}{'p95 ms':>9}{'req/op':>8}"
        f"{'CPU ms/op: bench':>18}{'server':>8}{'total':>8}"
    )
    for r in (r for r in bench.rows if r.framework == FLOOR):
        print(
            f"{r.operation:<28}{ib.pct(r.latencies, 0.5):>9.2f}{ib.pct(r.latencies, 0.95):>9.2f}"
            f"{fmt(r.requests, 8, 1)}{r.bench_cpu_ms:>18.2f}{fmt(r.server_cpu_ms, 8)}"
            f"{r.bench_cpu_ms + (r.server_cpu_ms or 0.0):>8.2f}"
        )


def floor_p50(bench: Bench, framework: str) -> float | None:
    """The p50 of one request that does nothing, through the client the framework's adapter
    uses (LangGraph's saver: sync; the others: async)."""
    kind = "sync" if framework == "langgraph" else "async"
    rows = [r for r in bench.rows if r.framework == FLOOR and kind in r.operation]
    return statistics.median(rows[0].latencies) if rows else None


def render(bench: Bench, frameworks: list[str]) -> None:
    render_floor(bench)
    for framework in frameworks:
        names = STORE_NAMES[framework]
        print(f"\n{TITLES[framework]}: " + ", ".join(f"{k} = {v}" for k, v in names.items()))
        print(
            f"{'operation':<22}{'items':>6}  {'store':<26}{'p50 ms':>9}{'p95 ms':>9}"
            f"{'req/op':>8}{'CPU ms/op: bench':>18}{'server':>8}{'pg':>7}{'total':>8}"
        )
        rows = [r for r in bench.rows if r.framework == framework]
        keys = list(dict.fromkeys((r.items, r.operation) for r in rows))
        keys.sort(key=lambda k: k[0])
        for items, operation in keys:
            by_store = {r.store: r for r in rows if (r.items, r.operation) == (items, operation)}
            for store in (DEFAULT, PG, ADAPTER):
                r = by_store[store]
                print(
                    f"{operation:<22}{items:>6}  {names[store]:<26}"
                    f"{ib.pct(r.latencies, 0.5):>9.2f}{ib.pct(r.latencies, 0.95):>9.2f}"
                    f"{fmt(r.requests, 8, 1)}{r.bench_cpu_ms:>18.2f}{fmt(r.server_cpu_ms, 8)}"
                    f"{fmt(r.pg_cpu_ms, 7)}{r.cpu_ms:>8.2f}"
                )
            a, p = by_store[ADAPTER], by_store[PG]
            print(
                f"{'':<28}  {'adapter / own PostgreSQL':<26}"
                f"{ratio(statistics.median(a.latencies), statistics.median(p.latencies), 9)}"
                f"{ratio(ib.pct(a.latencies, 0.95), ib.pct(p.latencies, 0.95), 9)}"
                f"{'':>8}{'':>18}{'':>8}{'':>7}{ratio(a.cpu_ms, p.cpu_ms, 8)}"
            )
            print(
                f"{'':<28}  {'own PostgreSQL / 1 request':<26}"
                f"{ratio(statistics.median(p.latencies), floor_p50(bench, framework), 9)}"
            )
        print(
            f"\n{'bytes stored per item':<28}  {'store':<26}"
            + "".join(f"{n:>10}" for n in dict.fromkeys(i for i, _ in keys))
        )
        sizes = list(dict.fromkeys(i for i, _ in keys))
        for store in (DEFAULT, PG, ADAPTER):
            cells = "".join(
                fmt(bench.bytes_per_item.get((framework, n, store)), 10, 0) for n in sizes
            )
            print(f"{'':<28}  {names[store]:<26}{cells}")
        cells = "".join(
            ratio(
                bench.bytes_per_item.get((framework, n, ADAPTER)),
                bench.bytes_per_item.get((framework, n, PG)),
                10,
            )
            for n in sizes
        )
        print(f"{'':<28}  {'adapter / own PostgreSQL':<26}{cells}")
        fresh = [f for f in bench.fresh if f.framework == framework]
        print(
            f"\n{'open from a fresh process':<22}{'items':>6}  {'store':<26}"
            f"{'first read p50 ms':>18}{'p95':>8}{'process wall p50 ms':>21}{'p95':>8}"
            f"{'read':>6}"
        )
        for items in sizes:
            by_store = {f.store: f for f in fresh if f.items == items}
            fresh_names = {**names, FLOOR: "floor: 1 request, httpx"}
            for store in (PG, ADAPTER, FLOOR):
                f = by_store[store]
                read = "-" if store == FLOOR else f.read_items
                print(
                    f"{'':<22}{items:>6}  {fresh_names[store]:<26}"
                    f"{ib.pct(f.first_read_ms, 0.5):>18.2f}{ib.pct(f.first_read_ms, 0.95):>8.2f}"
                    f"{ib.pct(f.process_ms, 0.5):>21.0f}{ib.pct(f.process_ms, 0.95):>8.0f}"
                    f"{read:>6}"
                )
            a, p = by_store[ADAPTER], by_store[PG]
            first = ratio(
                statistics.median(a.first_read_ms), statistics.median(p.first_read_ms), 18
            )
            wall = ratio(statistics.median(a.process_ms), statistics.median(p.process_ms), 21)
            print(f"{'':<28}  {'adapter / own PostgreSQL':<26}{first}{'':>8}{wall}")


# --------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default=ib.scratch_name("switchboard_bench_frameworks"))
    parser.add_argument(
        "--stores-db",
        default=ib.scratch_name("switchboard_bench_fwstores"),
        help="the frameworks' own PostgreSQL stores' scratch database (same server)",
    )
    parser.add_argument(
        "--items", type=int, default=5000, help="the largest history (checkpoints 100, 1,000, …)"
    )
    parser.add_argument("--reps", type=int, default=50, help="calls per operation and store")
    parser.add_argument(
        "--turn-reps", type=int, default=10, help="calls of the whole turns and LangGraph's list"
    )
    parser.add_argument("--fresh-runs", type=int, default=5, help="fresh processes per store")
    parser.add_argument("--adk-sessions", type=int, default=10, help="the ADK user's sessions")
    parser.add_argument(
        "--only", choices=list(TITLES), action="append", help="one framework (repeatable)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--server",
        choices=[ib.UVICORN, ib.GRANIAN_WSGI],
        default=ib.UVICORN,
        help="the server the adapters talk to: uvicorn config.asgi:application (what "
        "scripts/run starts; default) or granian's WSGI server with config.wsgi:application "
        "(the production split's WSGI side, README \"Production\", where the API's plain HTTP "
        "goes)",
    )
    ib.add_smoke_flag(parser)
    args = parser.parse_args()
    ib.smoke(args, items=12, reps=2, turn_reps=1, fresh_runs=1, adk_sessions=2)
    frameworks = args.only or list(TITLES)
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)

    ib.log(f"recreating databases {args.db} (migrated) and {args.stores_db}")
    recreate_database(args.stores_db)
    _, key, server = ib.agent_server(args, "bench-frameworks")
    meter_conn = ib.pg_connect(args.stores_db)
    sb_conn = ib.pg_connect(args.db)
    bench = Bench(
        args=args,
        server=server,
        base=f"http://127.0.0.1:{server.port}",
        key=key,
        sb_db=args.db,
        pg_db=args.stores_db,
        meter_conn=meter_conn,
        sb_conn=sb_conn,
        rng=random.Random(args.seed),
        namespace=f"fwbench-{time.time_ns()}/",
    )
    try:
        server.wait_ready(key, "/healthz")
        load = os.getloadavg()
        started = time.perf_counter()
        request_floor(bench)
        if "openai_agents" in frameworks:
            asyncio.run(openai_agents(bench))
        if "langgraph" in frameworks:
            langgraph(bench)
        if "adk" in frameworks:
            asyncio.run(adk(bench))
        took = time.perf_counter() - started
        load_after = os.getloadavg()
    finally:
        meter_conn.close()
        sb_conn.close()
        server.stop()

    with contextlib.closing(ib.pg_connect(args.db)) as conn:
        (autovacuum,) = conn.execute("SHOW autovacuum").fetchone()
    print(
        f"\nautovacuum is {autovacuum} on this PostgreSQL; both databases are vacuumed "
        "(VACUUM ANALYZE) after each growth, before its measurements"
    )
    print(
        f"\nframework stores: {server.label}; the frameworks' PostgreSQL stores on the same "
        f"PostgreSQL ({args.stores_db}); --reps {args.reps}, --turn-reps {args.turn_reps}, "
        f"--fresh-runs {args.fresh_runs}; {took:.0f} s; load average {load[0]:.1f} before, "
        f"{load_after[0]:.1f} after ({os.cpu_count()} cores)"
    )
    render(bench, frameworks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
