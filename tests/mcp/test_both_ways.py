"""MCP both ways in one conversation: an agent platform drives ``llm-fsm mcp`` over stdio, and the definition it
runs asks another MCP server for a ticket's status (``call: mcp:helpdesk/ticket_status`` with ``--mcp``), so the
data the platform reads back came from that server through the engine's guarded transitions."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from llm_fsm.cli import main; main()"]
REPLIES = [
    "Hello! I can tell you where your support ticket stands. What is its number?",
    {"context_update": {"ticket_id": "T-1001"}, "message": "Let me check T-1001 for you."},
    "Good news: your refund for order 5521 is resolved.",
]


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result
    content = result.structured_content
    assert isinstance(content, dict)
    return content


def test_a_platform_reads_back_what_the_definitions_own_mcp_tool_answered(tmp_path: Path) -> None:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(REPLIES), encoding="utf-8")
    arguments = [
        "mcp", str(ROOT / "definitions" / "ticket_status.yaml"),
        "--mcp", str(ROOT / "definitions" / "mcp" / "mcp.json"),
        "--model", f"scripted:{replies}", "--store", "memory://", "--user", "agent",
    ]  # fmt: skip
    server = StdioServerParameters(command=CLI[0], args=[*CLI[1:], *arguments], env=dict(os.environ))

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(server) as client:
            started = _data(await client.call_tool("start_conversation", {"definition": "ticket_status"}))
            cid = started["conversation_id"]
            sent = _data(await client.call_tool("send_message", {"conversation_id": cid, "message": "T-1001?"}))
            return sent, _data(await client.call_tool("get_state", {"conversation_id": cid}))

    sent, state = asyncio.run(main())
    assert sent["state"] == "resolved"
    assert state["data"]["ticket"]["status"] == "resolved"
    assert state["data"]["ticket"]["subject"] == "Refund for order 5521"
