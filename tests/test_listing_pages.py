"""``FSMManager.list_conversations`` in pages: a cursor to pass back, newest first, the same answer sync and async, and
what older callers and older stores relied on kept."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from llm_fsm.engine import FSMInstance
from llm_fsm.errors import InvalidCursorError, UsageError
from llm_fsm.manager import FSMManager
from llm_fsm.stores import ConversationPage, ConversationSummary, MemoryStore
from llm_fsm.stores._paging import page_of
from llm_fsm.testing import FunctionLLM


def _manager(store: Any) -> FSMManager:
    return FSMManager(llm_interface=FunctionLLM(lambda request: {"message": "hi"}), store=store)


def _saved(store: Any, count: int, user_id: str | None = "u1", room_id: str | None = None) -> list[str]:
    """``count`` conversations a second apart; their ids newest first."""
    now = time.time()
    ids = []
    for n in range(count):
        instance = FSMInstance(
            fsm_id="f", current_state="s", user_id=user_id, room_id=room_id, updated_at=now - 100 + n
        )
        store.save(instance, expected_version=None)
        ids.append(instance.conversation_id)
    return ids[::-1]


def _ids(page: ConversationPage) -> list[str]:
    return [s.conversation_id for s in page.items]


def test_pages_follow_the_cursor_to_the_last_page() -> None:
    store = MemoryStore()
    newest_first = _saved(store, 5)
    manager = _manager(store)
    first = manager.list_conversations(user_id="u1", limit=2)
    second = manager.list_conversations(user_id="u1", limit=2, cursor=first.next_cursor)
    last = manager.list_conversations(user_id="u1", limit=2, cursor=second.next_cursor)
    assert [_ids(first), _ids(second), _ids(last)] == [newest_first[:2], newest_first[2:4], newest_first[4:]]
    assert last.next_cursor is None


def test_async_pages_are_the_same_pages() -> None:
    store = MemoryStore()
    newest_first = _saved(store, 3)
    manager = _manager(store)

    async def pages() -> list[str]:
        first = await manager.alist_conversations(user_id="u1", limit=2)
        rest = await manager.alist_conversations(user_id="u1", limit=2, cursor=first.next_cursor)
        return _ids(first) + _ids(rest)

    assert asyncio.run(pages()) == newest_first


def test_without_a_limit_the_listing_is_a_list_of_everything_as_before() -> None:
    store = MemoryStore()
    newest_first = _saved(store, 3)
    listed = _manager(store).list_conversations(user_id="u1")
    assert isinstance(listed, list) and len(listed) == 3 and listed.next_cursor is None
    assert [s.conversation_id for s in listed] == newest_first
    assert listed == listed.items


def test_a_users_listing_spans_their_rooms_and_only_theirs() -> None:
    store = MemoryStore()
    mine = set(_saved(store, 2, room_id="r1") + _saved(store, 2, room_id=None))
    _saved(store, 2, user_id="u2")
    assert set(_ids(_manager(store).list_conversations(user_id="u1", limit=10))) == mine


class NoFullListing(MemoryStore):
    """A store whose full listing is off limits: a user's page must come from the store's page, not a scan."""

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        if user_id is None and room_id is None:
            raise AssertionError("listed every conversation to find one user's")
        return super().list(user_id=user_id, room_id=room_id)

    def list_page(self, **scope: Any) -> ConversationPage:
        if scope.get("all_rooms"):
            mine = [s for s in MemoryStore.list(self) if s.user_id == scope["user_id"]]  # what an index holds
            return page_of(mine, scope.get("limit"), scope.get("cursor"))
        return super().list_page(**scope)


def test_a_users_listing_asks_the_store_for_that_users_page() -> None:
    store = NoFullListing()
    newest_first = _saved(store, 3)
    assert _ids(_manager(store).list_conversations(user_id="u1", limit=2)) == newest_first[:2]


class OlderStore:
    """A custom store written before pages: ``list`` only."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    def __getattr__(self, name: str) -> Any:
        if name in ("list_page", "alist_page"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def test_a_store_without_pages_is_paged_by_the_manager() -> None:
    store = OlderStore()
    newest_first = _saved(store.inner, 3)
    manager = _manager(store)
    first = manager.list_conversations(user_id="u1", limit=2)
    rest = manager.list_conversations(user_id="u1", limit=2, cursor=first.next_cursor)
    assert _ids(first) + _ids(rest) == newest_first and rest.next_cursor is None


@pytest.mark.parametrize("cursor", ["x", "e30", "eyJ0IjoxLCJjIjoiIn0"])
def test_a_cursor_no_listing_gave_is_refused(cursor: str) -> None:
    with pytest.raises(InvalidCursorError):
        _manager(MemoryStore()).list_conversations(user_id="u1", limit=2, cursor=cursor)


@pytest.mark.parametrize("limit", [0, -1])
def test_a_page_holds_at_least_one_conversation(limit: int) -> None:
    with pytest.raises(UsageError):
        _manager(MemoryStore()).list_conversations(user_id="u1", limit=limit)
