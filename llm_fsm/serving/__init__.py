"""What every way of serving conversations shares: the served definitions by id, and the one error mapping.

The HTTP API (``llm_fsm.server``, FastAPI) and the MCP server (``llm_fsm.mcp_server``, the MCP SDK) are siblings
that may not import each other and need different extras; both offer the same definitions under the same ids and
answer the same failures with the same stable codes. Nothing here needs a web framework.
"""

from __future__ import annotations
