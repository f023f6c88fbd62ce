"""Conversations served over MCP (the ``mcp`` extra): ``create_mcp_server(manager, definitions)`` and
``llm-fsm mcp``, so an agent platform can hand a structured sub-task (a booking, a form) to a definition and get
typed data back.

Importing ``llm_fsm`` never imports this package (it needs the MCP SDK); see docs/mcp.md.
"""

from __future__ import annotations

from llm_fsm.mcp_server._server import INSTRUCTIONS, SERVER_NAME, create_mcp_server
from llm_fsm.mcp_server._tools import Tenant

__all__ = ["INSTRUCTIONS", "SERVER_NAME", "Tenant", "create_mcp_server"]
