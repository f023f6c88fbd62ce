"""``llm-fsm index DOCS/ --out postgresql://...``: the PostgreSQL index, built and reported as the SQLite one is."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result
from stores.postgres_server import free_port

from llm_fsm.cli._app import EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE, main
from llm_fsm.retrieval import PostgresRetriever


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert "Traceback" not in result.output
    return result


def test_index_builds_a_postgres_table_then_says_nothing_changed(tmp_path: Path, pg_url: str, pg_table: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Returns\nReturns are free.\n", encoding="utf-8")
    first = invoke("index", str(tmp_path / "docs"), "--out", pg_url, "--table", pg_table)
    assert first.exit_code == EXIT_CLEAN and "1 added" in first.output
    again = invoke("index", str(tmp_path / "docs"), "--out", pg_url, "--table", pg_table)
    assert again.exit_code == EXIT_CLEAN and "1 unchanged" in again.output
    assert PostgresRetriever(pg_url, table=pg_table).retrieve("returns", k=1)[0].source == "a.md > Returns"


def test_index_names_a_skipped_file_and_exits_1(tmp_path: Path, pg_url: str, pg_table: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "big.txt").write_text("x" * 100, encoding="utf-8")
    result = invoke("index", str(tmp_path / "docs"), "--out", pg_url, "--table", pg_table, "--max-bytes", "10")
    assert result.exit_code == EXIT_FINDINGS
    assert "big.txt: over the cap of 10 bytes" in result.output


def test_index_into_a_database_that_is_down_exits_2_without_showing_the_password(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    url = f"postgresql://nobody:secret@127.0.0.1:{free_port()}/postgres"
    result = invoke("index", str(tmp_path / "docs"), "--out", url)
    assert result.exit_code == EXIT_UNREADABLE and "unavailable" in result.output
    assert "secret" not in result.output


def test_postgres_options_with_an_index_file_are_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    result = invoke("index", str(tmp_path / "docs"), "--out", str(tmp_path / "i.db"), "--table", "kb")
    assert result.exit_code == EXIT_UNREADABLE and "postgresql://" in result.output
