"""The MCP servers an application's actions may call, read from the file every MCP host already writes.

The shape is the one Claude Desktop, Cursor and VS Code made common, so a team's existing file works as is::

    {"mcpServers": {
        "crm":     {"command": "python", "args": ["crm_server.py"], "env": {"CRM_DB": "crm.db"}},
        "tickets": {"url": "http://127.0.0.1:9000/mcp", "headers": {"Authorization": "Bearer ${TICKETS_TOKEN}"}}}}

Paths are the file's, not the shell's: a stdio server runs in the config file's folder unless ``cwd`` says
otherwise (a relative ``cwd``, and a relative ``command`` with a slash, are resolved from that folder), so
``llm-fsm test definitions/ --mcp definitions/mcp/mcp.json`` works from any directory. ``${NAME}`` in
``env``, ``headers`` and ``url`` is taken from the environment, so tokens stay out of the file. Anything
wrong (unreadable, not an object, an unknown key, a server that is both stdio and HTTP, an unset variable)
is one ``MCPConfigError`` naming the file and where.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from llm_fsm.errors import MCPConfigError

SERVER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
"""What ``mcp:SERVER/TOOL`` can name: no ``/`` (it ends the server's name), no ``:``."""

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class StdioServer(BaseModel):
    """A server the client starts as a subprocess and talks to over its stdin and stdout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["stdio"] | None = None
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: Path | None = None


class HTTPServer(BaseModel):
    """A server already running, reached over streamable HTTP."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["http", "streamable-http", "streamable_http", "streamableHttp"] | None = None
    url: str
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return value


ServerConfig = StdioServer | HTTPServer


class MCPConfig(BaseModel):
    """The servers by the name ``call: mcp:NAME/TOOL`` uses."""

    model_config = ConfigDict(frozen=True)

    servers: dict[str, ServerConfig]
    source: Path | None = None
    """The file it was read from (for messages)."""


def _read(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MCPConfigError(f"cannot read the MCP config: {exc}", file=str(path)) from exc
    try:
        if path.suffix in (".yaml", ".yml"):
            return yaml.safe_load(text)
        return json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:  # the file is not data
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise MCPConfigError(
            f"the MCP config is not valid {path.suffix.lstrip('.') or 'JSON'}: {first}", file=str(path)
        ) from exc


def _expand(value: str, where: str, path: Path) -> str:
    def one(match: re.Match[str]) -> str:
        found = os.environ.get(match.group(1))
        if found is None:
            raise MCPConfigError(f"{match.group(0)} is not set in the environment", file=str(path), path=where)
        return found

    return _VARIABLE.sub(one, value)


def _resolved(name: str, server: StdioServer | HTTPServer, folder: Path, path: Path) -> StdioServer | HTTPServer:
    where = f"$.mcpServers.{name}"
    if isinstance(server, HTTPServer):
        return server.model_copy(
            update={
                "url": _expand(server.url, f"{where}.url", path),
                "headers": {k: _expand(v, f"{where}.headers.{k}", path) for k, v in server.headers.items()},
            }
        )
    command = server.command
    if "/" in command and not Path(command).is_absolute():
        command = str((folder / command).resolve())
    cwd = folder if server.cwd is None else (folder / server.cwd).resolve()
    env = {k: _expand(v, f"{where}.env.{k}", path) for k, v in server.env.items()} if server.env else None
    return server.model_copy(update={"command": command, "cwd": cwd, "env": env})


def _server(name: str, entry: Any, path: Path) -> ServerConfig:
    where = f"$.mcpServers.{name}"
    if not SERVER_NAME.match(name):
        raise MCPConfigError(
            f"server name {name!r} cannot be called as mcp:{name}/TOOL: use letters, digits and _ . -",
            file=str(path),
            path=where,
        )
    if not isinstance(entry, dict) or ("command" in entry) == ("url" in entry):
        raise MCPConfigError(
            'a server is {"command": ..., "args": [...]} (stdio) or {"url": "http://..."} (streamable HTTP), '
            "exactly one of them",
            file=str(path),
            path=where,
        )
    model: type[StdioServer] | type[HTTPServer] = StdioServer if "command" in entry else HTTPServer
    try:
        return model.model_validate(entry)
    except ValidationError as exc:
        problems = [
            (".".join([where, *(str(p) for p in error["loc"])]), error["msg"])
            for error in exc.errors(include_url=False)
        ]
        raise MCPConfigError(problems[0][1], file=str(path), path=problems[0][0], problems=problems) from exc


def load_config(path: str | Path) -> MCPConfig:
    """The MCP config file at ``path`` (JSON, or YAML by its suffix), paths resolved from its folder."""
    path = Path(path)
    data = _read(path)
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise MCPConfigError('the MCP config is an object with "mcpServers": {name: server, ...}', file=str(path))
    folder = path.resolve().parent
    return MCPConfig(
        servers={name: _resolved(name, _server(name, entry, path), folder, path) for name, entry in servers.items()},
        source=path,
    )


__all__ = ["HTTPServer", "MCPConfig", "ServerConfig", "StdioServer", "load_config"]
