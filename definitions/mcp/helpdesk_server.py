"""The help desk's ticket system as an MCP server (fake data), for definitions/ticket_status.yaml.

Run by the MCP client as a subprocess over stdio, as definitions/mcp/mcp.json says:

    llm-fsm chat definitions/ticket_status.yaml --mcp definitions/mcp/mcp.json --model gpt-4o-mini
    llm-fsm test definitions/ --mcp definitions/mcp/mcp.json

A real team points mcp.json at its own ticketing system's MCP server instead; the definition does not change.
Needs the official SDK (pip install 'llm_fsm[mcp]').
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("helpdesk", log_level="WARNING")

#: the conversation scripts (definitions/conversations/ticket_status.conv.yaml) and docs/mcp.md describe these
TICKETS: dict[str, dict[str, Any]] = {
    "T-1001": {
        "subject": "Refund for order 5521",
        "status": "resolved",
        "updated": "2026-11-20",
        "next_step": "The refund of 49.90 EUR was sent to the original card; it shows within 5 working days.",
    },
    "T-1002": {
        "subject": "Router keeps disconnecting",
        "status": "in_progress",
        "updated": "2026-11-26",
        "next_step": "A technician is testing the line; expect an update by Monday.",
    },
    "T-1003": {
        "subject": "Change of billing address",
        "status": "waiting_on_customer",
        "updated": "2026-11-24",
        "next_step": "We need a photo of a utility bill showing the new address.",
    },
}


@server.tool()
def ticket_status(ticket_id: str) -> dict[str, Any]:
    """A support ticket's subject, status (open, in_progress, waiting_on_customer, resolved), last update and the
    next step, by its number (T-1234)."""
    ticket = TICKETS.get(ticket_id.strip().upper())
    if ticket is None:
        raise ToolError(f"no ticket {ticket_id}")
    return {"ticket_id": ticket_id, **ticket}


if __name__ == "__main__":
    server.run()
