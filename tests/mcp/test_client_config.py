"""The MCP config file (``--mcp CONFIG``): the ``{"mcpServers": {...}}`` shape MCP hosts use, paths from its folder,
and every way it can be wrong as one ``MCPConfigError`` naming the file and where."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from llm_fsm.errors import MCPConfigError, MCPToolError
from llm_fsm.mcp import HTTPServer, StdioServer, load_config, parse_name
from llm_fsm.mcp._tools import tool_value


def write(tmp_path: Path, data: Any, name: str = "mcp.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_stdio_and_http_servers_are_read_with_paths_from_the_files_folder(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "mcpServers": {
                "crm": {"command": "python", "args": ["crm.py"], "env": {"DB": "crm.db"}},
                "local": {"command": "./bin/server", "cwd": "work"},
                "tickets": {"url": "http://127.0.0.1:9000/mcp", "headers": {"X-Team": "support"}},
            }
        },
    )
    config = load_config(path)
    crm, local, tickets = (config.servers[name] for name in ("crm", "local", "tickets"))
    assert isinstance(crm, StdioServer) and isinstance(local, StdioServer) and isinstance(tickets, HTTPServer)
    assert (crm.command, crm.args, crm.env, crm.cwd) == ("python", ["crm.py"], {"DB": "crm.db"}, tmp_path)
    assert (local.command, local.cwd) == (str(tmp_path / "bin" / "server"), tmp_path / "work")
    assert tickets.headers == {"X-Team": "support"}


def test_yaml_is_read_by_its_suffix(tmp_path: Path) -> None:
    path = write(tmp_path, "mcpServers:\n  crm:\n    command: python\n", "mcp.yaml")
    assert isinstance(load_config(path).servers["crm"], StdioServer)


def test_variables_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKETS_TOKEN", "s3cret")
    path = write(
        tmp_path,
        {"mcpServers": {"t": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${TICKETS_TOKEN}"}}}},
    )
    server = load_config(path).servers["t"]
    assert isinstance(server, HTTPServer) and server.headers == {"Authorization": "Bearer s3cret"}


@pytest.mark.parametrize(
    ("content", "where", "says"),
    [
        ("{not json", None, "not valid json"),
        ({"servers": {}}, None, '"mcpServers"'),
        ({"mcpServers": {"crm": {"command": "python", "url": "http://h/mcp"}}}, "$.mcpServers.crm", "exactly one"),
        ({"mcpServers": {"crm": {}}}, "$.mcpServers.crm", "exactly one"),
        ({"mcpServers": {"crm": {"command": "python", "comand": "x"}}}, "$.mcpServers.crm.comand", "Extra inputs"),
        ({"mcpServers": {"crm": {"url": "ftp://h/mcp"}}}, "$.mcpServers.crm.url", "http://"),
        ({"mcpServers": {"c/rm": {"command": "python"}}}, "$.mcpServers.c/rm", "cannot be called"),
        ({"mcpServers": {"t": {"url": "http://h/${NOT_SET_ANYWHERE}"}}}, "$.mcpServers.t.url", "is not set"),
    ],
)
def test_a_bad_config_is_one_typed_error_naming_the_file_and_where(
    tmp_path: Path, content: Any, where: str | None, says: str
) -> None:
    path = write(tmp_path, content)
    with pytest.raises(MCPConfigError) as raised:
        load_config(path)
    assert raised.value.file == str(path)
    assert raised.value.path == where
    assert says.lower() in str(raised.value).lower()


def test_a_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(MCPConfigError, match="cannot read"):
        load_config(tmp_path / "absent.json")


def test_only_mcp_server_tool_names_are_tool_calls() -> None:
    assert parse_name("mcp:crm/lookup_customer") == ("crm", "lookup_customer")
    assert [parse_name(n) for n in ("lookup", "mcp:crm", "mcp:/x", "mcp:crm/")] == [None] * 4


def _result(*texts: str, structured: Any = None, error: bool = False) -> Any:
    blocks = [SimpleNamespace(type="text", text=text) for text in texts]
    return SimpleNamespace(content=blocks, structured_content=structured, is_error=error)


def test_a_result_is_its_structured_content_else_its_text_as_json_else_the_text() -> None:
    assert tool_value(_result('{"a": 1}', structured={"b": 2}), "s", "t") == {"b": 2}
    assert tool_value(_result('{"a": 1}'), "s", "t") == {"a": 1}
    assert tool_value(_result("plain words"), "s", "t") == "plain words"


def test_an_is_error_result_raises_with_the_tools_message() -> None:
    with pytest.raises(MCPToolError, match="tool 't' of MCP server 's' answered an error: out of stock"):
        tool_value(_result("out of stock", error=True), "s", "t")
