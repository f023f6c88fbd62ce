"""MCP servers' tools as actions: ``call: mcp:crm/lookup_customer`` runs tool ``lookup_customer`` of server ``crm``.

``MCPTools`` is a source of action functions: attached to an ``ActionRegistry`` (``registry.attach(tools)``,
``FSMManager(actions=...)``, ``--mcp CONFIG``) it answers every ``mcp:SERVER/TOOL`` name whose server is
configured with a function that calls the tool. Everything an action has — inputs, outputs, the timeout, the
pool's bound on hung calls, ``on_error``, the idempotency key, the turn record — is the registry's and the
engine's, unchanged: a tool call is one more action function, not a second way to run one.

The tool's result becomes the action's value: its ``structuredContent`` when it gives one, else its text parsed as
JSON when it parses, else the text. ``isError``, a server that dies mid-call, hangs or cannot be reached raise
``MCPToolError`` inside the function, which the registry records as the action's failure.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, cast

from llm_fsm.definition._actions import MCP_PREFIX as PREFIX
from llm_fsm.definition._actions import mcp_tool_of as parse_name
from llm_fsm.engine._actions import ActionCall
from llm_fsm.errors import MCPToolError
from llm_fsm.mcp._client import CONNECT_TIMEOUT_S, MCPConnections, _cause
from llm_fsm.mcp._config import MCPConfig, load_config

IDEMPOTENCY_META_KEY = "llm-fsm/idempotencyKey"
"""Where a call's idempotency key travels, in the request's ``_meta``: a tool that books or pays can do it once
across the retries of one turn, as an action function reading ``call.idempotency_key`` can."""

TIMEOUT_GRACE_S = 0.1
"""How much longer than the action's timeout the call itself may take, so the registry's timeout is the one
recorded (``outcome: timeout``) and the call is then cancelled on the server."""

LIST_TIMEOUT_S = 15.0
"""How long ``tool_schemas`` waits for each server (lint must finish even when a server hangs)."""


class _ToolFunction:
    """The action function of one tool (what ``ActionRegistry`` registers under ``mcp:SERVER/TOOL``)."""

    def __init__(self, tools: MCPTools, server: str, tool: str) -> None:
        self.tools = tools
        self.server = server
        self.tool = tool

    def __call__(self, call: ActionCall, **arguments: Any) -> Any:
        return self.tools.call_tool(
            self.server, self.tool, arguments, timeout=call.timeout_s, idempotency_key=call.idempotency_key
        )

    def __repr__(self) -> str:
        return f"<MCP tool {self.tool!r} of server {self.server!r}>"


class MCPTools:
    """The tools of the servers in an MCP config, callable as actions. Close it (or use ``with``) to stop them."""

    def __init__(self, config: MCPConfig | str | Path) -> None:
        self.config = config if isinstance(config, MCPConfig) else load_config(config)
        self._connections = MCPConnections(self.config)

    def __enter__(self) -> MCPTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End every session; stdio servers' processes exit. Also done at interpreter exit."""
        self._connections.close()

    # --- as a source of action functions ----------------------------------------------------------------

    def resolve(self, name: str) -> _ToolFunction | None:
        """The function for action ``name`` when it is ``mcp:SERVER/TOOL`` of a configured server, else None."""
        parsed = parse_name(name)
        if parsed is None or parsed[0] not in self.config.servers:
            return None
        return _ToolFunction(self, *parsed)

    # --- calls ------------------------------------------------------------------------------------------------

    def call_tool(
        self, server: str, tool: str, arguments: dict[str, Any], *, timeout: float, idempotency_key: str | None = None
    ) -> Any:
        """Call ``tool`` and return its value (see the module docstring); ``MCPToolError`` when there is none."""
        meta = {IDEMPOTENCY_META_KEY: idempotency_key} if idempotency_key else None
        return self._connections.run(self._call(server, tool, arguments, timeout, meta))

    async def _call(
        self, server: str, tool: str, arguments: dict[str, Any], timeout: float, meta: dict[str, Any] | None
    ) -> Any:
        started = time.monotonic()
        try:
            return await asyncio.wait_for(self._send(server, tool, arguments, meta), timeout + TIMEOUT_GRACE_S)
        except TimeoutError:
            raise MCPToolError(
                f"tool {tool!r} of MCP server {server!r} did not answer within {time.monotonic() - started:.1f} s"
            ) from None

    async def _send(self, server: str, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None) -> Any:
        from mcp import MCPError
        from mcp_types import CONNECTION_CLOSED

        client = await self._connections.connection(server, CONNECT_TIMEOUT_S)
        try:
            result = await client.call_tool(tool, arguments, meta=cast(Any, meta))
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                words = await self._connections.drop(server)
                raise MCPToolError(
                    f"the connection to MCP server {server!r} was lost during the call to {tool!r} (did the server "
                    f"exit?){words}"
                ) from None
            raise MCPToolError(f"MCP server {server!r} refused the call to {tool!r}: {exc.message}") from None
        except Exception as exc:  # a transport failure (HTTP), a result that is not MCP: this connection is done
            words = await self._connections.drop(server)
            raise MCPToolError(f"calling {tool!r} on MCP server {server!r} failed: {_cause(exc)}{words}") from None
        return tool_value(result, server, tool)

    # --- what servers offer (for lint) --------------------------------------------------------------------

    def tool_schemas(self, timeout: float = LIST_TIMEOUT_S) -> dict[str, dict[str, dict[str, Any]] | str]:
        """Each server's tools (name → input JSON Schema), or why it could not be listed; every server is
        asked at once and none takes longer than ``timeout``."""

        async def one(server: str) -> dict[str, dict[str, Any]] | str:
            try:
                return await asyncio.wait_for(self._list(server), timeout)
            except TimeoutError:
                return f"it did not list its tools within {timeout:g} s"
            except MCPToolError as exc:
                return str(exc)
            except Exception as exc:  # noqa: BLE001 - lint reports a server it cannot list, it does not crash
                return _cause(exc)

        async def every() -> dict[str, dict[str, dict[str, Any]] | str]:
            names = sorted(self.config.servers)
            found = await asyncio.gather(*(one(name) for name in names))
            return dict(zip(names, found, strict=True))

        return self._connections.run(every(), timeout=timeout + CONNECT_TIMEOUT_S + 5)

    async def _list(self, server: str) -> dict[str, dict[str, Any]]:
        client = await self._connections.connection(server, CONNECT_TIMEOUT_S)
        tools: dict[str, dict[str, Any]] = {}
        cursor: str | None = None
        for _ in range(100):  # a server whose pages never end cannot hang lint
            page = await client.list_tools(cursor=cursor)
            tools.update({tool.name: dict(tool.input_schema or {}) for tool in page.tools})
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools


def tool_value(result: Any, server: str, tool: str) -> Any:
    """A ``CallToolResult`` as the action's value (see the module docstring)."""
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    text = "\n".join(texts)
    if result.is_error:
        said = text.strip()[:500] or "no message"
        raise MCPToolError(f"tool {tool!r} of MCP server {server!r} answered an error: {said}")
    if result.structured_content is not None:
        return result.structured_content
    if len(texts) != len(result.content):  # images, audio, resources: kept as the protocol gives them
        return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]
    try:
        return json.loads(text)
    except ValueError:
        return text


__all__ = ["IDEMPOTENCY_META_KEY", "MCPTools", "PREFIX", "parse_name", "tool_value"]
