"""``llm-fsm serve``: the HTTP API (``llm_fsm.server``) under uvicorn.

The command checks everything it can before it listens — the definitions load, the keys
parse, the store opens and answers, the model is configured and its provider key is set, the
port is free — so a mistake exits 2 with one line instead of failing the first request
(``_serve_start``); then it binds the port itself, says what it serves, and hands uvicorn the socket.
With ``--workers N`` uvicorn starts N processes on that socket that each build the same app from
``$LLM_FSM_SERVE_SETTINGS`` (``app_from_environment``, a factory): they share nothing but the store,
so it must be one every process reaches (SQLite on one host, Redis across hosts).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import ipaddress
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

import click

from llm_fsm.cli._app import GuardedCommand, action_registry, actions_option, mcp_option, retrievers_option
from llm_fsm.cli._models import MODEL_ENV
from llm_fsm.cli._serve_start import base_url, bind, check_model_environment, check_store, summary
from llm_fsm.cli._store_options import _store_url
from llm_fsm.cli.chat import make_llm
from llm_fsm.errors import UsageError

DEFAULT_TIMER_INTERVAL = 5.0
"""``--timer-interval``'s default, ``server._timer_loop.DEFAULT_TIMER_INTERVAL`` (not imported: the server package
needs FastAPI, and ``--help`` must work without the [server] extra)."""

SETTINGS_ENV = "LLM_FSM_SERVE_SETTINGS"
WEBHOOK_SECRET_ENV = "LLM_FSM_WEBHOOK_SECRET"
"""Where ``serve --webhook`` reads the signing secret when ``--webhook-secret-file`` is not given (a secret on the
command line would show in the process list)."""
DEFAULT_WEBHOOK_OUTBOX = "webhook-outbox.db"
ANONYMOUS_TENANT = "local"
"""The tenant of every request when no key is configured (allowed on a loopback host only)."""


@dataclass
class ServeSettings:
    """Everything a worker needs to build the app; passed to uvicorn's workers as JSON in the environment."""

    definitions: list[str]
    store: str | None = None
    model: str | None = None
    keys_file: str | None = None
    anonymous: bool = False
    cors_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = 64 * 1024
    rate_limit: float = 600.0
    rate_burst: int | None = None
    actions: str | None = None
    """``module:name`` of the ActionRegistry the definitions' actions call (imported in every worker)."""
    retrievers: str | None = None
    """``module:name`` of the retrievers the definitions' ``retrieve`` names (imported in every worker)."""
    mcp: str | None = None
    """The MCP config file (absolute) whose servers' tools ``mcp:SERVER/TOOL`` calls (each worker connects its own)."""
    aliases: dict[str, str] = field(default_factory=dict)
    """``--alias NAME=FILE``: alias → absolute path of the version it names (read by every worker at its start)."""
    timers: bool = True
    """``--timers/--no-timers``: each worker runs the conversations' due timers (``server._timer_loop``)."""
    timer_interval: float = DEFAULT_TIMER_INTERVAL
    webhooks: list[str] = field(default_factory=list)
    """``--webhook URL``: where every conversation event is POSTed, signed with ``webhook_secret``."""
    webhook_secret: str | None = None
    webhook_outbox: str | None = None
    """The outbox's SQLite file, absolute (the workers of one host share it)."""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServeSettings:
        return cls(**json.loads(text))


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def _absolute_actions(spec: str | None) -> str | None:
    """A ``file.py:name`` spec made absolute, so workers started elsewhere import the same file."""
    if not spec:
        return None
    target, _, name = spec.rpartition(":")
    if target.endswith(".py") and os.path.exists(target):
        return f"{os.path.abspath(target)}:{name}"
    return spec


def build_app(settings: ServeSettings) -> Any:
    """The ASGI app for ``settings``: a manager on the store and model, and ``create_app`` over it."""
    from llm_fsm.manager import FSMManager
    from llm_fsm.server import KeyRing, create_app
    from llm_fsm.stores import open_store

    keys = KeyRing.load(settings.keys_file)
    from llm_fsm.runtime._retrievers import load_retrievers

    registry = action_registry(settings.actions, settings.mcp)
    manager = FSMManager(
        llm_interface=make_llm(settings.model),
        store=open_store(_store_url(settings.store)),
        actions=registry,
        retrievers=load_retrievers(settings.retrievers) if settings.retrievers else None,
    )
    return create_app(
        manager,
        settings.definitions,
        aliases=settings.aliases,
        keys=keys,
        anonymous_tenant=ANONYMOUS_TENANT if settings.anonymous else None,
        cors_origins=settings.cors_origins,
        max_body_bytes=settings.max_body_bytes,
        rate_limit_per_minute=settings.rate_limit,
        rate_limit_burst=settings.rate_burst,
        timer_interval=settings.timer_interval if settings.timers else None,
        webhooks=_webhook_settings(settings),
    )


def _webhook_settings(settings: ServeSettings) -> Any:
    if not settings.webhooks:
        return None
    from llm_fsm.webhooks import WebhookSettings

    return WebhookSettings(
        urls=tuple(settings.webhooks), secret=settings.webhook_secret or "", outbox=settings.webhook_outbox
    )


def webhook_secret(path: str | None) -> str:
    """The signing secret: the first line of ``--webhook-secret-file``, else ``$LLM_FSM_WEBHOOK_SECRET``."""
    if path is not None:
        try:
            with open(path, encoding="utf-8") as file:
                secret = file.readline().strip()
        except OSError as exc:
            raise UsageError(f"--webhook-secret-file {path}: {exc.strerror}") from None
    else:
        secret = os.environ.get(WEBHOOK_SECRET_ENV, "").strip()
    if not secret:
        raise UsageError(f"--webhook needs a signing secret: --webhook-secret-file FILE or ${WEBHOOK_SECRET_ENV}")
    return secret


def parse_aliases(values: tuple[str, ...]) -> dict[str, str]:
    """``--alias NAME=FILE`` values as alias → absolute path (workers may start in another folder)."""
    aliases: dict[str, str] = {}
    for value in values:
        name, equals, path = value.partition("=")
        if not equals or not name.strip() or not path.strip():
            raise UsageError(f"--alias NAME=FILE, not {value!r} (e.g. --alias staging=defs/loan_v2.yaml)")
        if name.strip() in aliases:
            raise UsageError(f"--alias {name.strip()!r} is given twice")
        aliases[name.strip()] = os.path.abspath(path) if os.path.exists(path) else path
    return aliases


def _unregistered(app: Any, registry: Any) -> str:
    """The served definitions naming actions (or retrievers) ``registry`` has nothing for, as ``id (name, ...)``;
    "" if none.

    A served definition may well lack them on purpose (the others still work), so this is said at start, where
    whoever forgot ``--actions`` or ``--retrievers`` reads it, rather than only in the log of the first
    conversation's 500 or in the turn records of answers given without snippets.
    """
    from llm_fsm.loading import load_fsm_definition

    missing: list[str] = []
    for served in app.state.registry.by_id.values():
        location = served.location
        definition = location if not isinstance(location, str) else load_fsm_definition(location)
        names = registry.missing(definition)
        if names:
            missing.append(f"{served.id} ({', '.join(names)})")
    return ", ".join(missing)


def app_from_environment() -> Any:
    """uvicorn's factory for ``--workers N``: each worker process builds the app from ``$LLM_FSM_SERVE_SETTINGS``."""
    text = os.environ.get(SETTINGS_ENV)
    if not text:
        raise UsageError(f"${SETTINGS_ENV} is not set; start the server with `llm-fsm serve`")
    app = build_app(ServeSettings.from_json(text))
    freeze_start_up_heap()
    return app


def freeze_start_up_heap() -> None:
    """Move what start-up built out of the collector's reach (``gc.freeze``), once the app is built.

    Why: start-up leaves ~68,000 tracked objects that live as long as the process (the libraries, litellm's
    price map, the definitions), and every full collection walked them all: 60-70 ms a time, two or three times
    in 2,000 paced turns, which was the whole p99 of the served turn (benchmarks/serve.py ``--server-gc``:
    paced p99 added 107 -> 65 ms on SQLite, 149 -> 38 ms on Redis). A process-wide choice, so it is the
    ``serve`` command's, not ``create_app``'s: an application mounting the app decides for its own process.
    """
    gc.collect()
    gc.freeze()


def _server_modules() -> Any:
    try:
        import uvicorn

        import llm_fsm.server  # noqa: F401 - FastAPI is checked here, before anything listens
    except ImportError as exc:
        raise UsageError(f"the server needs its extra: pip install 'llm_fsm[server]' ({exc})") from None
    return uvicorn


@click.command("serve", cls=GuardedCommand)
@click.argument("definitions", nargs=-1)
@click.option(
    "--store",
    help="Store URL shared by every worker: sqlite:///rel.db (sqlite:////abs.db), redis://host:port/db "
    "(default: $LLM_FSM_STORE, else the user's conversations.db).",
)
@click.option(
    "--model",
    "-m",
    help=f"litellm model name, 'local', or 'scripted:FILE' (default: ${MODEL_ENV}).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Worker processes.")
@click.option(
    "--keys",
    "keys_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="API keys file (JSON/YAML: [{key_sha256, tenant, rights}]); default: $LLM_FSM_API_KEYS.",
)
@click.option("--cors-origin", "cors_origins", multiple=True, help="Allow browsers on this origin (repeatable).")
@click.option("--max-body-bytes", default=64 * 1024, show_default=True, type=click.IntRange(1))
@click.option(
    "--rate-limit",
    default=600.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Requests a minute per key and per worker (0: no limit).",
)
@click.option(
    "--forwarded-allow-ips",
    default=None,
    metavar="IPS",
    help="Trust X-Forwarded-For/-Proto from these proxies (comma-separated IPs or networks, '*': any); "
    "default: no one, so a client cannot choose the address its failed key attempts are limited by.",
)
@click.option(
    "--no-key-check",
    is_flag=True,
    help="Start although litellm finds the model's API key variable unset (the provider authenticates "
    "another way: Azure AD tokens, a gateway that adds the key).",
)
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning"]))
@click.option(
    "--hash-key",
    "key_to_hash",
    default=None,
    metavar="KEY",
    help="Print the SHA-256 of KEY for a keys file and exit ('-': read it from stdin, out of the shell history).",
)
@click.option(
    "--alias",
    "aliases",
    multiple=True,
    metavar="NAME=FILE",
    help="Serve FILE's version beside the served definition of the same name, as NAME (repeatable): "
    'POST /v1/conversations takes {"alias": NAME}; the inspector replays against it.',
)
@click.option(
    "--timers/--no-timers",
    default=True,
    show_default=True,
    help="Fire the conversations' due timers (states' after: entries) in every worker; --no-timers when the "
    "application runs them itself (FSMManager.arun_due_timers).",
)
@click.option(
    "--timer-interval",
    default=DEFAULT_TIMER_INTERVAL,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    metavar="SECONDS",
    help="Seconds between runs of the timer loop: how late a timer may fire, at most.",
)
@click.option(
    "--webhook",
    "webhooks",
    multiple=True,
    metavar="URL",
    help="POST every conversation event to URL, signed (repeatable); the secret from --webhook-secret-file or "
    f"${WEBHOOK_SECRET_ENV}. See docs/server.md, Webhooks.",
)
@click.option(
    "--webhook-secret-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="A file whose first line is the webhooks' signing secret.",
)
@click.option(
    "--webhook-outbox",
    default=DEFAULT_WEBHOOK_OUTBOX,
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The webhooks' outbox (SQLite): what is owed survives a restart; the workers share it.",
)
@actions_option
@retrievers_option
@mcp_option
def serve_command(
    definitions: tuple[str, ...],
    store: str | None,
    model: str | None,
    host: str,
    port: int,
    workers: int,
    keys_file: str | None,
    cors_origins: tuple[str, ...],
    max_body_bytes: int,
    rate_limit: float,
    log_level: str,
    forwarded_allow_ips: str | None,
    no_key_check: bool,
    key_to_hash: str | None,
    aliases: tuple[str, ...],
    timers: bool,
    timer_interval: float,
    webhooks: tuple[str, ...],
    webhook_secret_file: str | None,
    webhook_outbox: str,
    actions: str | None,
    retrievers: str | None,
    mcp: str | None,
) -> None:
    """Serve DEFINITIONS (files or folders) over HTTP: JSON under /v1, OpenAPI at /docs.

    Every request needs an API key unless none is configured and HOST is a
    loopback address (then every request acts as tenant 'local'). See
    docs/server.md.

    \b
    Example:
      llm-fsm serve --hash-key -  < key.txt
      llm-fsm serve definitions/ --model gpt-4o-mini --store sqlite:///conversations.db --keys keys.yaml
      llm-fsm serve definitions/ --model gpt-4o-mini --store redis://localhost:6379/0 \\
          --host 0.0.0.0 --workers 4 --keys keys.yaml
      llm-fsm serve defs/loan.yaml --alias staging=staging/loan.yaml --alias production=defs/loan.yaml
      LLM_FSM_WEBHOOK_SECRET=... llm-fsm serve definitions/ --webhook https://app.example/hooks/llm-fsm
    """
    if key_to_hash is not None:
        from llm_fsm.server._keys import hash_key

        key = sys.stdin.readline().rstrip("\r\n") if key_to_hash == "-" else key_to_hash
        if not key:
            raise UsageError("--hash-key needs a key")
        click.echo(hash_key(key))
        return
    if not definitions:
        raise UsageError("name at least one definition file or folder to serve")
    uvicorn = _server_modules()
    from llm_fsm.server import KeyRing

    keys = KeyRing.load(keys_file)
    if not keys and not is_loopback(host):
        raise UsageError(
            f"refusing to serve on {host} without API keys: anyone who reaches it could read every conversation; "
            "give --keys FILE or $LLM_FSM_API_KEYS, or listen on 127.0.0.1"
        )
    store_url = _store_url(store)
    if workers > 1 and store_url is not None and store_url.strip().lower().startswith("memory:"):
        raise UsageError("memory:// is one process's store; several workers need sqlite:// or redis://")
    settings = ServeSettings(
        definitions=[os.path.abspath(d) if os.path.exists(d) else d for d in definitions],
        store=store_url,
        model=model,
        keys_file=os.path.abspath(keys_file) if keys_file else None,
        anonymous=not keys,
        cors_origins=list(cors_origins),
        max_body_bytes=max_body_bytes,
        rate_limit=rate_limit,
        actions=_absolute_actions(actions),
        retrievers=_absolute_actions(retrievers),
        mcp=os.path.abspath(mcp) if mcp else None,
        aliases=parse_aliases(aliases),
        timers=timers,
        timer_interval=timer_interval,
        webhooks=list(webhooks),
        webhook_secret=webhook_secret(webhook_secret_file) if webhooks else None,
        webhook_outbox=os.path.abspath(webhook_outbox) if webhooks else None,
    )
    app = build_app(settings)  # every check now, in this process: a mistake exits 2 before anything listens
    model_name = model or os.environ.get(MODEL_ENV) or ""  # build_app refused an unset one
    if not no_key_check:
        check_model_environment(model_name)
    check_store(app.state.manager)
    sock = bind(host, port)
    unregistered = _unregistered(app, app.state.manager.actions)
    if unregistered:
        click.echo(
            f"warning: no function is registered for the actions of {unregistered}: starting one of these "
            "answers 500 server_error; pass --actions module:name or file.py:name (--mcp CONFIG for mcp:SERVER/TOOL)",
            err=True,
        )
    unregistered = _unregistered(app, app.state.manager.retrievers)
    if unregistered:
        click.echo(  # served as for an unreachable index: the retrieval fails, recorded, and on_error decides
            f"warning: no retriever is registered for the retrieve of {unregistered}: their turns answer "
            "without snippets or move to the state's on_error; pass --retrievers module:name or file.py:name",
            err=True,
        )
    if not keys:
        click.echo(f"no API keys configured: every request acts as tenant {ANONYMOUS_TENANT!r} (loopback only)")
    from llm_fsm.stores import default_store_url, redact_url

    served = list(app.state.registry.by_id)
    named = [f"{a.name} ({a.definition_id} {a.version})" for a in app.state.registry.aliases.values()]
    lines = summary(served, redact_url(store_url or default_store_url()), model_name, base_url(host, sock), named)
    for line in lines:
        click.echo(line)
    server_options = {
        "log_level": log_level,
        "log_config": _log_config(uvicorn, log_level),
        "http": "llm_fsm.cli.serve:NoDelayH11Protocol",
        # uvicorn trusts 127.0.0.1 by default: a local client would rotate its rate-limit bucket at will
        "proxy_headers": forwarded_allow_ips is not None,
        "forwarded_allow_ips": forwarded_allow_ips,
    }
    if workers == 1:
        freeze_start_up_heap()
        server = uvicorn.Server(uvicorn.Config(app, **server_options))
        server.run(sockets=[sock])
        if not server.started:  # the app's start-up failed after binding (uvicorn.run exits so too)
            raise SystemExit(3)
        return
    app.state.manager.store.close()
    os.environ[SETTINGS_ENV] = settings.to_json()
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config("llm_fsm.cli.serve:app_from_environment", factory=True, workers=workers, **server_options)
    with contextlib.suppress(KeyboardInterrupt):
        Multiprocess(config, sockets=[sock]).run()


def _log_config(uvicorn: Any, log_level: str) -> dict[str, Any]:
    """uvicorn's logging configuration, with llm_fsm's records (refused moves, 5xx causes) on its console.

    The library itself only adds a NullHandler (an application decides where logs go); the server is
    such an application, and without this the causes docs/server.md promises "in the server's log" went
    nowhere (found by benchmarks/serve.py).
    """
    import copy

    config: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    level = log_level.upper() if log_level.upper() in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") else "INFO"
    config["loggers"]["llm_fsm"] = {"handlers": ["default"], "level": level, "propagate": False}
    return config


def __getattr__(name: str) -> Any:
    # uvicorn resolves --http from an import string in each worker process; built lazily so that importing
    # this module does not need uvicorn (the [server] extra)
    if name == "NoDelayH11Protocol":
        return _no_delay_protocol()
    raise AttributeError(name)


_NO_DELAY: list[Any] = []


def _no_delay_protocol() -> Any:
    """uvicorn's h11 protocol with Nagle's algorithm off on every accepted connection.

    With several workers uvicorn binds the listening socket itself and asyncio then leaves TCP_NODELAY off
    on the accepted sockets, so each response waited for the client's delayed ACK: about 40 ms added to
    back-to-back turns and to the first streamed character (measured by benchmarks/serve.py; uvicorn
    issue 3149). One worker was not affected; setting it there too is harmless.
    """
    if _NO_DELAY:
        return _NO_DELAY[0]
    import socket

    from uvicorn.protocols.http.h11_impl import H11Protocol

    class NoDelayH11Protocol(H11Protocol):
        def connection_made(self, transport: Any) -> None:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            super().connection_made(transport)

    _NO_DELAY.append(NoDelayH11Protocol)
    return NoDelayH11Protocol


__all__ = ["ServeSettings", "app_from_environment", "build_app", "is_loopback", "serve_command"]
