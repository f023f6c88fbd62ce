"""``llm-fsm index DOCS/ --out index.db``: says what it did and which files it could not index (exit codes:
tests/test_cli_exit_codes.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from click.testing import CliRunner, Result

from llm_fsm.cli._app import EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE, main


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert "Traceback" not in result.output
    return result


def test_index_builds_then_says_nothing_changed(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\nText.\n", encoding="utf-8")
    first = invoke("index", str(tmp_path / "docs"), "--out", str(tmp_path / "i.db"))
    assert first.exit_code == EXIT_CLEAN and "1 added" in first.output
    again = invoke("index", str(tmp_path / "docs"), "--out", str(tmp_path / "i.db"))
    assert again.exit_code == EXIT_CLEAN and "1 unchanged" in again.output


def test_index_names_a_skipped_file_and_why(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "big.txt").write_text("x" * 100, encoding="utf-8")
    result = invoke("index", str(tmp_path / "docs"), "--out", str(tmp_path / "i.db"), "--max-bytes", "10")
    assert result.exit_code == EXIT_FINDINGS
    assert "big.txt: over the cap of 10 bytes" in result.output


def test_index_refuses_an_out_file_that_is_another_database(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "conversations.db") as db:
        db.execute("CREATE TABLE conversations (id TEXT)")
    (tmp_path / "docs").mkdir()
    result = invoke("index", str(tmp_path / "docs"), "--out", str(tmp_path / "conversations.db"))
    assert result.exit_code == EXIT_UNREADABLE and "not an index" in result.output
