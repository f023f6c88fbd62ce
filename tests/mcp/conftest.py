"""Local MCP servers for the MCP client tests: the CRM server of servers/crm_server.py over stdio (a subprocess
the client starts) and over streamable HTTP (uvicorn on 127.0.0.1, an ephemeral port, stopped by the fixture)."""

from __future__ import annotations

import importlib.util
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.mcp import HTTPServer, MCPConfig, MCPTools, StdioServer

SERVERS = Path(__file__).resolve().parent / "servers"
CRM_SERVER = SERVERS / "crm_server.py"


def stdio_config() -> MCPConfig:
    return MCPConfig(servers={"crm": StdioServer(command=sys.executable, args=[str(CRM_SERVER)])})


@pytest.fixture
def crm_tools() -> Iterator[MCPTools]:
    """The CRM over stdio; closed (its process ended) after the test."""
    tools = MCPTools(stdio_config())
    yield tools
    tools.close()


def _crm_app() -> Any:
    spec = importlib.util.spec_from_file_location("crm_server_for_http", CRM_SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.crm_app()


@pytest.fixture
def crm_http_url() -> Iterator[str]:
    """The CRM over streamable HTTP, served by uvicorn on 127.0.0.1 in this process; its URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(_crm_app(), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(10)
    sock.close()


def http_config(url: str, **headers: str) -> MCPConfig:
    return MCPConfig(servers={"crm": HTTPServer(url=url, headers=headers)})
