"""Tools of MCP servers as actions (``call: mcp:SERVER/TOOL``), with the official ``mcp`` SDK (the ``mcp`` extra).

    tools = MCPTools("mcp.json")            # {"mcpServers": {"crm": {"command": ...}, "tickets": {"url": ...}}}
    manager = FSMManager(actions=ActionRegistry().attach(tools))
    ...
    tools.close()                           # stdio servers exit (also at interpreter exit)

Importing this package does not import the SDK: a server is connected on its first call.
"""

from llm_fsm.mcp._config import HTTPServer, MCPConfig, StdioServer, load_config
from llm_fsm.mcp._tools import MCPTools, parse_name

__all__ = ["HTTPServer", "MCPConfig", "MCPTools", "StdioServer", "load_config", "parse_name"]
