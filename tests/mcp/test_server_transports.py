"""``llm-fsm mcp`` as an agent platform runs it: an SDK client drives a conversation to its end over stdio (the
platform starts the command) and over streamable HTTP (a server this test starts on an ephemeral port and stops),
and the command refuses, with one ``error:`` line and exit 2, what it cannot serve."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from server_support import data, play_to_the_end, write_booking

CLI = [sys.executable, "-c", "from llm_fsm.cli import main; main()"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _mcp(*args: str, env: dict[str, str] | None = None, seconds: float = 30) -> tuple[int, str, str]:
    """Run ``llm-fsm mcp`` to its exit (stdin closed: a stdio server that starts ends at once)."""
    done = subprocess.run(
        [*CLI, "mcp", *args], capture_output=True, text=True, timeout=seconds, stdin=subprocess.DEVNULL, env=env
    )
    return done.returncode, done.stdout, done.stderr


async def _end_to_end(client: Client) -> dict[str, Any]:
    conversation_id, turns = await play_to_the_end(client)
    assert turns[-1]["ended"] is True
    return data(await client.call_tool("get_state", {"conversation_id": conversation_id}))


def test_an_mcp_client_drives_a_conversation_to_its_end_over_stdio(tmp_path: Path) -> None:
    definition, replies = write_booking(tmp_path)
    store = f"sqlite:///{tmp_path / 'conversations.db'}"
    arguments = ["mcp", str(definition), "--model", f"scripted:{replies}", "--store", store, "--user", "agent"]
    server = StdioServerParameters(command=CLI[0], args=[*CLI[1:], *arguments], env=dict(os.environ))

    async def main() -> dict[str, Any]:
        async with Client(server) as client:
            return await _end_to_end(client)

    state = asyncio.run(main())
    assert state["ended"] is True and state["data"] == {"guest_name": "Ann", "party_size": 4}


def test_an_mcp_client_drives_a_conversation_to_its_end_over_streamable_http(tmp_path: Path) -> None:
    definition, replies = write_booking(tmp_path)
    process = subprocess.Popen(
        [*CLI, "mcp", str(definition), "--model", f"scripted:{replies}", "--store", "memory://",
         "--transport", "http", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        said = [process.stdout.readline() for _ in range(4)]
        assert said[-1].startswith("listening on http://127.0.0.1:"), said
        url = said[-1].split()[2]
        assert url.endswith("/mcp")

        async def main() -> dict[str, Any]:
            async with Client(url) as client:
                return await _end_to_end(client)

        state = asyncio.run(main())
        assert state["ended"] is True and state["data"] == {"guest_name": "Ann", "party_size": 4}
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_a_stdio_server_says_nothing_on_stdout_but_the_protocol(tmp_path: Path) -> None:
    definition, replies = write_booking(tmp_path)
    code, out, err = _mcp(str(definition), "--model", f"scripted:{replies}", "--store", "memory://")
    assert code == 0 and out == "", (out, err)
    assert "model: scripted:" in err  # what it serves is said on stderr


def test_without_definitions_the_command_exits_2_with_one_error_line() -> None:
    code, out, err = _mcp("--model", "scripted:x.yaml")
    assert code == 2 and err == "error: name at least one definition file or folder to serve\n", err


def test_without_a_model_the_command_exits_2_naming_the_option(tmp_path: Path) -> None:
    definition, _ = write_booking(tmp_path)
    env = {name: value for name, value in os.environ.items() if name != "LLM_FSM_MODEL"}
    code, _, err = _mcp(str(definition), "--store", "memory://", env=env)
    assert code == 2 and err.startswith("error: no model configured: pass --model") and err.count("\n") == 1, err


def test_an_unknown_definition_file_exits_2_with_one_error_line(tmp_path: Path) -> None:
    _, replies = write_booking(tmp_path)
    code, _, err = _mcp(str(tmp_path / "nowhere.yaml"), "--model", f"scripted:{replies}", "--store", "memory://")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and "nowhere.yaml" in err, err


def test_http_on_an_address_others_reach_is_refused_with_exit_2(tmp_path: Path) -> None:
    definition, replies = write_booking(tmp_path)
    code, _, err = _mcp(str(definition), "--model", f"scripted:{replies}", "--transport", "http", "--host", "0.0.0.0")
    assert code == 2 and err.startswith("error: refusing to serve MCP on 0.0.0.0") and err.count("\n") == 1, err


def test_an_unreachable_store_exits_2_with_one_line_before_serving(tmp_path: Path) -> None:
    definition, replies = write_booking(tmp_path)
    closed = _free_port()
    code, out, err = _mcp(
        str(definition), "--model", f"scripted:{replies}", "--store", f"redis://:hunter2@127.0.0.1:{closed}/0"
    )
    assert code == 2, (out, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and f"127.0.0.1:{closed}" in err, err
    assert "hunter2" not in out + err


def test_llm_fsm_help_lists_the_mcp_command() -> None:
    done = subprocess.run([*CLI, "--help"], capture_output=True, text=True, check=True)
    assert any(line.split()[:1] == ["mcp"] for line in done.stdout.splitlines()), done.stdout
