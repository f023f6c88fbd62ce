"""The contract every conversation store keeps, run against memory, SQLite, a real Redis, files and a real PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from llm_fsm.errors import (
    ConcurrentUpdateError,
    ContextError,
    ConversationNotFoundError,
    InvalidCursorError,
    RecordTooLargeError,
)
from llm_fsm.stores import ConversationStore
from llm_fsm.stores.base import TurnLogStore

from .conftest import StoreFactory
from .factories import plain_instance, rich_instance

# --- round trip -------------------------------------------------------------------


def test_a_created_conversation_loads_back_identical(store: ConversationStore) -> None:
    instance = rich_instance()
    store.save(instance, expected_version=None)
    loaded = store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    assert loaded.model_dump() == instance.model_dump()


def test_create_sets_version_one_on_the_instance_and_returns_it(store: ConversationStore) -> None:
    instance = plain_instance()
    assert store.save(instance, expected_version=None) == 1
    assert instance.version == 1


def test_each_update_bumps_the_version_by_one(store: ConversationStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    instance.current_state = "middle"
    assert store.save(instance, expected_version=1) == 2
    instance.current_state = "end"
    assert store.save(instance, expected_version=2) == 3
    loaded = store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    assert (loaded.version, loaded.current_state) == (3, "end")


def test_a_conversation_without_user_or_room_is_loaded_without_them(store: ConversationStore) -> None:
    instance = plain_instance(user_id=None, room_id=None)
    store.save(instance, expected_version=None)
    assert store.load(instance.conversation_id).conversation_id == instance.conversation_id


def test_ids_with_separators_dots_and_unicode_round_trip(store: ConversationStore) -> None:
    instance = plain_instance(user_id="../a:b/c%3A_", room_id="räum:1/..", conversation_id="id:with/odd..chars %")
    store.save(instance, expected_version=None)
    loaded = store.load("id:with/odd..chars %", user_id="../a:b/c%3A_", room_id="räum:1/..")
    assert loaded.model_dump() == instance.model_dump()


NUL = "before \x00 after"
"""Text a model may write (72 of 4,074 hostile turns did): PostgreSQL's text and jsonb cannot hold U+0000."""


def test_text_with_nul_round_trips_in_replies_messages_turns_and_context(store: ConversationStore) -> None:
    instance = rich_instance(turns=2)
    instance.context.data["note"] = NUL
    instance.context.conversation.add_user_message(NUL)
    instance.context.conversation.add_assistant_message(NUL)
    instance.turns[-1] = instance.turns[-1].model_copy(update={"user_message": NUL, "reply": NUL})
    instance.processed_messages["msg-nul"] = NUL
    store.save(instance, expected_version=None)
    loaded = store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    assert loaded.model_dump() == instance.model_dump()


def test_a_reply_with_nul_is_found_by_its_message_id(store: ConversationStore) -> None:
    instance = plain_instance()
    instance.processed_messages["msg-nul"] = NUL
    store.save(instance, expected_version=None)
    assert isinstance(store, TurnLogStore)
    hot = store.load_for_turn(instance.conversation_id, user_id="alice", room_id="room-1", message_id="msg-nul")
    assert hot.processed_messages == {"msg-nul": NUL}


def test_a_message_id_with_nul_round_trips(store: ConversationStore) -> None:
    instance = plain_instance()
    instance.processed_messages[NUL] = "answered"
    store.save(instance, expected_version=None)
    assert isinstance(store, TurnLogStore)
    whole = store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    hot = store.load_for_turn(instance.conversation_id, user_id="alice", room_id="room-1", message_id=NUL)
    assert whole.processed_messages == hot.processed_messages == {NUL: "answered"}


@pytest.mark.parametrize("where", ["conversation_id", "user_id", "room_id"])
def test_a_nul_in_an_id_asked_for_is_not_found(store: ConversationStore, where: str) -> None:
    """A library caller's id with NUL (PostgreSQL's text cannot hold one) is an unknown id, not a driver error."""
    instance = plain_instance()
    store.save(instance, expected_version=None)
    asked = {"conversation_id": instance.conversation_id, "user_id": "alice", "room_id": "room-1"}
    asked[where] = "ali\x00ce"
    with pytest.raises(ConversationNotFoundError):
        store.load(asked.pop("conversation_id"), **asked)


@pytest.mark.parametrize("where", ["conversation_id", "user_id", "room_id"])
def test_a_nul_in_an_id_deletes_nothing(store: ConversationStore, where: str) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    asked = {"conversation_id": instance.conversation_id, "user_id": "alice", "room_id": "room-1"}
    asked[where] = "ali\x00ce"
    assert store.delete(asked.pop("conversation_id"), **asked) is False
    assert store.load(instance.conversation_id, user_id="alice", room_id="room-1").version == 1


def test_a_nul_in_the_user_lists_nothing(store: ConversationStore) -> None:
    store.save(plain_instance(), expected_version=None)
    assert store.list(user_id="ali\x00ce") == []
    assert list(store.list_page(user_id="ali\x00ce", limit=10)) == []  # type: ignore[attr-defined]


def test_an_archived_message_with_nul_round_trips(store: ConversationStore) -> None:
    instance = plain_instance()
    instance.archive_outbox = [{"user": NUL}]
    store.save(instance, expected_version=None)
    assert store.transcript(instance.conversation_id, user_id="alice", room_id="room-1") == [{"user": NUL}]


# --- compare-and-set --------------------------------------------------------------


def test_creating_an_existing_conversation_is_a_conflict(store: ConversationStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    again = instance.model_copy(update={"current_state": "other"})
    with pytest.raises(ConcurrentUpdateError):
        store.save(again, expected_version=None)
    assert store.load(instance.conversation_id, user_id="alice", room_id="room-1").current_state == "start"


def test_saving_over_a_stale_version_is_a_conflict_and_changes_nothing(store: ConversationStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    store.save(instance, expected_version=1)
    stale = instance.model_copy(update={"current_state": "stale", "version": 1})
    with pytest.raises(ConcurrentUpdateError):
        store.save(stale, expected_version=1)
    assert stale.version == 1
    loaded = store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    assert (loaded.version, loaded.current_state) == (2, "start")


def test_updating_a_conversation_that_does_not_exist_is_a_conflict(store: ConversationStore) -> None:
    with pytest.raises(ConcurrentUpdateError):
        store.save(plain_instance(), expected_version=3)


def test_of_two_workers_on_one_version_only_the_first_save_wins(store: ConversationStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    first = store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    second = store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    first.context.data["winner"] = "first"
    second.context.data["winner"] = "second"
    store.save(first, expected_version=first.version)
    with pytest.raises(ConcurrentUpdateError):
        store.save(second, expected_version=second.version)
    assert store.load(instance.conversation_id, user_id="alice", room_id="room-1").context.data["winner"] == "first"


# --- not found and isolation ----------------------------------------------------------


def test_an_unknown_id_is_not_found_and_a_value_error(store: ConversationStore) -> None:
    with pytest.raises(ConversationNotFoundError) as caught:
        store.load("no-such-conversation", user_id="alice", room_id="room-1")
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("user_id", "room_id"),
    [("bob", "room-1"), ("alice", "room-2"), (None, None), ("alice", None), (None, "room-1"), ("_", "room-1")],
)
def test_another_user_or_room_cannot_load_the_conversation(
    store: ConversationStore, user_id: str | None, room_id: str | None
) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    with pytest.raises(ConversationNotFoundError):
        store.load(instance.conversation_id, user_id=user_id, room_id=room_id)
    with pytest.raises(ConversationNotFoundError):
        store.transcript(instance.conversation_id, user_id=user_id, room_id=room_id)


def test_another_user_cannot_delete_the_conversation(store: ConversationStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    assert store.delete(instance.conversation_id, user_id="bob", room_id="room-1") is False
    assert store.delete(instance.conversation_id, user_id="alice", room_id="room-2") is False
    assert store.load(instance.conversation_id, user_id="alice", room_id="room-1").version == 1


def test_another_user_or_room_does_not_see_the_conversation_listed(store: ConversationStore) -> None:
    store.save(plain_instance(), expected_version=None)
    assert store.list(user_id="bob", room_id="room-1") == []
    assert store.list(user_id="alice", room_id="room-2") == []


def test_ids_that_differ_only_in_where_a_colon_falls_are_different_owners(store: ConversationStore) -> None:
    instance = plain_instance(user_id="a:b", room_id="c")
    store.save(instance, expected_version=None)
    with pytest.raises(ConversationNotFoundError):
        store.load(instance.conversation_id, user_id="a", room_id="b:c")
    assert store.list(user_id="a", room_id="b:c") == []


def test_a_missing_user_and_a_user_named_underscore_are_different_owners(store: ConversationStore) -> None:
    instance = plain_instance(user_id=None, room_id="r")
    store.save(instance, expected_version=None)
    with pytest.raises(ConversationNotFoundError):
        store.load(instance.conversation_id, user_id="_", room_id="r")


# --- list, delete, expire -----------------------------------------------------------


def test_list_shows_the_pairs_conversations_newest_first(store: ConversationStore) -> None:
    now = time.time()
    old, new, middle = (plain_instance(updated_at=now - age) for age in (300, 10, 100))
    for instance in (old, new, middle):
        store.save(instance, expected_version=None)
    store.save(plain_instance(user_id="bob"), expected_version=None)
    listed = store.list(user_id="alice", room_id="room-1")
    assert [s.conversation_id for s in listed] == [new.conversation_id, middle.conversation_id, old.conversation_id]


def test_a_summary_describes_the_stored_conversation(store: ConversationStore) -> None:
    instance = rich_instance()
    store.save(instance, expected_version=None)
    (summary,) = store.list(user_id="alice", room_id="room-1")
    assert (summary.conversation_id, summary.fsm_id, summary.user_id, summary.room_id) == (
        instance.conversation_id,
        "booking",
        "alice",
        "room-1",
    )
    assert (summary.current_state, summary.status, summary.version) == ("confirm", "active", 1)
    assert summary.updated_at == pytest.approx(instance.updated_at)


def test_list_without_user_and_room_shows_every_conversation(store: ConversationStore) -> None:
    ids = set()
    for user, room in [("alice", "room-1"), ("bob", "room-2"), (None, None), ("a:b", "c")]:
        instance = plain_instance(user_id=user, room_id=room)
        store.save(instance, expected_version=None)
        ids.add((instance.conversation_id, user, room))
    assert {(s.conversation_id, s.user_id, s.room_id) for s in store.list()} == ids


def test_a_deleted_conversation_is_gone_everywhere(store: ConversationStore) -> None:
    instance = plain_instance()
    instance.archive_outbox = [{"user": "archived"}]
    store.save(instance, expected_version=None)
    assert store.delete(instance.conversation_id, user_id="alice", room_id="room-1") is True
    with pytest.raises(ConversationNotFoundError):
        store.load(instance.conversation_id, user_id="alice", room_id="room-1")
    with pytest.raises(ConversationNotFoundError):
        store.transcript(instance.conversation_id, user_id="alice", room_id="room-1")
    assert store.list(user_id="alice", room_id="room-1") == []
    assert store.delete(instance.conversation_id, user_id="alice", room_id="room-1") is False


def test_a_conversation_recreated_after_delete_starts_with_an_empty_archive(store: ConversationStore) -> None:
    instance = plain_instance()
    instance.archive_outbox = [{"user": "from the first life"}]
    store.save(instance, expected_version=None)
    store.delete(instance.conversation_id, user_id="alice", room_id="room-1")
    reborn = plain_instance(conversation_id=instance.conversation_id)
    store.save(reborn, expected_version=None)
    assert store.transcript(instance.conversation_id, user_id="alice", room_id="room-1") == []


def test_expire_removes_only_conversations_idle_longer_than_asked(store: ConversationStore) -> None:
    now = time.time()
    idle = plain_instance(updated_at=now - 3600)
    idle_elsewhere = plain_instance(user_id="bob", room_id=None, updated_at=now - 7200)
    fresh = plain_instance(updated_at=now - 5)
    for instance in (idle, idle_elsewhere, fresh):
        store.save(instance, expected_version=None)
    assert store.expire(older_than=600) == 2
    assert [s.conversation_id for s in store.list()] == [fresh.conversation_id]
    with pytest.raises(ConversationNotFoundError):
        store.load(idle.conversation_id, user_id="alice", room_id="room-1")


# --- transcript archive ---------------------------------------------------------------


def test_the_archive_outbox_is_drained_into_the_archive_on_save(store: ConversationStore) -> None:
    instance = plain_instance()
    instance.archive_outbox = [{"user": "one"}, {"assistant": "two"}]
    store.save(instance, expected_version=None)
    assert instance.archive_outbox == []
    assert store.load(instance.conversation_id, user_id="alice", room_id="room-1").archive_outbox == []


def test_transcript_is_the_archive_then_the_live_messages_in_order(store: ConversationStore) -> None:
    instance = plain_instance()
    conversation = instance.context.conversation
    expected: list[dict[str, Any]] = []
    for turn in range(6):
        conversation.add_user_message(f"u{turn}", metadata={"turn": turn, "tags": ["a", "ü"]})
        conversation.add_assistant_message(f"a{turn}")
        expected += [dict(entry) for entry in conversation.exchanges[-2:]]
        if len(conversation.exchanges) > 4:  # prune like the engine does: oldest messages go to the outbox
            instance.archive_outbox = conversation.exchanges[:2]
            conversation.exchanges = conversation.exchanges[2:]
        store.save(instance, expected_version=None if turn == 0 else instance.version)
    assert store.transcript(instance.conversation_id, user_id="alice", room_id="room-1") == expected


def test_a_rejected_save_archives_nothing_and_keeps_the_outbox(store: ConversationStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    store.save(instance, expected_version=1)
    late = instance.model_copy(update={"version": 1, "archive_outbox": [{"user": "lost?"}]})
    with pytest.raises(ConcurrentUpdateError):
        store.save(late, expected_version=1)
    assert late.archive_outbox == [{"user": "lost?"}]
    assert store.transcript(instance.conversation_id, user_id="alice", room_id="room-1") == []


# --- size caps ------------------------------------------------------------------------


def test_a_record_over_the_cap_is_refused_and_nothing_is_written(make_store: StoreFactory) -> None:
    store = make_store(max_record_bytes=2000)
    instance = rich_instance()
    with pytest.raises(RecordTooLargeError):
        store.save(instance, expected_version=None)
    assert instance.version == 0
    with pytest.raises(ConversationNotFoundError):
        store.load(instance.conversation_id, user_id="alice", room_id="room-1")


def test_context_data_over_the_cap_is_refused_as_a_context_error(make_store: StoreFactory) -> None:
    store = make_store(max_context_bytes=100)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    instance.context.data["essay"] = "x" * 200
    with pytest.raises(RecordTooLargeError) as caught:
        store.save(instance, expected_version=1)
    assert isinstance(caught.value, ContextError)
    assert store.load(instance.conversation_id, user_id="alice", room_id="room-1").context.data == {}


# --- async twins ------------------------------------------------------------------------


def test_the_async_twins_do_what_the_sync_methods_do(store: ConversationStore) -> None:
    async def scenario() -> None:
        instance = rich_instance()
        instance.archive_outbox = [{"user": "early"}]
        assert await store.asave(instance, expected_version=None) == 1  # type: ignore[attr-defined]
        loaded = await store.aload(instance.conversation_id, user_id="alice", room_id="room-1")  # type: ignore[attr-defined]
        assert loaded.model_dump() == instance.model_dump()
        listed = await store.alist(user_id="alice", room_id="room-1")  # type: ignore[attr-defined]
        assert [s.conversation_id for s in listed] == [instance.conversation_id]
        transcript = await store.atranscript(instance.conversation_id, user_id="alice", room_id="room-1")  # type: ignore[attr-defined]
        assert transcript[0] == {"user": "early"}
        assert await store.aexpire(older_than=3600) == 0  # type: ignore[attr-defined]
        assert await store.adelete(instance.conversation_id, user_id="alice", room_id="room-1") is True  # type: ignore[attr-defined]
        with pytest.raises(ConversationNotFoundError):
            await store.aload(instance.conversation_id, user_id="alice", room_id="room-1")  # type: ignore[attr-defined]

    asyncio.run(scenario())


def test_concurrent_async_saves_on_one_version_let_exactly_one_win(store: ConversationStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)

    async def race() -> list[object]:
        copies = [instance.model_copy(deep=True) for _ in range(8)]
        return await asyncio.gather(
            *(store.asave(c, expected_version=1) for c in copies),
            return_exceptions=True,  # type: ignore[attr-defined]
        )

    outcomes = asyncio.run(race())
    assert sorted(type(o).__name__ for o in outcomes) == ["ConcurrentUpdateError"] * 7 + ["int"]


# --- pages ---------------------------------------------------------------------------


def _saved(store: ConversationStore, count: int, **owner: Any) -> list[str]:
    """``count`` conversations a second apart, returned newest first."""
    now = time.time()
    instances = [plain_instance(updated_at=now - 1000 + n, **owner) for n in range(count)]
    for instance in instances:
        store.save(instance, expected_version=None)
    return [i.conversation_id for i in reversed(instances)]


def _pages(store: Any, limit: int, **scope: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = store.list_page(limit=limit, cursor=cursor, **scope)
        pages.append([s.conversation_id for s in page.items])
        cursor = page.next_cursor
        if cursor is None:
            return pages


def test_pages_are_disjoint_newest_first_and_together_list_everything(store: Any) -> None:
    newest_first = _saved(store, 7)
    pages = _pages(store, 3, user_id="alice", room_id="room-1")
    assert pages == [newest_first[:3], newest_first[3:6], newest_first[6:]]


def test_the_last_page_has_no_next_cursor(store: Any) -> None:
    _saved(store, 3)
    page = store.list_page(user_id="alice", room_id="room-1", limit=3)
    assert len(page.items) == 3 and page.next_cursor is None


def test_conversations_with_the_same_time_are_paged_by_id_without_loss(store: Any) -> None:
    at = time.time() - 50
    ids = sorted(f"tie-{n}" for n in range(5))
    for cid in ids:
        store.save(plain_instance(conversation_id=cid, updated_at=at), expected_version=None)
    assert sum(_pages(store, 2, user_id="alice", room_id="room-1"), []) == ids[::-1]


def test_a_conversation_started_between_pages_neither_appears_later_nor_shifts_them(store: Any) -> None:
    newest_first = _saved(store, 6)
    first = store.list_page(user_id="alice", room_id="room-1", limit=2)
    store.save(plain_instance(), expected_version=None)  # newer than every listed one
    second = store.list_page(user_id="alice", room_id="room-1", limit=2, cursor=first.next_cursor)
    third = store.list_page(user_id="alice", room_id="room-1", limit=2, cursor=second.next_cursor)
    assert [s.conversation_id for s in second.items + third.items] == newest_first[2:]


def test_a_users_pages_cover_every_room_of_that_user_only(store: Any) -> None:
    mine = set(_saved(store, 3, user_id="alice", room_id="room-1"))
    mine |= set(_saved(store, 2, user_id="alice", room_id=None))
    _saved(store, 2, user_id="bob", room_id="room-1")
    pages = _pages(store, 2, user_id="alice", all_rooms=True)
    listed = sum(pages, [])
    assert len(listed) == len(mine) and set(listed) == mine


def test_a_rooms_pages_hold_only_that_room(store: Any) -> None:
    room = _saved(store, 3, user_id="alice", room_id="room-2")
    _saved(store, 3, user_id="alice", room_id="room-1")
    assert sum(_pages(store, 2, user_id="alice", room_id="room-2"), []) == room


def test_everyones_pages_list_every_owner(store: Any) -> None:
    everyone = set(_saved(store, 2, user_id="alice", room_id="room-1"))
    everyone |= set(_saved(store, 2, user_id=None, room_id=None))
    everyone |= set(_saved(store, 1, user_id="bob", room_id="x"))
    listed = sum(_pages(store, 2), [])
    assert len(listed) == 5 and set(listed) == everyone


def test_a_page_without_limit_is_everything_after_the_cursor(store: Any) -> None:
    newest_first = _saved(store, 4)
    first = store.list_page(user_id="alice", room_id="room-1", limit=1)
    rest = store.list_page(user_id="alice", room_id="room-1", cursor=first.next_cursor)
    assert [s.conversation_id for s in rest.items] == newest_first[1:] and rest.next_cursor is None


@pytest.mark.parametrize("cursor", ["", "not base64!", "bm90IGpzb24", "eyJ0IjoxfQ", "W10", "eyJ0IjoiMSIsImMiOiJ4In0"])
def test_a_cursor_no_listing_gave_is_refused(store: Any, cursor: str) -> None:
    with pytest.raises(InvalidCursorError):
        store.list_page(user_id="alice", room_id="room-1", limit=2, cursor=cursor)


def test_pages_are_served_async_too(store: Any) -> None:
    newest_first = _saved(store, 3)

    async def both() -> list[str]:
        first = await store.alist_page(user_id="alice", room_id="room-1", limit=2)
        rest = await store.alist_page(user_id="alice", room_id="room-1", limit=2, cursor=first.next_cursor)
        return [s.conversation_id for s in first.items + rest.items]

    assert asyncio.run(both()) == newest_first
