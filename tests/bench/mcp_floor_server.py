"""The MCP status row's floor: an MCP server whose one tool answers ``status``'s very answer from
memory, read once at start-up (``python -m tests.bench.mcp_floor_server REPO``). Timed as the
server is, it is what the SDK's round trip of an answer that size costs, nothing read."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pydantic_core
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent

from guardkit_state.mcp_server import answers


def main() -> None:
    answer = answers.status(Path(sys.argv[1]).resolve())
    result = CallToolResult(content=[TextContent(type="text", text=pydantic_core.to_json(answer).decode())],
                            structured_content=answer)
    server: MCPServer[Any] = MCPServer("floor")

    def status() -> dict[str, Any]:
        """status's answer, from memory."""
        return result  # type: ignore[return-value]  # a ready result, as the server's read tools return

    server.add_tool(status, name="status", description="status's answer from memory", structured_output=True)
    server.run("stdio")


if __name__ == "__main__":
    main()
