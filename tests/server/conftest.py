"""Fixtures for the API tests: the real ASGI app over a real store (SQLite in tmp_path), a test model, keys.

The model is a ``FunctionLLM``: the opening says hello; a turn whose message holds ``finish``
moves to ``done`` with the name and card it was given (the card is a sensitive key); any
other message stays and echoes it. ``gate`` can hold a turn inside the model call, so a test
can act while a turn is in flight (a duplicate, a disconnect).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient  # the dev extra installs the server's (pip install -e '.[dev]')

from llm_fsm.engine import LLMRequest
from llm_fsm.manager import FSMManager
from llm_fsm.server import KeyRing, create_app
from llm_fsm.server._keys import ApiKey, hash_key
from llm_fsm.stores import open_store
from llm_fsm.testing import FunctionLLM

SIGNUP = """\
name: Signup
description: Collect a name and a card number
initial_state: ask
context_keys:
  name: {type: string}
  card: {type: string, pattern: "^[0-9 ]{12,23}$", sensitive: true}
states:
  ask:
    id: ask
    description: Asking
    purpose: Ask for the name and the card number
    transitions:
      - target_state: done
        description: Both are known
        conditions:
          - description: name and card recorded
            requires_context_keys: [name, card]
  done:
    id: done
    description: Done
    purpose: Thank the user
    transitions: []
"""

CARD = "4111 1111 1111 1111"
ALICE_KEY = "alice-secret-key-0123456789"
BOB_KEY = "bob-secret-key-0123456789ab"
READER_KEY = "alice-reader-key-0123456789"


@dataclass
class Model:
    """The test model, with a count of its turn calls and an optional gate that holds them."""

    turn_calls: int = 0
    gate: asyncio.Event | None = None
    entered: asyncio.Event | None = None
    requests: list[LLMRequest] = field(default_factory=list)

    async def __call__(self, request: LLMRequest) -> Any:
        self.requests.append(request)
        if request.purpose == "opening":
            return {"target_state": None, "message": "Hello! Your name and card, please."}
        if request.purpose == "turn":
            self.turn_calls += 1
            if self.entered is not None:
                self.entered.set()
            if self.gate is not None:
                await self.gate.wait()
        text = request.user_message
        if "finish" in text:
            return {"target_state": "done", "context_update": {"name": "Ann", "card": CARD}, "message": "Thanks, Ann!"}
        return {"target_state": None, "message": f"echo: {text}"}


@dataclass
class Server:
    app: Any
    client: TestClient
    manager: FSMManager
    model: Model

    def headers(self, key: str = ALICE_KEY) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"}

    def start(self, key: str = ALICE_KEY, **body: Any) -> str:
        response = self.client.post(
            "/v1/conversations", json={"definition": "signup", **body}, headers=self.headers(key)
        )
        assert response.status_code == 201, response.text
        return str(response.json()["conversation_id"])

    def send(self, conversation_id: str, message: str, key: str = ALICE_KEY, **extra: Any) -> Any:
        return self.client.post(
            f"/v1/conversations/{conversation_id}/messages",
            json={"message": message, **extra},
            headers=self.headers(key),
        )


def keyring() -> KeyRing:
    return KeyRing(
        [
            ApiKey(hash_key(ALICE_KEY), "alice", frozenset({"read", "write"})),
            ApiKey(hash_key(BOB_KEY), "bob", frozenset({"read", "write"})),
            ApiKey(hash_key(READER_KEY), "alice", frozenset({"read"})),
        ]
    )


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    folder = tmp_path / "definitions"
    folder.mkdir()
    (folder / "signup.yaml").write_text(SIGNUP, encoding="utf-8")
    return folder


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/conversations.db"


MakeServer = Callable[..., Server]


@pytest.fixture
def make_server(definitions: Path, store_url: str) -> Iterator[MakeServer]:
    """Build an app with options (``store=``, ``keys=``, any ``create_app`` keyword); stores are closed after."""
    opened: list[Any] = []

    def factory(*, store: str | None = None, manager: FSMManager | None = None, **options: Any) -> Server:
        model = Model()
        if manager is None:
            opened_store = open_store(store or store_url)
            opened.append(opened_store)
            manager = FSMManager(llm_interface=FunctionLLM(model), store=opened_store)
        options.setdefault("keys", keyring())
        app = create_app(manager, [definitions], **options)
        return Server(app, TestClient(app, raise_server_exceptions=False), manager, model)

    yield factory
    for item in opened:
        item.close()


@pytest.fixture
def server(make_server: MakeServer) -> Server:
    return make_server()


# --- Redis: the store tests' real redis-server, reused (skipped where redis-server is not installed) ---------


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from stores.redis_server import REDIS_SERVER, RedisServer  # tests/stores, on the path as pytest puts it

    if REDIS_SERVER is None:
        pytest.skip("redis-server binary not found on PATH")
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: Any) -> str:
    """The session's server, emptied: each test starts from a blank database."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return str(redis_server.url)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[Any]:
    """A redis-server of this test alone, which it may stop and start again."""
    from stores.redis_server import REDIS_SERVER, RedisServer

    if REDIS_SERVER is None:
        pytest.skip("redis-server binary not found on PATH")
    server = RedisServer(tmp_path / "redis").start()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "redis"])
def any_store(request: pytest.FixtureRequest, store_url: str) -> str:
    """A store URL of each kind the workers of a deployment share."""
    return store_url if request.param == "sqlite" else str(request.getfixturevalue("redis_url"))
