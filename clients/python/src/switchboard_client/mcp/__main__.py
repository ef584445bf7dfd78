"""python -m switchboard_client.mcp: the MCP server over stdio (see the package's docstring)."""

from . import main

main()
