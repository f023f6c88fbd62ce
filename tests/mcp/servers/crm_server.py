"""A small CRM as an MCP server, for the tests of MCP tools as actions (``call: mcp:crm/...``).

``python crm_server.py`` serves over stdio; ``crm_app()`` is the streamable HTTP app the tests run under uvicorn.
Besides the plain tools it has the faults the client must survive: a tool that errors, one that exits the
process mid-call, one that hangs.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("crm", log_level="WARNING")

CUSTOMERS = {"C-1001": {"name": "Ada Lovelace", "tier": "premium"}, "C-1002": {"name": "Alan Turing", "tier": "basic"}}
calls = {"count": 0}


@server.tool()
def lookup_customer(customer_id: str) -> dict[str, Any]:
    """A customer's name and tier."""
    calls["count"] += 1
    if customer_id not in CUSTOMERS:
        raise ToolError(f"no customer {customer_id}")
    return {"customer_id": customer_id, **CUSTOMERS[customer_id]}


@server.tool()
def greeting(name: str) -> str:
    """Plain text, not JSON."""
    return f"Hello, {name}!"


@server.tool()
def process() -> dict[str, int]:
    """Which process answers, and how many lookups it served: one process serves every call."""
    return {"pid": os.getpid(), "lookups": calls["count"]}


@server.tool()
def crash(customer_id: str) -> dict[str, Any]:
    """Dies in the middle of the call."""
    sys.stderr.write("crm: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
async def hang(customer_id: str) -> dict[str, Any]:
    """Never answers in any test's time."""
    await asyncio.sleep(600)
    return {}


@server.tool()
def request_meta(customer_id: str, ctx: Context) -> dict[str, Any]:
    """The request's _meta, as the server received it."""
    meta = ctx.request_context.meta or {}
    return {"meta": {k: v for k, v in dict(meta).items() if isinstance(v, (str, int, float))}}


@server.tool()
def open_ticket(customer_id: str, priority: int, summary: str, tags: list[str] | None = None) -> dict[str, Any]:
    """A tool with a schema worth linting against: required, typed and optional inputs."""
    return {"ticket": f"T-{priority}-{customer_id}", "summary": summary, "tags": tags or []}


def crm_app() -> Any:
    return server.streamable_http_app()


if __name__ == "__main__":
    server.run()
