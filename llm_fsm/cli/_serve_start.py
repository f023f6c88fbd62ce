"""``llm-fsm serve``'s last checks before it listens, and what it says when they pass.

docs/server.md promises that a server which cannot work exits 2 with one line before it listens. A store
that does not answer, a provider key that is not set and a port that is taken used to let it start: then
every request answered 503 or 502 ("try again later", which never helps), or uvicorn exited 3 with a
multi-line log (issue 21). So the store is asked once, litellm's own environment check is asked about the
model, and the port is bound here, by us, before anything says "listening"; uvicorn is then handed the
bound socket.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
from collections.abc import Iterator, Sequence
from typing import Any

from llm_fsm.cli._models import missing_provider_keys
from llm_fsm.errors import ConversationNotFoundError, LLMConfigurationError, StoreError, UsageError

BACKLOG = 2048
"""uvicorn's default listen backlog; set when we bind, so connections made after "listening" wait, not fail."""

_PROBE_ID = "llm-fsm-serve-start-probe"

_NOISY_LOGGERS = ("psycopg.pool",)
"""Loggers that narrate a failing connection: psycopg_pool logs each attempt (ten lines before ours)."""


@contextlib.contextmanager
def _quiet(names: Sequence[str]) -> Iterator[None]:
    """Silence ``names`` while the start-up check runs: its outcome is said in one line, by us."""
    loggers = [logging.getLogger(name) for name in names]
    saved = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, was in zip(loggers, saved, strict=True):
            logger.disabled = was


def check_store(manager: Any) -> None:
    """Ask the manager for a conversation that does not exist: "not found" means its store answers.

    Asked as ``/readyz`` asks, through the runtime (its store span and error translation), not of the store
    behind its back. A store that cannot be reached is closed (its pool's reconnection threads stopped, still
    silenced) and its error goes up as the one line.
    """
    with _quiet(_NOISY_LOGGERS):
        try:
            manager.get_instance(_PROBE_ID, user_id=_PROBE_ID)
        except ConversationNotFoundError:
            return
        except StoreError as exc:
            with contextlib.suppress(Exception):
                manager.store.close()
            first = str(exc).splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise StoreError(f"{first.rstrip('.')}; not serving without its store") from None


def check_model_environment(model: str) -> None:
    """A model whose provider key is not in the environment: every turn would fail, so none is served."""
    missing = missing_provider_keys(model)
    if missing:
        raise LLMConfigurationError(
            f"model {model}: {' or '.join(missing)} is not set (litellm.validate_environment); "
            "set it in the server's environment, or pass another --model"
        )


def bind(host: str, port: int) -> socket.socket:
    """The listening socket on ``host:port``, bound and listening before "listening" is printed.

    Options as uvicorn's own ``Config.bind_socket`` sets them (SO_REUSEADDR, inheritable for ``--workers``).
    """
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"port {port} on {host} is in use") from None
        raise UsageError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def base_url(host: str, sock: socket.socket) -> str:
    """``http://host:port`` with the port actually bound (``--port 0`` picks one)."""
    port = sock.getsockname()[1]
    address = host.strip("[]")
    return f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}"


def summary(
    definitions: Sequence[str], store_url: str, model: str, base: str, aliases: Sequence[str] = ()
) -> list[str]:
    """What is served (and which versions aliases name), from where, by which model, and where to look: one line
    each, before serving."""
    return [
        f"definitions: {', '.join(definitions)}",
        *([f"aliases: {', '.join(aliases)}"] if aliases else []),
        f"store: {store_url}",
        f"model: {model}",
        f"inspector: {base}/",
        f"API docs: {base}/docs",
        f"listening on {base} (Ctrl+C stops)",
    ]


__all__ = ["base_url", "bind", "check_model_environment", "check_store", "summary"]
