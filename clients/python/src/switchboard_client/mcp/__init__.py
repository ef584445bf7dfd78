"""An MCP server on Switchboard: any MCP-capable agent asks a person (question, approval,
take-over) in the handoff queue, records events and reads a session's state.

    switchboard-mcp --namespace claude/      # or: python -m switchboard_client.mcp

over stdio, with SWITCHBOARD_URL and SWITCHBOARD_API_KEY in its environment
(docs/adapters/mcp.md). Needs the `mcp` extra: pip install "switchboard-client[mcp]".
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import anyio

from .._async_client import AsyncClient
from ..errors import ConfigurationError
from .server import DEFAULT_AGENT, DEFAULT_POLL, PersonAnswer, build_server

__all__ = ["PersonAnswer", "build_server", "main"]

ENVIRONMENT = ("SWITCHBOARD_URL", "SWITCHBOARD_API_KEY")


def main(argv: Sequence[str] | None = None) -> None:
    """The `switchboard-mcp` command: the server over stdio until the client hangs up."""
    parser = argparse.ArgumentParser(
        prog="switchboard-mcp",
        description="MCP server (stdio) of Switchboard: ask_person, record_event, read_state. "
        "Reads SWITCHBOARD_URL and SWITCHBOARD_API_KEY.",
    )
    parser.add_argument(
        "--namespace", default="", help="prefix of every session name the tools are given"
    )
    parser.add_argument(
        "--agent", default=DEFAULT_AGENT, help="the agent the sessions are opened for"
    )
    parser.add_argument(
        "--poll",
        type=int,
        default=DEFAULT_POLL,
        help="seconds per long-poll while a person is asked (1 to 60; progress after each)",
    )
    options = parser.parse_args(argv)
    try:
        client = AsyncClient()
    except ConfigurationError:
        # Said before the client's first request: a server without a key can do nothing.
        missing = [name for name in ENVIRONMENT if not os.environ.get(name)]
        print(
            f"switchboard-mcp: set {' and '.join(missing)} in the server's environment "
            '(the "env" of its entry in the MCP client\'s configuration).',
            file=sys.stderr,
        )
        raise SystemExit(2) from None

    async def serve() -> None:
        async with client:
            server = build_server(
                client, namespace=options.namespace, agent=options.agent, poll=options.poll
            )
            await server.run_stdio_async()

    anyio.run(serve)
