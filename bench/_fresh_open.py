"""A fresh process opening a thread or session and doing its first read, as an application that
has just started does: bench/frameworks.py runs it once per sample, with one JSON argument, and
times the whole process from outside.

    python bench/_fresh_open.py '{"framework": "langgraph", "store": "pg", ...}'

With "store": "floor" it makes one request through httpx alone instead (the floor of any
adapter's first read). Otherwise it imports only the framework and the store (nothing of
Switchboard's server, nothing of the other benches), builds the store, does the first read
(OpenAI: get_items(50); LangGraph: get_tuple of the thread's latest checkpoint; ADK:
get_session with num_recent_events=50), and
prints one JSON line: how long the imports and the build took, how long the first read took,
and how many items it read (so the caller sees it read the thread it meant).
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import asyncio  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402


def openai_agents(spec: dict[str, Any]) -> tuple[float, float, int]:
    async def main() -> tuple[float, float, int]:
        session: Any
        if spec["store"] == "pg":
            from agents.extensions.memory import SQLAlchemySession

            session = SQLAlchemySession.from_url(spec["id"], url=spec["url"])
        else:
            from switchboard_client import AsyncClient
            from switchboard_client.openai_agents import SwitchboardSession

            client = AsyncClient(spec["url"], spec["key"])
            session = SwitchboardSession(spec["id"], client, namespace=spec["namespace"])
        built = time.perf_counter()
        items = await session.get_items(50)
        read = time.perf_counter()
        return built, read, len(items)

    return asyncio.run(main())


def langgraph(spec: dict[str, Any]) -> tuple[float, float, int]:
    config: Any = {"configurable": {"thread_id": spec["id"], "checkpoint_ns": ""}}
    if spec["store"] == "pg":
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(spec["url"]) as saver:
            built = time.perf_counter()
            found = saver.get_tuple(config)
            read = time.perf_counter()
    else:
        from switchboard_client import Client
        from switchboard_client.langgraph import SwitchboardSaver

        sb = SwitchboardSaver(Client(spec["url"], spec["key"]), namespace=spec["namespace"])
        built = time.perf_counter()
        found = sb.get_tuple(config)
        read = time.perf_counter()
    assert found is not None, "no checkpoint found"
    return built, read, len(found.checkpoint["channel_values"].get("messages", []))


def adk(spec: dict[str, Any]) -> tuple[float, float, int]:
    async def main() -> tuple[float, float, int]:
        from google.adk.sessions.base_session_service import GetSessionConfig

        service: Any
        if spec["store"] == "pg":
            from google.adk.sessions.database_session_service import DatabaseSessionService

            service = DatabaseSessionService(db_url=spec["url"])
        else:
            from switchboard_client import AsyncClient
            from switchboard_client.adk import SwitchboardSessionService

            client = AsyncClient(spec["url"], spec["key"])
            service = SwitchboardSessionService(client, namespace=spec["namespace"])
        built = time.perf_counter()
        session = await service.get_session(
            app_name=spec["app"],
            user_id=spec["user"],
            session_id=spec["id"],
            config=GetSessionConfig(num_recent_events=50),
        )
        read = time.perf_counter()
        assert session is not None, "no session found"
        return built, read, len(session.events)

    return asyncio.run(main())


def floor(spec: dict[str, Any]) -> tuple[float, float, int]:
    """The least a first read can take here: one request through httpx, the adapters' HTTP
    library (sync or async as the framework's adapter), to a path that does nothing."""
    import httpx

    if spec["mode"] == "sync":
        with httpx.Client() as client:
            built = time.perf_counter()
            client.get(spec["url"])
            return built, time.perf_counter(), 0

    async def main() -> tuple[float, float, int]:
        async with httpx.AsyncClient() as client:
            built = time.perf_counter()
            await client.get(spec["url"])
            return built, time.perf_counter(), 0

    return asyncio.run(main())


def main() -> int:
    spec = json.loads(sys.argv[1])
    opener = {"openai_agents": openai_agents, "langgraph": langgraph, "adk": adk}
    if spec["store"] == "floor":
        built, read, items = floor(spec)
    else:
        built, read, items = opener[spec["framework"]](spec)
    print(
        json.dumps(
            {
                "build_ms": (built - STARTED) * 1000,
                "first_read_ms": (read - built) * 1000,
                "items": items,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
