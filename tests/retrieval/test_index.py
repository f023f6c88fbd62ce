"""``build_index``: a folder of documents into an FTS5 file, rebuilding only what changed, reporting bad input."""

from __future__ import annotations

import os
import sqlite3
import tracemalloc
from contextlib import closing
from pathlib import Path

import pytest

from llm_fsm.errors import RetrievalIndexError
from llm_fsm.retrieval import _index
from llm_fsm.retrieval._index import build_index


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "refunds.md").write_text("# Refunds\nRefunds within thirty days.\n", encoding="utf-8")
    (folder / "shipping.txt").write_text("Shipping takes five days.\n", encoding="utf-8")
    return folder


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the index build opened for their content."""
    seen: list[str] = []
    real = _index._read_capped

    def counting(path: Path, cap: int) -> bytes | None:
        seen.append(path.name)
        return real(path, cap)

    monkeypatch.setattr(_index, "_read_capped", counting)
    return seen


def _ids(index: Path) -> dict[str, str]:
    with sqlite3.connect(index) as db:
        return {row[0]: row[1] for row in db.execute("SELECT id, path FROM chunks")}


def test_a_first_build_indexes_every_file(docs: Path, tmp_path: Path) -> None:
    report = build_index(docs, tmp_path / "i.db")
    assert sorted(report.added) == ["refunds.md", "shipping.txt"]
    assert sorted(_ids(tmp_path / "i.db").values()) == ["refunds.md", "shipping.txt"]


def test_an_unchanged_file_is_not_read_again(docs: Path, tmp_path: Path, reads: list[str]) -> None:
    build_index(docs, tmp_path / "i.db")
    reads.clear()
    report = build_index(docs, tmp_path / "i.db")
    assert reads == []
    assert sorted(report.unchanged) == ["refunds.md", "shipping.txt"]


def test_a_changed_file_is_replaced(docs: Path, tmp_path: Path, reads: list[str]) -> None:
    build_index(docs, tmp_path / "i.db")
    reads.clear()
    (docs / "shipping.txt").write_text("Shipping takes two weeks now.\n", encoding="utf-8")
    report = build_index(docs, tmp_path / "i.db")
    assert reads == ["shipping.txt"] and report.updated == ["shipping.txt"]
    with sqlite3.connect(tmp_path / "i.db") as db:
        texts = [row[0] for row in db.execute("SELECT text FROM chunks WHERE path = 'shipping.txt'")]
    assert texts == ["Shipping takes two weeks now."]


def test_a_touched_file_with_the_same_content_keeps_its_chunks(docs: Path, tmp_path: Path) -> None:
    build_index(docs, tmp_path / "i.db")
    before = _ids(tmp_path / "i.db")
    os.utime(docs / "refunds.md", ns=(1, 1))
    report = build_index(docs, tmp_path / "i.db")
    assert "refunds.md" in report.unchanged and _ids(tmp_path / "i.db") == before


def test_a_deleted_file_is_removed(docs: Path, tmp_path: Path) -> None:
    build_index(docs, tmp_path / "i.db")
    (docs / "shipping.txt").unlink()
    report = build_index(docs, tmp_path / "i.db")
    assert report.removed == ["shipping.txt"]
    assert sorted(_ids(tmp_path / "i.db").values()) == ["refunds.md"]


def test_snippet_ids_are_stable_across_rebuilds_from_scratch(docs: Path, tmp_path: Path) -> None:
    build_index(docs, tmp_path / "a.db")
    build_index(docs, tmp_path / "b.db")
    assert _ids(tmp_path / "a.db") == _ids(tmp_path / "b.db")


def test_files_of_other_kinds_are_not_indexed(docs: Path, tmp_path: Path) -> None:
    (docs / "logo.png").write_bytes(b"\x89PNG\r\n")
    report = build_index(docs, tmp_path / "i.db")
    assert "logo.png" not in report.added


def test_a_file_that_is_not_utf8_is_indexed_with_replacement_and_reported(docs: Path, tmp_path: Path) -> None:
    (docs / "latin.txt").write_bytes("Caf\xe9 opens at nine.".encode("latin-1"))
    report = build_index(docs, tmp_path / "i.db")
    assert "latin.txt" in report.added
    assert [p.path for p in report.problems] == ["latin.txt"] and "UTF-8" in report.problems[0].reason
    with sqlite3.connect(tmp_path / "i.db") as db:
        (text,) = db.execute("SELECT text FROM chunks WHERE path = 'latin.txt'").fetchone()
    assert text == "Caf\ufffd opens at nine."


def test_a_file_over_the_size_cap_is_skipped_and_reported_without_being_read_whole(docs: Path, tmp_path: Path) -> None:
    with (docs / "huge.txt").open("wb") as sparse:  # 500 MB on paper, no disk space: reading it whole would show
        sparse.truncate(500 * 1024 * 1024)
    tracemalloc.start()
    try:
        report = build_index(docs, tmp_path / "i.db")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "huge.txt" not in report.added
    assert [p.path for p in report.problems] == ["huge.txt"] and "over the cap" in report.problems[0].reason
    assert peak < 20 * 1024 * 1024


def test_the_size_cap_holds_for_a_file_that_grew_after_it_was_measured(tmp_path: Path) -> None:
    path = tmp_path / "growing.txt"
    path.write_bytes(b"x" * 5000)
    assert _index._read_capped(path, 1000) is None


def test_an_unreadable_file_is_skipped_and_reported(
    docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _index._read_capped

    def failing(path: Path, cap: int) -> bytes | None:
        if path.name == "shipping.txt":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, cap)

    monkeypatch.setattr(_index, "_read_capped", failing)
    report = build_index(docs, tmp_path / "i.db")
    assert report.added == ["refunds.md"]
    assert [p.path for p in report.problems] == ["shipping.txt"] and "Permission denied" in report.problems[0].reason


def test_a_file_that_is_not_a_regular_file_is_skipped_and_reported_without_being_opened(
    docs: Path, tmp_path: Path
) -> None:
    os.mkfifo(docs / "pipe.txt")  # opening a FIFO would wait for a writer forever
    report = build_index(docs, tmp_path / "i.db")
    assert [p.path for p in report.problems] == ["pipe.txt"] and "not a regular file" in report.problems[0].reason


def test_a_file_name_that_is_not_utf8_is_skipped_and_reported(docs: Path, tmp_path: Path) -> None:
    (docs / os.fsdecode(b"caf\xe9.txt")).write_text("Coffee.\n", encoding="utf-8")
    report = build_index(docs, tmp_path / "i.db")
    assert sorted(report.added) == ["refunds.md", "shipping.txt"]
    assert [p.path for p in report.problems] == ["caf\ufffd.txt"] and "name" in report.problems[0].reason


def test_an_index_of_another_format_is_refused_not_overwritten(docs: Path, tmp_path: Path) -> None:
    build_index(docs, tmp_path / "i.db")
    with sqlite3.connect(tmp_path / "i.db") as db:
        db.execute("UPDATE meta SET value = 'llm-fsm-fts-0' WHERE key = 'format'")
    with pytest.raises(RetrievalIndexError, match="llm-fsm-fts-0"):
        build_index(docs, tmp_path / "i.db")


def _build_token(index: Path) -> str | None:
    with closing(sqlite3.connect(index)) as db:
        row = db.execute("SELECT value FROM meta WHERE key = 'build'").fetchone()
    return None if row is None else str(row[0])


def test_a_build_that_changes_the_index_gives_it_a_new_build_token(docs: Path, tmp_path: Path) -> None:
    build_index(docs, tmp_path / "i.db")
    first = _build_token(tmp_path / "i.db")
    (docs / "shipping.txt").unlink()
    build_index(docs, tmp_path / "i.db")
    assert first is not None
    assert _build_token(tmp_path / "i.db") not in (None, first)


def test_a_build_that_changes_nothing_keeps_the_build_token(docs: Path, tmp_path: Path) -> None:
    build_index(docs, tmp_path / "i.db")
    first = _build_token(tmp_path / "i.db")
    build_index(docs, tmp_path / "i.db")
    assert _build_token(tmp_path / "i.db") == first
