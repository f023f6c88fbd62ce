"""What the file store promises beyond the shared contract: layout, backups, recovery, archive parts."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import TurnRecord, Verdict
from llm_fsm.errors import (
    ConversationNotFoundError,
    StoreCorruptedError,
    StoreUnavailableError,
)
from llm_fsm.stores import FileStore, open_store
from llm_fsm.stores.base import Retention
from llm_fsm.stores.files import segment, unsegment

from .factories import plain_instance, rich_instance


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "conversations"


@pytest.fixture
def store(root: Path) -> FileStore:
    return FileStore(root, archive_part_size=3)


def _dir(root: Path, user: str = "alice", room: str = "room-1") -> Path:
    return root / user / room


def _saved_twice(store: FileStore) -> FSMInstance:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    instance.current_state = "second"
    store.save(instance, expected_version=1)
    return instance


def _load(store: FileStore, instance: FSMInstance) -> FSMInstance:
    return store.load(instance.conversation_id, user_id=instance.user_id, room_id=instance.room_id)


# --- layout -------------------------------------------------------------------------


def test_a_conversation_is_an_indented_json_file_under_user_and_room(store: FileStore, root: Path) -> None:
    instance = rich_instance()
    store.save(instance, expected_version=None)
    path = _dir(root) / f"{instance.conversation_id}.json"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("{\n  ")
    assert json.loads(text)["conversation_id"] == instance.conversation_id


def test_a_missing_user_and_room_are_written_as_underscore(store: FileStore, root: Path) -> None:
    instance = plain_instance(user_id=None, room_id=None)
    store.save(instance, expected_version=None)
    assert (root / "_" / "_" / f"{instance.conversation_id}.json").is_file()


def test_a_save_keeps_the_previous_record_as_backup_and_leaves_no_temp_file(store: FileStore, root: Path) -> None:
    instance = _saved_twice(store)
    directory = _dir(root)
    backup = json.loads((directory / f"{instance.conversation_id}.json.bak").read_text())
    assert (backup["version"], backup["current_state"]) == (1, "start")
    assert not [p for p in directory.iterdir() if ".tmp" in p.name]


def test_delete_removes_record_backup_archive_and_lock(store: FileStore, root: Path) -> None:
    instance = plain_instance()
    instance.archive_outbox = [{"user": f"m{i}"} for i in range(7)]
    store.save(instance, expected_version=None)
    store.save(instance, expected_version=1)
    assert store.delete(instance.conversation_id, user_id="alice", room_id="room-1")
    assert list(_dir(root).iterdir()) == []


def test_an_id_cannot_climb_out_of_the_store_directory(store: FileStore, root: Path) -> None:
    instance = plain_instance(user_id="..", room_id="../..", conversation_id="../../../etc/passwd")
    store.save(instance, expected_version=None)
    written = [p for p in root.parent.rglob("*") if p.is_file()]
    assert written and all(root in p.parents for p in written)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=20)), st.one_of(st.none(), st.text(max_size=20)))
def test_segments_are_distinct_for_distinct_ids_and_safe_as_file_names(a: str | None, b: str | None) -> None:
    sa, sb = segment(a), segment(b)
    assert (sa == sb) == (a == b)
    for s in (sa, sb):
        assert s and "/" not in s and "." not in s and "\0" not in s
    if a is not None:
        assert unsegment(sa) == a


def test_open_store_with_a_file_url_opens_the_directory(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/d?archive_part_size=7&fsync=false")
    assert isinstance(store, FileStore)
    assert store.root == tmp_path / "d"
    assert store._part_size == 7 and store._fsync is False


# --- recovery ---------------------------------------------------------------------------


def test_a_corrupt_record_falls_back_to_the_backup_with_a_warning(
    store: FileStore, root: Path, caplog: pytest.LogCaptureFixture
) -> None:
    instance = _saved_twice(store)
    (_dir(root) / f"{instance.conversation_id}.json").write_text('{"fsm_id": "booking", "current_st')
    with caplog.at_level(logging.WARNING, logger="llm_fsm.stores.files"):
        loaded = _load(store, instance)
    assert (loaded.version, loaded.current_state) == (1, "start")
    assert "backup" in caplog.text


def test_a_save_after_a_corrupt_record_keeps_the_good_backup_and_sets_the_bad_file_aside(
    store: FileStore, root: Path
) -> None:
    instance = _saved_twice(store)
    directory = _dir(root)
    (directory / f"{instance.conversation_id}.json").write_text("garbage")
    recovered = _load(store, instance)
    recovered.current_state = "recovered"
    store.save(recovered, expected_version=1)
    assert _load(store, instance).current_state == "recovered"
    assert json.loads((directory / f"{instance.conversation_id}.json.bak").read_text())["version"] == 1
    assert (directory / f"{instance.conversation_id}.json.corrupt").read_text() == "garbage"


def test_when_record_and_backup_are_corrupt_load_raises_and_writes_a_recovery_record(
    store: FileStore, root: Path
) -> None:
    instance = _saved_twice(store)
    directory = _dir(root)
    primary = directory / f"{instance.conversation_id}.json"
    backup = directory / f"{instance.conversation_id}.json.bak"
    primary.write_text("{not json")
    backup.write_text("")
    with pytest.raises(StoreCorruptedError):
        _load(store, instance)
    recovery = json.loads((directory / f"{instance.conversation_id}.recovery.json").read_text())
    assert recovery["conversation_id"] == instance.conversation_id
    assert recovery["primary"] == str(primary) and recovery["backup"] == str(backup)
    assert recovery["reason"] and recovery["lost_at"] > 0
    assert primary.read_text() == "{not json"  # evidence left in place


def test_list_skips_an_unrecoverable_conversation_and_shows_the_rest(store: FileStore, root: Path) -> None:
    broken = _saved_twice(store)
    healthy = plain_instance()
    store.save(healthy, expected_version=None)
    for suffix in (".json", ".json.bak"):
        (_dir(root) / f"{broken.conversation_id}{suffix}").write_text("x")
    assert [s.conversation_id for s in store.list(user_id="alice", room_id="room-1")] == [healthy.conversation_id]


def test_a_record_naming_another_owner_is_not_found(store: FileStore, root: Path) -> None:
    instance = plain_instance()
    store.save(instance, expected_version=None)
    path = _dir(root) / f"{instance.conversation_id}.json"
    data = json.loads(path.read_text())
    data["user_id"] = "mallory"
    path.write_text(json.dumps(data))
    with pytest.raises(ConversationNotFoundError):
        _load(store, instance)


def test_a_directory_that_cannot_be_created_makes_saves_unavailable(store: FileStore, root: Path) -> None:
    (root / "alice").mkdir(parents=True)
    (root / "alice" / "room-1").write_text("a file where the room directory should be")
    instance = plain_instance()
    with pytest.raises(StoreUnavailableError):
        store.save(instance, expected_version=None)
    assert instance.version == 0


# --- archive parts ------------------------------------------------------------------------


def _archive(store: FileStore, instance: FSMInstance, batches: list[int]) -> list[dict[str, str]]:
    sent: list[dict[str, str]] = []
    for i, size in enumerate(batches):
        batch = [{"user": f"m{len(sent) + k}"} for k in range(size)]
        sent += batch
        instance.archive_outbox = batch
        store.save(instance, expected_version=None if i == 0 else instance.version)
    return sent


def test_the_archive_rotates_into_linked_parts_and_loses_nothing(store: FileStore, root: Path) -> None:
    instance = plain_instance()
    sent = _archive(store, instance, [2, 2, 4, 0, 1])
    directory = _dir(root)
    parts = sorted(directory.glob(f"{instance.conversation_id}.archive.*.jsonl"))
    assert [p.name.split(".")[-2] for p in parts] == ["1", "2", "3"]
    headers = [json.loads(p.read_text().splitlines()[0]) for p in parts]
    assert [h["continued_from"] for h in headers] == [
        None,
        f"{instance.conversation_id}.archive.1.jsonl",
        f"{instance.conversation_id}.archive.2.jsonl",
    ]
    assert [h["first_seq"] for h in headers] == [1, 4, 7]
    assert all(len(p.read_text().splitlines()) <= 1 + 3 for p in parts)
    assert store.transcript(instance.conversation_id, user_id="alice", room_id="room-1") == sent


def test_archive_lines_of_a_save_that_crashed_before_commit_are_ignored_then_trimmed(
    store: FileStore, root: Path
) -> None:
    instance = plain_instance()
    sent = _archive(store, instance, [2])
    part = _dir(root) / f"{instance.conversation_id}.archive.1.jsonl"
    with part.open("a") as fh:  # what a save killed between archive append and rename leaves behind
        fh.write(json.dumps({"seq": 3, "version": 2, "message": {"user": "uncommitted"}}) + "\n")
        fh.write('{"seq": 4, "vers')
    assert store.transcript(instance.conversation_id, user_id="alice", room_id="room-1") == sent
    instance.archive_outbox = [{"user": "retried"}]
    store.save(instance, expected_version=1)
    assert store.transcript(instance.conversation_id, user_id="alice", room_id="room-1") == sent + [{"user": "retried"}]
    assert "uncommitted" not in part.read_text()


def test_an_empty_part_left_by_an_interrupted_rotation_is_removed(store: FileStore, root: Path) -> None:
    instance = plain_instance()
    sent = _archive(store, instance, [3])
    orphan = _dir(root) / f"{instance.conversation_id}.archive.2.jsonl"
    orphan.write_text('{"archive_of": "x", "part": 2, "first_seq": 4, "continued_from": null}\n')
    instance.archive_outbox = [{"user": "next"}]
    store.save(instance, expected_version=1)
    assert store.transcript(instance.conversation_id, user_id="alice", room_id="room-1") == sent + [{"user": "next"}]
    header = json.loads(orphan.read_text().splitlines()[0])
    assert header["archive_of"] == instance.conversation_id and header["first_seq"] == 4


# --- turn log ---------------------------------------------------------------------------------


def _with_turn(instance: FSMInstance, index: int) -> FSMInstance:
    instance.turns = [
        TurnRecord(
            index=index,
            user_message=f"u{index}",
            state_before="start",
            state_after="start",
            verdict=Verdict(kind="stay", target_state="start", reason="test"),
            reply=f"r{index}",
            started_at=0.0,
            finished_at=0.0,
        )
    ]
    return instance


def test_the_turn_log_is_one_json_lines_file_beside_the_record(store: FileStore, root: Path) -> None:
    instance = rich_instance(turns=3)
    store.save(instance, expected_version=None)
    lines = [
        json.loads(line) for line in (_dir(root) / f"{instance.conversation_id}.log.jsonl").read_text().splitlines()
    ]
    assert [(e.get("turn_index"), e.get("message_id")) for e in lines] == [
        (0, None),
        (1, None),
        (2, None),
        (None, "msg-0"),
        (None, "msg-1"),
        (None, "msg-2"),
    ]
    assert all(e["version"] == 1 for e in lines)
    assert "turns" not in json.loads((_dir(root) / f"{instance.conversation_id}.json").read_text())


def test_the_turn_log_is_compacted_past_twice_its_retention(store: FileStore, root: Path) -> None:
    instance = plain_instance()
    log = _dir(root) / f"{instance.conversation_id}.log.jsonl"
    keep = Retention(turn_records=3)
    for index in range(1, 8):
        store.save(_with_turn(instance, index), expected_version=instance.version or None, retention=keep)
        assert len(log.read_text().splitlines()) <= 6
    assert [t.index for t in _load(store, instance).turns] == [5, 6, 7]


def test_a_save_that_compacts_the_log_and_then_fails_leaves_every_kept_turn_readable(
    store: FileStore, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance = plain_instance()
    keep = Retention(turn_records=3)
    for index in range(1, 7):  # six lines: the next save compacts
        store.save(_with_turn(instance, index), expected_version=instance.version or None, retention=keep)

    def disk_full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(FileStore, "_keep_backup", disk_full)  # after the log is rewritten, before the rename
    with pytest.raises(StoreUnavailableError):
        store.save(_with_turn(instance, 7), expected_version=6, retention=keep)
    monkeypatch.undo()
    assert [t.index for t in _load(store, instance).turns] == [4, 5, 6]
    store.save(_with_turn(instance, 7), expected_version=6, retention=keep)
    assert [t.index for t in _load(store, instance).turns] == [5, 6, 7]
