"""Conversation stores behind one protocol, and ``open_store`` to pick one by URL.

=====================================  ==========================================================
URL                                    store
=====================================  ==========================================================
``memory://``                          MemoryStore (this process only)
``sqlite:///rel.db``                   SQLiteStore at ``rel.db``, relative to the working directory
``sqlite:////abs/path.db``             SQLiteStore at ``/abs/path.db`` (``sqlite:///~/c.db``: home)
``sqlite://``                          SQLiteStore at ``default_sqlite_path()``
``sqlite:///:memory:``                 SQLiteStore in memory (one connection)
``redis://host:port/db``, ``rediss://``  RedisStore (redis-py imported only now)
``postgresql://user@host:port/db``     PostgresStore (``postgres://`` too; psycopg imported only now)
``file:///abs/dir``                    FileStore (JSON per conversation)
=====================================  ==========================================================

Options come as keyword arguments or in the query string
(``redis://localhost:6379/0?prefix=bot&ttl_seconds=3600&fallback_to_memory=true``);
keyword arguments win.

The slashes follow each scheme's own convention, so the two path schemes differ. ``sqlite://`` is
SQLAlchemy's (and Django's, and every 12-factor tool's): ``sqlite:///`` then the path, so three slashes
are a relative path and four an absolute one. ``file://`` is a file URL (RFC 8089): ``file://`` then an
empty host and an absolute path, so ``file:///tmp/dir`` is the absolute ``/tmp/dir``. Reading
``sqlite:///conversations.db`` as ``/conversations.db`` wrote the docs' first example to the filesystem's
root (issue 21). A SQLite file's directory must exist: only the default location's is created.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from llm_fsm.errors import StoreError
from llm_fsm.stores._paging import ConversationPage
from llm_fsm.stores.base import (
    AsyncConversationStore,
    AsyncStoreMixin,
    ConversationStore,
    ConversationSummary,
    DefinitionVersionStore,
    DueTimer,
    TimerStore,
)
from llm_fsm.stores.codec import (
    DEFAULT_MAX_RECORD_BYTES,
    REDIS_MAX_CONTEXT_BYTES,
    REDIS_MAX_RECORD_BYTES,
)
from llm_fsm.stores.files import FileStore
from llm_fsm.stores.memory import MemoryStore
from llm_fsm.stores.sqlite import SQLiteStore, default_sqlite_path


def _flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _optional_int(text: str) -> int | None:
    return None if text.strip().lower() in ("", "none", "off") else int(text)


def _optional_float(text: str) -> float | None:
    return None if text.strip().lower() in ("", "none", "off") else float(text)


_QUERY_OPTIONS: dict[str, Callable[[str], Any]] = {
    "prefix": str,
    "ttl_seconds": _optional_float,
    "fallback_to_memory": _flag,
    "max_context_bytes": _optional_int,
    "max_record_bytes": _optional_int,
    "socket_timeout": float,
    "connect_timeout": float,
    "retries": int,
    "timeout": float,
    "synchronous": str,
    "archive_part_size": int,
    "fsync": _flag,
}
"""Options ``open_store`` reads from a URL's query string; other query keys go to redis-py untouched."""

_POSTGRES_OPTIONS: dict[str, Callable[[str], Any]] = {"schema": str, "pool_size": int}
"""Options only a ``postgresql://`` URL takes beside those above; other query keys (``sslmode``,
``application_name``, ...) stay in the URL for libpq."""


def default_store_url() -> str:
    """The SQLite file the CLI uses unless told otherwise (see ``default_sqlite_path``)."""
    return "sqlite:///" + os.path.abspath(default_sqlite_path())  # four slashes: an absolute path


def redact_url(url: str) -> str:
    """``url`` with its password (``user:PASSWORD@`` or ``?password=``) replaced by ``***``, for what is printed."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        credentials, host = netloc.rsplit("@", 1)
        user, colon, _ = credentials.partition(":")
        netloc = f"{user}{':***' if colon else ''}@{host}"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = parts.query
    if any(key.lower() == "password" for key, _ in pairs):
        query = "&".join(f"{key}=***" if key.lower() == "password" else f"{key}={value}" for key, value in pairs)
    if (netloc, query) == (parts.netloc, parts.query):
        return url  # untouched, byte for byte
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def open_store(url_or_store: str | ConversationStore | None = None, **options: Any) -> ConversationStore:
    """A store for ``url_or_store``; a store object is returned as it is, ``None`` means the default SQLite file."""
    if url_or_store is None:
        url_or_store = default_store_url()
    if not isinstance(url_or_store, str):
        if isinstance(url_or_store, ConversationStore):
            if options:
                raise StoreError("options cannot be applied to an already opened store")
            return url_or_store
        raise StoreError(f"expected a store URL or a ConversationStore, got {type(url_or_store).__name__}")
    url = url_or_store.strip()
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise StoreError(
            f"not a store URL: {url!r}; use memory://, sqlite:///path.db, redis://host:port/db,"
            " postgresql://user@host/db or file:///dir"
        )
    rest, query_options, passthrough = _split_query(rest, url)
    merged = {**query_options, **options}
    if scheme == "memory":
        return MemoryStore(**_only(merged, scheme, "max_record_bytes", "max_context_bytes"))
    if scheme == "sqlite":
        path = _sqlite_path(rest) if rest else str(default_sqlite_path())
        return SQLiteStore(
            path,
            **_only(
                merged,
                scheme,
                "timeout",
                "synchronous",
                "max_record_bytes",
                "max_context_bytes",
            ),
        )
    if scheme == "file":
        if not rest:
            raise StoreError(f"{url!r} names no directory; use file:///path/to/dir")
        return FileStore(
            _path(rest),
            **_only(
                merged,
                scheme,
                "archive_part_size",
                "fsync",
                "indent",
                "max_record_bytes",
                "max_context_bytes",
            ),
        )
    if scheme in ("redis", "rediss", "unix"):
        from llm_fsm.stores.redis import FallbackStore, RedisStore

        fallback = bool(merged.pop("fallback_to_memory", False))
        redis_url = urlunsplit(urlsplit(url)._replace(query=urlencode(passthrough)))
        store = RedisStore(redis_url, **merged)
        return FallbackStore(store) if fallback else store
    if scheme in ("postgresql", "postgres"):
        from llm_fsm.stores.postgres import PostgresStore

        libpq: list[tuple[str, str]] = []
        for key, value in passthrough:
            convert = _POSTGRES_OPTIONS.get(key)
            if convert is None:
                libpq.append((key, value))
                continue
            try:
                merged.setdefault(key, convert(value))
            except ValueError as exc:
                raise StoreError(f"store URL {url!r}: option {key}={value!r} is invalid: {exc}") from exc
        postgres_url = urlunsplit(urlsplit(url)._replace(query=urlencode(libpq)))
        return PostgresStore(
            postgres_url,
            **_only(
                merged,
                scheme,
                "schema",
                "ttl_seconds",
                "max_record_bytes",
                "max_context_bytes",
                "connect_timeout",
                "pool_size",
                "retries",
            ),
        )
    raise StoreError(
        f"unknown store scheme {scheme!r} in {url!r}; use memory://, sqlite:///path.db, "
        "redis://host:port/db (or rediss://), postgresql://user@host/db or file:///dir"
    )


def _split_query(rest: str, url: str) -> tuple[str, dict[str, Any], list[tuple[str, str]]]:
    path, _, query = rest.partition("?")
    ours: dict[str, Any] = {}
    passthrough: list[tuple[str, str]] = []
    for key, value in parse_qsl(query, keep_blank_values=True):
        convert = _QUERY_OPTIONS.get(key)
        if convert is None:
            passthrough.append((key, value))
            continue
        try:
            ours[key] = convert(value)
        except ValueError as exc:
            raise StoreError(f"store URL {url!r}: option {key}={value!r} is invalid: {exc}") from exc
    return path, ours, passthrough


def _only(options: dict[str, Any], scheme: str, *allowed: str) -> dict[str, Any]:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise StoreError(f"{scheme}:// stores take {', '.join(allowed)}; not {', '.join(unknown)}")
    return options


def _sqlite_path(rest: str) -> str:
    """The path of a ``sqlite://`` URL: the one slash after ``sqlite://`` separates, so ``/rel.db`` is relative
    and ``//abs.db`` absolute (SQLAlchemy's reading); ``~`` expands."""
    if rest.startswith("/"):
        rest = rest[1:]
    if rest.startswith("/"):
        rest = "/" + rest.lstrip("/")
    return rest if rest == ":memory:" else str(Path(rest).expanduser())


def _path(rest: str) -> str:
    """The path of a ``file://`` URL (RFC 8089: ``/abs`` after the empty host); ``//abs`` collapses to ``/abs``,
    ``~`` expands."""
    if rest.startswith("//"):
        rest = "/" + rest.lstrip("/")
    if rest.startswith("/~"):
        rest = rest[1:]
    return str(Path(rest).expanduser())


__all__ = [
    "AsyncConversationStore",
    "AsyncStoreMixin",
    "ConversationPage",
    "ConversationStore",
    "ConversationSummary",
    "DEFAULT_MAX_RECORD_BYTES",
    "DefinitionVersionStore",
    "DueTimer",
    "FileStore",
    "MemoryStore",
    "REDIS_MAX_CONTEXT_BYTES",
    "REDIS_MAX_RECORD_BYTES",
    "SQLiteStore",
    "TimerStore",
    "default_sqlite_path",
    "default_store_url",
    "open_store",
    "redact_url",
]
