"""``llm-fsm mcp``: conversations served as MCP tools (``llm_fsm.mcp_server``), over stdio or streamable HTTP.

An agent platform starts the command itself (stdio: the platform's ``mcpServers`` entry names it) or reaches it
at ``http://HOST:PORT/mcp``. As ``serve`` does, it checks what it can before it serves (the definitions load, the
store answers, the model is configured and its provider key set, the port is free), so a mistake exits 2 with one
``error:`` line instead of failing the agent's first call. Over stdio, stdout is the protocol's: everything the
command says goes to stderr.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import click

from llm_fsm.cli._app import GuardedCommand, actions_option, mcp_option, retrievers_option
from llm_fsm.cli._models import MODEL_ENV, _model_option
from llm_fsm.cli._serve_start import base_url, bind, check_model_environment, check_store
from llm_fsm.cli._store_options import _owner_options, _store_option, _store_url
from llm_fsm.cli.serve import is_loopback
from llm_fsm.errors import UsageError

MCP_PATH = "/mcp"


def _mcp_modules() -> Any:
    """The SDK and our server package, or the one line that says which extra to install."""
    try:
        import llm_fsm.mcp_server as mcp_server
    except ImportError as exc:
        needs = "serving over MCP needs the mcp extra: pip install -e '.[mcp]' from a checkout"
        raise UsageError(f"{needs} ({exc})") from None
    return mcp_server


def _http_modules() -> Any:
    try:
        import uvicorn
    except ImportError as exc:
        needs = "--transport http needs uvicorn: pip install -e '.[server]' from a checkout"
        raise UsageError(f"{needs} ({exc})") from None
    return uvicorn


@click.command("mcp", cls=GuardedCommand)
@click.argument("definitions", nargs=-1)
@_model_option
@_store_option
@_owner_options
@actions_option
@retrievers_option
@mcp_option
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: the agent platform starts this command and talks on its stdin/stdout; http: streamable HTTP "
    f"at http://HOST:PORT{MCP_PATH}.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (http).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port (http; 0: any).")
@click.option(
    "--no-key-check",
    is_flag=True,
    help="Start although litellm finds the model's API key variable unset (the provider authenticates another way).",
)
def mcp_command(
    definitions: tuple[str, ...],
    model: str | None,
    store: str | None,
    user_id: str | None,
    room_id: str | None,
    actions: str | None,
    retrievers: str | None,
    mcp: str | None,
    transport: str,
    host: str,
    port: int,
    no_key_check: bool,
) -> None:
    """Serve DEFINITIONS (files or folders) as MCP tools to agent platforms.

    Tools: list_definitions, start_conversation, send_message, get_state,
    explain. Every conversation is started and read as --user/--room (the
    stores answer only to that pair): one server, one tenant. See docs/mcp.md.

    \b
    Example:
      llm-fsm mcp definitions/ --model gpt-4o-mini --store sqlite:///conversations.db --user agent
      llm-fsm mcp definitions/restaurant_booking.yaml --transport http --port 8765
    """
    if not definitions:
        raise UsageError("name at least one definition file or folder to serve")
    if transport == "http" and not is_loopback(host):
        raise UsageError(
            f"refusing to serve MCP on {host}: the MCP server has no authentication, and anyone who reaches it "
            "acts as its tenant; listen on 127.0.0.1 (behind a proxy that authenticates, if others need it)"
        )
    mcp_server = _mcp_modules()
    uvicorn = _http_modules() if transport == "http" else None
    from llm_fsm.cli.chat import _manager
    from llm_fsm.stores import default_store_url, open_store, redact_url

    store_url = _store_url(store)
    manager = _manager(
        model,
        open_store(store_url),
        None,
        False,
        fsm_loader=None,
        actions=actions,
        retrievers=retrievers,
        mcp=mcp,
    )
    server = mcp_server.create_mcp_server(manager, list(definitions), user_id=user_id, room_id=room_id)
    model_name = model or os.environ.get(MODEL_ENV) or ""  # _manager refused an unset one
    if not no_key_check:
        check_model_environment(model_name)
    check_store(manager)
    lines = [
        f"store: {redact_url(store_url or default_store_url())}",
        f"model: {model_name}",
        f"tenant: user {user_id!r}, room {room_id!r}",
    ]
    if uvicorn is None:
        for line in lines:
            click.echo(line, err=True)  # stdout carries the protocol
        with contextlib.suppress(KeyboardInterrupt):
            server.run("stdio")
        return
    sock = bind(host, port)
    app = server.streamable_http_app(host=host)
    for line in [*lines, f"listening on {base_url(host, sock)}{MCP_PATH} (Ctrl+C stops)"]:
        click.echo(line)
    config = uvicorn.Config(app, log_level="warning")
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run(sockets=[sock])


__all__ = ["MCP_PATH", "mcp_command"]
