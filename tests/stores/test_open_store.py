"""open_store: one URL picks the store; anything it cannot honour is a StoreError that says what to write."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fsm.errors import StoreError
from llm_fsm.stores import FileStore, MemoryStore, SQLiteStore, open_store, redact_url


def test_memory_url_opens_a_memory_store() -> None:
    assert isinstance(open_store("memory://"), MemoryStore)


def test_sqlite_url_with_three_slashes_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLAlchemy's convention, which every example in the docs follows: `sqlite:///conversations.db` once
    # created /conversations.db (issue 21)
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite:///conversations.db")
    assert isinstance(store, SQLiteStore) and store.path == "conversations.db"
    assert (tmp_path / "conversations.db").exists()
    store.close()


def test_sqlite_url_with_four_slashes_is_an_absolute_path(tmp_path: Path) -> None:
    url = "sqlite:////" + str(tmp_path).lstrip("/") + "/x.db"
    store = open_store(url)
    assert isinstance(store, SQLiteStore) and store.path == f"{tmp_path}/x.db"
    store.close()


def test_sqlite_url_with_two_slashes_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_store("sqlite://rel.db")
    assert isinstance(store, SQLiteStore) and store.path == "rel.db"
    assert (tmp_path / "rel.db").exists()
    store.close()


def test_sqlite_url_without_a_path_is_the_default_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_FSM_HOME", str(tmp_path / "home"))
    store = open_store("sqlite://")
    assert isinstance(store, SQLiteStore) and Path(store.path) == tmp_path / "home" / "conversations.db"
    store.close()


def test_sqlite_memory_url_stays_in_memory() -> None:
    store = open_store("sqlite:///:memory:")
    assert isinstance(store, SQLiteStore) and store.path == ":memory:"
    store.close()


def test_a_missing_directory_is_a_store_error_naming_it_and_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(StoreError, match=f"directory {missing} does not exist"):
        open_store(f"sqlite:///{missing}/conversations.db")
    assert not missing.exists()


def test_a_missing_relative_directory_is_not_created_either(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="directory data does not exist"):
        open_store("sqlite:///data/conversations.db")
    assert not (tmp_path / "data").exists()


def test_the_default_databases_directory_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the CLI's own location, where a first `llm-fsm chat` must just work
    monkeypatch.setenv("LLM_FSM_HOME", str(tmp_path / "new" / "home"))
    store = open_store()
    assert (tmp_path / "new" / "home" / "conversations.db").exists()
    store.close()


def test_file_url_with_three_slashes_is_an_absolute_directory(tmp_path: Path) -> None:
    # a file URL (RFC 8089): three slashes are an empty host and an absolute path, unlike sqlite://
    store = open_store(f"file://{tmp_path}/d")
    assert isinstance(store, FileStore) and store.root == tmp_path / "d"


def test_sqlite_url_expands_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    store = open_store("sqlite:///~/conv.db")
    assert store.path == f"{tmp_path}/conv.db"  # type: ignore[attr-defined]
    store.close()


def test_url_options_are_read_from_the_query_string(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/x.db?synchronous=normal&timeout=2.5&max_record_bytes=1000")
    assert (store._synchronous, store._timeout, store._limits.max_record_bytes) == ("NORMAL", 2.5, 1000)  # type: ignore[attr-defined]
    store.close()


def test_keyword_options_win_over_the_query_string(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/d?archive_part_size=7", archive_part_size=9)
    assert isinstance(store, FileStore) and store._part_size == 9


def test_an_opened_store_is_returned_as_it_is() -> None:
    store = MemoryStore()
    assert open_store(store) is store


def test_an_unknown_scheme_names_the_schemes_that_exist() -> None:
    with pytest.raises(StoreError, match=r"unknown store scheme 'mongodb'.*sqlite:///path\.db"):
        open_store("mongodb://localhost/x")


def test_a_string_that_is_not_a_url_is_refused() -> None:
    with pytest.raises(StoreError, match="not a store URL"):
        open_store("conversations.db")


def test_an_option_the_store_does_not_take_is_refused() -> None:
    with pytest.raises(StoreError, match="memory:// stores take"):
        open_store("memory://", ttl_seconds=5)


def test_an_option_value_that_does_not_parse_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="archive_part_size"):
        open_store(f"file://{tmp_path}/d?archive_part_size=many")


def test_a_file_url_without_a_directory_is_refused() -> None:
    with pytest.raises(StoreError, match="no directory"):
        open_store("file://")


def test_something_that_is_neither_url_nor_store_is_refused() -> None:
    with pytest.raises(StoreError, match="expected a store URL"):
        open_store(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:hunter2@localhost:6379/0", "redis://:***@localhost:6379/0"),
        ("postgresql://app:hunter2@db/conv?sslmode=require", "postgresql://app:***@db/conv?sslmode=require"),
        ("postgresql://db/conv?password=hunter2&sslmode=require", "postgresql://db/conv?password=***&sslmode=require"),
        ("sqlite:///conversations.db", "sqlite:///conversations.db"),
        ("redis://app@localhost/0", "redis://app@localhost/0"),
    ],
)
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown
