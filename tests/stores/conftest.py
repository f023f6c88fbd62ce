"""Fixtures for the store tests: every store kind, and a real redis-server and PostgreSQL cluster started for the
session."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.stores import ConversationStore, open_store

from .postgres_server import PostgresServer
from .postgres_server import why_not as no_postgres
from .redis_server import REDIS_SERVER, RedisServer

NO_REDIS = "redis-server binary not found on PATH (install redis-server to run the Redis store tests)"

STORE_KINDS = ["memory", "sqlite", "redis", "files", "postgres"]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    if REDIS_SERVER is None:
        pytest.skip(NO_REDIS)
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The session server, emptied: each test starts from a blank database."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test alone, which the test may stop, pause and restart."""
    if REDIS_SERVER is None:
        pytest.skip(NO_REDIS)
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway cluster on a free loopback port, removed with its data after the session."""
    reason = no_postgres()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.destroy()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """The session cluster with a PostgreSQL schema of this test alone: each test starts from no tables."""
    return postgres_server.url(schema=f"t_{uuid.uuid4().hex[:16]}")


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A cluster of this test alone, which the test may kill and restart."""
    reason = no_postgres()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.destroy()


StoreFactory = Callable[..., ConversationStore]


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/conversations.db"
    if kind == "files":
        return f"file://{tmp_path}/conversations"
    if kind == "redis":
        return str(request.getfixturevalue("redis_url"))
    if kind == "postgres":
        return str(request.getfixturevalue("postgres_url"))
    raise ValueError(kind)


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_store(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    """Open a store of the parametrized kind with options; every store opened is closed afterwards."""
    url = _url(store_kind, tmp_path, request)
    opened: list[ConversationStore] = []

    def factory(**options: Any) -> ConversationStore:
        store = open_store(url, **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> ConversationStore:
    return make_store()
