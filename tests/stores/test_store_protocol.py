"""Every store class implements the store protocol, sync and async, with the protocol's exact signatures.

The conformance suite checks behaviour on live instances; this checks the shape of each class, so a
store that renames a keyword, forgets an async twin or turns a keyword-only argument positional fails
here before any behaviour test can hide it behind a default.
"""

from __future__ import annotations

import inspect

import pytest

from llm_fsm.stores import AsyncConversationStore, ConversationStore
from llm_fsm.stores.base import DefinitionVersionStore
from llm_fsm.stores.files import FileStore
from llm_fsm.stores.memory import MemoryStore
from llm_fsm.stores.postgres import PostgresStore
from llm_fsm.stores.redis import FallbackStore, RedisStore
from llm_fsm.stores.sqlite import SQLiteStore

STORE_CLASSES = [MemoryStore, SQLiteStore, FileStore, RedisStore, FallbackStore, PostgresStore]


def protocol_methods(protocol: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def shape(signature: inspect.Signature) -> list[tuple[str, inspect._ParameterKind, object]]:
    """Names, kinds and defaults of the parameters after ``self``: what a caller relies on."""
    return [(p.name, p.kind, p.default) for p in list(signature.parameters.values())[1:]]


@pytest.mark.parametrize("protocol", [ConversationStore, AsyncConversationStore], ids=["sync", "async"])
def test_the_protocols_are_not_empty(protocol: type) -> None:
    assert len(protocol_methods(protocol)) >= 6


@pytest.mark.parametrize("store_class", STORE_CLASSES, ids=lambda c: c.__name__)
def test_a_store_has_every_sync_method_with_the_protocols_signature(store_class: type) -> None:
    for name, expected in protocol_methods(ConversationStore).items():
        method = getattr(store_class, name, None)
        assert method is not None, f"{store_class.__name__} has no {name}()"
        assert not inspect.iscoroutinefunction(method), f"{store_class.__name__}.{name} must be sync"
        assert shape(inspect.signature(method)) == shape(expected), f"{store_class.__name__}.{name}"


@pytest.mark.parametrize("store_class", STORE_CLASSES, ids=lambda c: c.__name__)
def test_a_store_has_every_async_twin_with_the_protocols_signature(store_class: type) -> None:
    for name, expected in protocol_methods(AsyncConversationStore).items():
        method = getattr(store_class, name, None)
        assert method is not None, f"{store_class.__name__} has no {name}()"
        assert inspect.iscoroutinefunction(method), f"{store_class.__name__}.{name} must be a coroutine function"
        assert shape(inspect.signature(method)) == shape(expected), f"{store_class.__name__}.{name}"


@pytest.mark.parametrize("store_class", STORE_CLASSES, ids=lambda c: c.__name__)
def test_a_store_keeps_definition_versions_with_the_protocols_signatures(store_class: type) -> None:
    for name, expected in protocol_methods(DefinitionVersionStore).items():
        method = getattr(store_class, name, None)
        assert method is not None, f"{store_class.__name__} has no {name}()"
        assert inspect.iscoroutinefunction(method) == name.startswith("a"), f"{store_class.__name__}.{name}"
        assert shape(inspect.signature(method)) == shape(expected), f"{store_class.__name__}.{name}"


def test_every_async_twin_names_a_sync_method() -> None:
    sync = set(protocol_methods(ConversationStore))
    assert {name[1:] for name in protocol_methods(AsyncConversationStore)} <= sync


def test_a_live_memory_store_passes_the_runtime_checks() -> None:
    store = MemoryStore()
    assert isinstance(store, ConversationStore)
    assert isinstance(store, AsyncConversationStore)
