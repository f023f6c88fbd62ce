"""What the PostgreSQL store promises beyond the shared contract, against a throwaway cluster."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import LLMRequest
from llm_fsm.errors import (
    ConcurrentUpdateError,
    ConversationNotFoundError,
    StoreCorruptedError,
    StoreError,
    StoreUnavailableError,
)
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.loading import load_fsm_definition
from llm_fsm.manager import FSMManager
from llm_fsm.stores import open_store
from llm_fsm.stores.postgres import SCHEMA_VERSION, PostgresStore

from .factories import plain_instance, rich_instance
from .postgres_server import PostgresServer, free_port
from .test_engine_on_stores import GREETING

OWNER = {"user_id": "alice", "room_id": "room-1"}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    opened = open_store(postgres_url)
    assert isinstance(opened, PostgresStore)
    yield opened
    opened.close()


def sql(store: PostgresStore, query: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run ``query`` behind the store's back, ``{s}`` standing for its schema; the rows, if any."""
    with psycopg.connect(store.url, autocommit=True) as conn:
        cursor = conn.execute(query.replace("{s}", f'"{store.schema}"').encode(), params)
        return cursor.fetchall() if cursor.description else []


def _load(store: PostgresStore, instance: FSMInstance) -> FSMInstance:
    return store.load(instance.conversation_id, user_id=instance.user_id, room_id=instance.room_id)


def unreachable(**options: Any) -> PostgresStore:
    return PostgresStore(f"postgresql://nobody@127.0.0.1:{free_port()}/postgres", connect_timeout=1, **options)


# --- layout -------------------------------------------------------------------------------------


def test_each_conversation_is_one_row_with_queryable_columns(store: PostgresStore) -> None:
    instance = rich_instance()
    store.save(instance, expected_version=None)
    store.save(instance, expected_version=1)
    rows = sql(
        store,
        "SELECT conversation_id, user_id, room_id, fsm_id, state, status, version, expires_at FROM {s}.conversations",
    )
    assert rows == [(instance.conversation_id, "alice", "room-1", "booking", "confirm", "active", 2, None)]


def test_archived_messages_are_rows_of_the_archive_table_in_order(store: PostgresStore) -> None:
    instance = plain_instance()
    instance.archive_outbox = [{"user": "a"}, {"assistant": "b"}]
    store.save(instance, expected_version=None)
    instance.archive_outbox = [{"user": "c"}]
    store.save(instance, expected_version=1)
    rows = sql(store, "SELECT seq, message FROM {s}.archive ORDER BY seq")
    assert rows == [(1, '{"user":"a"}'), (2, '{"assistant":"b"}'), (3, '{"user":"c"}')]


def test_a_turn_whose_reply_holds_nul_is_saved_and_its_message_id_answered_with_it_again(postgres_url: str) -> None:
    calls: list[str] = []

    def model(request: LLMRequest) -> dict[str, object]:
        calls.append(request.purpose)
        return {"transition": {"target_state": "greeting", "context_update": {}}, "message": "hi\x00there"}

    definition = load_fsm_definition(GREETING)
    fsm = FSMManager(fsm_loader=lambda _id: definition, llm_interface=FunctionLLM(model), store=postgres_url)
    cid, _ = fsm.start_conversation("greeting")
    assert fsm.process_message(cid, "hello", "web-1") == "hi\x00there"
    assert fsm.process_message(cid, "hello", "web-1") == "hi\x00there"  # the duplicate, answered from the store
    assert calls.count("turn") == 1
    assert fsm.explain(cid).reply == "hi\x00there"


def test_replies_are_plain_text_in_sql_and_one_with_nul_its_json_after_a_mark(store: PostgresStore) -> None:
    instance = plain_instance()
    instance.processed_messages.update({"web-1": "plain", "web-2": "with \x00 inside"})
    store.save(instance, expected_version=None)
    rows = sql(store, "SELECT message_id, reply FROM {s}.replies ORDER BY seq")
    assert rows == [("web-1", "plain"), ("web-2", '\ue000"with \\u0000 inside"')]


def test_a_reply_stored_before_the_escape_that_starts_with_its_mark_reads_back_as_it_was(store: PostgresStore) -> None:
    instance = plain_instance()
    instance.processed_messages["web-1"] = "placeholder"
    store.save(instance, expected_version=None)
    sql(store, "UPDATE {s}.replies SET reply = %s", '\ue000"not escaped"')
    assert _load(store, instance).processed_messages == {"web-1": '\ue000"not escaped"'}


def test_the_tables_are_created_on_first_use_with_their_layout_version(store: PostgresStore) -> None:
    store.list()
    assert sql(store, "SELECT version FROM {s}.schema_version") == [(SCHEMA_VERSION,)]
    tables = sql(store, "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename", store.schema)
    assert [t for (t,) in tables] == [
        "archive",
        "conversations",
        "definition_versions",
        "replies",
        "schema_version",
        "timers",
        "turns",
    ]


def test_a_database_of_a_newer_layout_is_refused_before_anything_is_written(postgres_url: str) -> None:
    first = open_store(postgres_url)
    assert isinstance(first, PostgresStore)
    first.list()
    sql(first, "UPDATE {s}.schema_version SET version = %s", SCHEMA_VERSION + 1)
    first.close()
    newer = open_store(postgres_url)
    with pytest.raises(StoreError, match=f"layout version {SCHEMA_VERSION + 1}, newer"):
        newer.save(plain_instance(), expected_version=None)
    assert sql(first, "SELECT count(*) FROM {s}.conversations") == [(0,)]
    newer.close()


def test_stores_on_different_schemas_do_not_see_each_other(postgres_server: PostgresServer) -> None:
    one, two = (open_store(postgres_server.url(schema=name)) for name in ("app_one", "app_two"))
    instance = plain_instance()
    one.save(instance, expected_version=None)
    with pytest.raises(ConversationNotFoundError):
        two.load(instance.conversation_id, **OWNER)
    assert two.list() == []
    one.close()
    two.close()


def test_many_processes_opening_a_new_database_at_once_create_the_tables_once(postgres_url: str) -> None:
    code = (
        "import sys; from llm_fsm.stores import open_store; from tests.stores.factories import plain_instance;"
        " open_store(sys.argv[1]).save(plain_instance(), expected_version=None)"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, postgres_url], cwd=REPO) for _ in range(4)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0, 0]
    store = open_store(postgres_url)
    assert len(store.list()) == 4
    store.close()


# --- expiry -------------------------------------------------------------------------------------


def test_without_a_ttl_a_conversation_never_expires(store: PostgresStore) -> None:
    store.save(plain_instance(), expected_version=None)
    assert sql(store, "SELECT expires_at FROM {s}.conversations") == [(None,)]


def test_a_ttl_sets_expires_at_and_every_save_refreshes_it(postgres_url: str) -> None:
    store = open_store(postgres_url, ttl_seconds=3600)
    assert isinstance(store, PostgresStore)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    (left,) = sql(store, "SELECT extract(epoch FROM expires_at - now()) FROM {s}.conversations")[0]
    assert 3500 < float(left) <= 3600
    sql(store, "UPDATE {s}.conversations SET expires_at = now() + interval '1 minute'")
    store.save(instance, expected_version=1)
    (left,) = sql(store, "SELECT extract(epoch FROM expires_at - now()) FROM {s}.conversations")[0]
    assert float(left) > 3500
    store.close()


@pytest.fixture
def lapsed(postgres_url: str) -> Iterator[tuple[PostgresStore, FSMInstance]]:
    """A store with a TTL and one conversation (with archive and turn log) whose expiry has passed."""
    store = open_store(postgres_url, ttl_seconds=3600)
    assert isinstance(store, PostgresStore)
    instance = rich_instance()
    instance.archive_outbox = [{"user": "archived"}]
    store.save(instance, expected_version=None)
    sql(store, "UPDATE {s}.conversations SET expires_at = now() - interval '1 second'")
    yield store, instance
    store.close()


def test_a_conversation_past_its_expiry_is_not_found_listed_nor_saved_over(
    lapsed: tuple[PostgresStore, FSMInstance],
) -> None:
    store, instance = lapsed
    with pytest.raises(ConversationNotFoundError):
        _load(store, instance)
    with pytest.raises(ConversationNotFoundError):
        store.load_for_turn(instance.conversation_id, **OWNER)
    with pytest.raises(ConversationNotFoundError):
        store.transcript(instance.conversation_id, **OWNER)
    assert store.list() == [] and store.list(**OWNER) == []
    with pytest.raises(ConcurrentUpdateError):
        store.save(instance, expected_version=1)
    assert store.delete(instance.conversation_id, **OWNER) is False


def test_expire_sweeps_conversations_past_their_expiry_with_their_archive_and_log(
    lapsed: tuple[PostgresStore, FSMInstance],
) -> None:
    store, _ = lapsed
    store.save(plain_instance(), expected_version=None)  # fresh: stays
    assert store.expire(older_than=3600) == 1
    assert sql(store, "SELECT count(*) FROM {s}.conversations") == [(1,)]
    for table in ("archive", "turns", "replies"):
        assert sql(store, f"SELECT count(*) FROM {{s}}.{table}") == [(0,)], table


def test_a_new_conversation_may_take_the_id_of_an_expired_one(lapsed: tuple[PostgresStore, FSMInstance]) -> None:
    store, instance = lapsed
    reborn = plain_instance(conversation_id=instance.conversation_id)
    assert store.save(reborn, expected_version=None) == 1
    whole = _load(store, reborn)
    assert whole.turns == [] and whole.processed_messages == {}
    assert store.transcript(instance.conversation_id, **OWNER) == []


# --- failures -----------------------------------------------------------------------------------


def test_an_undecodable_record_is_reported_as_corrupted(store: PostgresStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    sql(store, "UPDATE {s}.conversations SET record = '{broken'")
    with pytest.raises(StoreCorruptedError):
        _load(store, instance)


def test_an_unreachable_server_raises_unavailable_for_every_operation() -> None:
    store = unreachable()
    instance = plain_instance()
    instance.archive_outbox = [{"user": "keep me"}]
    with pytest.raises(StoreUnavailableError):
        store.save(instance, expected_version=None)
    assert (instance.version, instance.archive_outbox) == (0, [{"user": "keep me"}])
    for call in (
        lambda: _load(store, instance),
        lambda: store.load_for_turn(instance.conversation_id, **OWNER),
        lambda: store.list(),
        lambda: store.delete(instance.conversation_id),
        lambda: store.transcript(instance.conversation_id),
        lambda: store.expire(older_than=1),
    ):
        with pytest.raises(StoreUnavailableError):
            call()
    assert store.ping() is False
    store.close()


def test_a_server_stopped_mid_run_fails_saves_cleanly_and_work_resumes_after_restart(
    own_postgres: PostgresServer,
) -> None:
    store = PostgresStore(own_postgres.url(), connect_timeout=1)
    instance = plain_instance()
    store.save(instance, expected_version=None)
    own_postgres.stop()
    instance.current_state = "during outage"
    instance.archive_outbox = [{"user": "pruned during outage"}]
    with pytest.raises(StoreUnavailableError):
        store.save(instance, expected_version=1)
    assert (instance.version, instance.archive_outbox) == (1, [{"user": "pruned during outage"}])
    own_postgres.start()
    assert _load(store, instance).version == 1  # the pool's dead connections are replaced, not reported
    store.save(instance, expected_version=1)
    assert _load(store, instance).current_state == "during outage"
    assert store.transcript(instance.conversation_id, **OWNER) == [{"user": "pruned during outage"}]
    store.close()


def test_a_killed_server_keeps_every_committed_save_after_crash_recovery(own_postgres: PostgresServer) -> None:
    store = PostgresStore(own_postgres.url(), connect_timeout=1)
    instance = rich_instance()
    store.save(instance, expected_version=None)
    store.save(instance, expected_version=1)
    own_postgres.kill()
    with pytest.raises(StoreUnavailableError):
        store.list()
    own_postgres.start()
    assert _load(store, instance).model_dump() == instance.model_dump()
    store.close()


def test_a_save_retried_after_it_committed_is_recognised_not_applied_twice(store: PostgresStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    instance.archive_outbox = [{"user": "once"}]
    save = store._prepare_save(instance, 1, None)  # what a retry after a dropped connection runs again
    assert store._run(save) == 2
    assert store._run(save) == 2
    assert store.transcript(instance.conversation_id, **OWNER) == [{"user": "once"}]
    other = store._prepare_save(instance.model_copy(update={"version": 1}), 1, None)  # same version, another save
    with pytest.raises(ConcurrentUpdateError):
        store._run(other)


def test_a_forked_child_opens_its_own_connections(store: PostgresStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    pid = os.fork()
    if pid == 0:  # child: use the inherited store object
        code = 0
        try:
            store.save(instance, expected_version=1)
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _load(store, instance).version == 2  # the parent's connection still works


def test_a_closed_store_refuses_further_work(store: PostgresStore) -> None:
    store.close()
    with pytest.raises(StoreError):
        store.list()


# --- the async path -----------------------------------------------------------------------------


@pytest.fixture
def no_thread_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any store call sent to the library's thread pool fails the test."""

    async def refuse(function: object, *args: object, **kwargs: object) -> object:
        raise AssertionError(f"{function} was sent to the thread pool")

    monkeypatch.setattr("llm_fsm.stores.base.run_blocking", refuse)


def test_the_async_methods_talk_to_postgres_without_a_thread(store: PostgresStore, no_thread_pool: None) -> None:
    async def scenario() -> None:
        instance = rich_instance()
        instance.archive_outbox = [{"user": "early"}]
        assert await store.asave(instance, expected_version=None) == 1
        assert (await store.aload(instance.conversation_id, **OWNER)).turns == instance.turns
        hot = await store.aload_for_turn(instance.conversation_id, message_id="msg-2", **OWNER)
        assert hot.processed_messages == {"msg-2": "reply 2: I found 5 options."}
        assert [s.conversation_id for s in await store.alist(**OWNER)] == [instance.conversation_id]
        assert (await store.atranscript(instance.conversation_id, **OWNER))[0] == {"user": "early"}
        assert await store.aexpire(older_than=3600) == 0
        assert await store.adelete(instance.conversation_id, **OWNER) is True
        with pytest.raises(ConversationNotFoundError):
            await store.aload(instance.conversation_id, **OWNER)

    asyncio.run(scenario())


def test_an_async_turn_on_postgres_makes_no_thread_hop(postgres_url: str, no_thread_pool: None) -> None:
    async def echo(request: LLMRequest) -> dict[str, object]:
        return {"transition": {"target_state": "greeting", "context_update": {}}, "message": "hi"}

    definition = load_fsm_definition(GREETING)
    fsm = FSMManager(fsm_loader=lambda _id: definition, llm_interface=FunctionLLM(echo), store=postgres_url)

    async def scenario() -> int:
        cid, _ = await fsm.astart_conversation("greeting")
        for i in range(3):
            await fsm.aprocess_message(cid, f"message {i}", f"m{i}")
        assert await fsm.aprocess_message(cid, "again", "m1") == "hi"
        return (await fsm.aexplain(cid)).index

    assert asyncio.run(scenario()) == 3


def test_each_event_loop_talks_to_postgres_on_its_own_connections(store: PostgresStore) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)

    async def load() -> int:
        return (await store.aload(instance.conversation_id, **OWNER)).version

    assert [asyncio.run(load()) for _ in range(3)] == [1, 1, 1]  # a pool of a closed loop would fail here


def test_asyncio_run_closes_the_connections_of_its_loop(postgres_url: str) -> None:
    store = open_store(postgres_url + "&application_name=llm_fsm_loop_test")
    assert isinstance(store, PostgresStore)
    count = (
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'llm_fsm_loop_test' AND pid <> pg_backend_pid()"
    )

    async def list_and_count() -> int:
        await store.alist()
        return int(sql(store, count)[0][0])

    assert asyncio.run(list_and_count()) >= 1
    deadline = time.monotonic() + 5
    while sql(store, count) != [(0,)] and time.monotonic() < deadline:  # a backend leaves a moment after its client
        time.sleep(0.02)
    assert sql(store, count) == [(0,)]
    store.close()


def test_an_unreachable_server_is_unavailable_on_the_async_path_too() -> None:
    store = unreachable()
    instance = plain_instance()

    async def scenario() -> None:
        with pytest.raises(StoreUnavailableError):
            await store.asave(instance, expected_version=None)
        with pytest.raises(StoreUnavailableError):
            await store.aload_for_turn(instance.conversation_id, **OWNER)

    asyncio.run(scenario())
    assert instance.version == 0
    store.close()


# --- URL, options, the client library -----------------------------------------------------------


def test_url_options_configure_the_store(postgres_server: PostgresServer) -> None:
    store = open_store(postgres_server.url(schema="configured") + "&ttl_seconds=60&pool_size=3&connect_timeout=2")
    assert isinstance(store, PostgresStore)
    assert (store.schema, store.ttl and store.ttl.total_seconds(), store._pool_size) == ("configured", 60, 3)
    store.close()


def test_postgres_is_a_synonym_of_postgresql(postgres_server: PostgresServer) -> None:
    store = open_store(postgres_server.url(schema="synonym").replace("postgresql://", "postgres://", 1))
    assert isinstance(store, PostgresStore)
    store.save(plain_instance(), expected_version=None)
    assert len(store.list()) == 1
    store.close()


@pytest.mark.parametrize("schema", ["Upper", "has-dash", 'quo"te', "1digit", ""])
def test_a_schema_name_that_is_not_a_plain_sql_name_is_refused(schema: str) -> None:
    with pytest.raises(StoreError, match="schema"):
        PostgresStore("postgresql://localhost/postgres", schema=schema)


def test_importing_the_stores_does_not_import_psycopg() -> None:
    code = (
        "import sys, llm_fsm, llm_fsm.stores; llm_fsm.stores.open_store('memory://'); print('psycopg' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_without_psycopg_opening_a_postgres_store_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreError, match=r'pip install "llm_fsm\[postgres\]"'):
        open_store("postgresql://127.0.0.1/postgres")


def test_the_password_of_a_postgres_url_never_appears_in_errors() -> None:
    store = PostgresStore(f"postgresql://user:s3cret@127.0.0.1:{free_port()}/postgres", connect_timeout=1)
    with pytest.raises(StoreUnavailableError) as caught:
        store.list()
    assert "s3cret" not in str(caught.value) and "s3cret" not in repr(store)
    store.close()
