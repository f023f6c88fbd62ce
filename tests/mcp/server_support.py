"""What the MCP server's tests share: a booking definition with typed keys, a reply file that plays a conversation
to its end, and an SDK client on the server in the same process (no transport, no subprocess)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from llm_fsm.cli._models import make_llm
from llm_fsm.manager import FSMManager
from llm_fsm.mcp_server import create_mcp_server

BOOKING = """\
name: Table booking
description: Book a table; collects the guest's name and the party size
initial_state: ask_name
context_keys:
  guest_name: {type: string, description: Who the table is for}
  party_size: {type: integer, description: How many people, minimum: 1, maximum: 12}
  card: {type: string, sensitive: true}
states:
  ask_name:
    id: ask_name
    description: Asking the name
    purpose: Ask for the guest's name
    transitions:
      - target_state: ask_size
        description: The name is known
        conditions:
          - description: name recorded
            requires_context_keys: [guest_name]
  ask_size:
    id: ask_size
    description: Asking the party size
    purpose: Ask how many people are coming
    transitions:
      - target_state: booked
        description: The party size is known
        conditions:
          - description: size recorded
            requires_context_keys: [party_size]
  booked:
    id: booked
    description: Booked
    purpose: Confirm the booking
    transitions: []
"""

REPLIES: list[Any] = [
    "Hello! Under which name shall I book?",
    {"target_state": "ask_size", "context_update": {"guest_name": "Ann"}, "message": "Thanks, Ann. How many people?"},
    {"target_state": "booked", "context_update": {"party_size": 4}, "message": "Booked a table for 4."},
]

_T = TypeVar("_T")


def write_booking(folder: Path) -> tuple[Path, Path]:
    """The definition (id ``booking``) and the reply file, written into ``folder``."""
    definition = folder / "booking.yaml"
    definition.write_text(BOOKING, encoding="utf-8")
    replies = folder / "replies.json"
    replies.write_text(json.dumps(REPLIES), encoding="utf-8")
    return definition, replies


def scripted_manager(replies: Path, **options: Any) -> FSMManager:
    return FSMManager(llm_interface=make_llm(f"scripted:{replies}"), store="memory://", **options)


def booking(folder: Path, *, user_id: str | None = "alice", **options: Any) -> tuple[MCPServer, FSMManager]:
    """A server of the booking definition for ``user_id``, and the manager behind it."""
    definition, replies = write_booking(folder)
    manager = scripted_manager(replies, **options)
    return create_mcp_server(manager, [definition], user_id=user_id), manager


def booking_server(folder: Path, *, user_id: str | None = "alice", **options: Any) -> MCPServer:
    return booking(folder, user_id=user_id, **options)[0]


def drive(server: MCPServer, steps: Callable[[Client], Awaitable[_T]]) -> _T:
    """Run ``steps`` with an SDK client connected to ``server`` in this process."""

    async def main() -> _T:
        async with Client(server) as client:
            return await steps(client)

    return asyncio.run(main())


def calling(tool: str, arguments: dict[str, Any]) -> Callable[[Client], Awaitable[CallToolResult]]:
    """The steps of one call of ``tool`` (bound now, so a loop's next values do not change it)."""
    return lambda client: client.call_tool(tool, arguments)


def data(result: CallToolResult) -> dict[str, Any]:
    """A successful call's structured content (a tool error fails the test with its text)."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


def error(result: CallToolResult) -> dict[str, Any]:
    """A failed call's error: its code and message (structured), and the text the model reads beside it."""
    assert result.is_error, result.structured_content
    assert result.structured_content is not None
    found = dict(result.structured_content["error"])
    text = result.content[0]
    assert getattr(text, "text", "") == f"{found['code']}: {found['message']}"
    return found


async def play_to_the_end(client: Client) -> tuple[str, list[dict[str, Any]]]:
    """Start a booking and send messages until it ends; the conversation id and every turn's answer."""
    started = data(await client.call_tool("start_conversation", {"definition": "booking"}))
    conversation_id = str(started["conversation_id"])
    turns = []
    for message in ("Ann", "four of us"):
        turns.append(
            data(await client.call_tool("send_message", {"conversation_id": conversation_id, "message": message}))
        )
        if turns[-1]["ended"]:
            break
    return conversation_id, turns
