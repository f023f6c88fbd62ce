"""``build_postgres_index``: a folder of documents into PostgreSQL tables, built as the SQLite index is (the same
walk, change detection, report and snippet ids), rebuilding only what changed."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from stores.postgres_server import free_port

from llm_fsm.errors import RetrievalError, RetrievalIndexError
from llm_fsm.retrieval import _index
from llm_fsm.retrieval._index import build_index
from llm_fsm.retrieval._pg_index import build_postgres_index


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "refunds.md").write_text("# Refunds\nRefunds within thirty days.\n\n## Exceptions\nSale items.\n")
    (folder / "shipping.txt").write_text("Shipping takes five days.\n", encoding="utf-8")
    return folder


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the files the build opened for their content."""
    seen: list[str] = []
    real = _index._read_capped

    def counting(path: Path, cap: int) -> bytes | None:
        seen.append(path.name)
        return real(path, cap)

    monkeypatch.setattr(_index, "_read_capped", counting)
    return seen


def _rows(url: str, table: str) -> list[tuple[str, str, str, str]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return sorted(conn.execute(f"SELECT id, path, heading, text FROM {table}").fetchall())


def test_a_first_build_indexes_every_file(docs: Path, pg_url: str, pg_table: str) -> None:
    report = build_postgres_index(docs, pg_url, table=pg_table)
    assert sorted(report.added) == ["refunds.md", "shipping.txt"]
    assert sorted({path for _, path, _, _ in _rows(pg_url, pg_table)}) == ["refunds.md", "shipping.txt"]
    assert report.chunks == len(_rows(pg_url, pg_table)) == 3


def test_a_rebuild_reads_only_the_files_that_changed(docs: Path, pg_url: str, pg_table: str, reads: list[str]) -> None:
    build_postgres_index(docs, pg_url, table=pg_table)
    reads.clear()
    (docs / "shipping.txt").write_text("Shipping takes two weeks.\n", encoding="utf-8")
    report = build_postgres_index(docs, pg_url, table=pg_table)
    assert reads == ["shipping.txt"]
    assert (report.updated, report.unchanged) == (["shipping.txt"], ["refunds.md"])
    assert "two weeks" in " ".join(text for _, path, _, text in _rows(pg_url, pg_table) if path == "shipping.txt")


def test_a_deleted_file_loses_its_chunks(docs: Path, pg_url: str, pg_table: str) -> None:
    build_postgres_index(docs, pg_url, table=pg_table)
    (docs / "refunds.md").unlink()
    report = build_postgres_index(docs, pg_url, table=pg_table)
    assert report.removed == ["refunds.md"]
    assert {path for _, path, _, _ in _rows(pg_url, pg_table)} == {"shipping.txt"}


def test_snippet_ids_and_report_are_those_of_the_sqlite_index(
    docs: Path, pg_url: str, pg_table: str, tmp_path: Path
) -> None:
    (docs / "latin1.txt").write_bytes("caf\xe9 menu\n".encode("latin-1"))
    (docs / "big.md").write_text("# Big\n" + "word " * 100, encoding="utf-8")
    in_postgres = build_postgres_index(docs, pg_url, table=pg_table, max_bytes=200)
    in_sqlite = build_index(docs, tmp_path / "i.db", max_bytes=200)
    assert in_postgres == in_sqlite
    assert [problem.path for problem in in_postgres.problems] == ["big.md", "latin1.txt"]
    with sqlite3.connect(tmp_path / "i.db") as db:
        sqlite_rows = sorted(db.execute("SELECT id, path, heading, text FROM chunks").fetchall())
    assert _rows(pg_url, pg_table) == sqlite_rows


def test_a_document_holding_nul_characters_is_indexed(docs: Path, pg_url: str, pg_table: str) -> None:
    (docs / "nul.txt").write_text("before\x00after\n", encoding="utf-8")
    report = build_postgres_index(docs, pg_url, table=pg_table)
    assert "nul.txt" in report.added
    assert [text for _, path, _, text in _rows(pg_url, pg_table) if path == "nul.txt"] == ["before\ufffdafter"]


def test_a_table_that_is_not_an_index_is_refused_not_overwritten(docs: Path, pg_url: str, pg_table: str) -> None:
    import psycopg

    with psycopg.connect(pg_url) as conn:
        conn.execute(f"CREATE TABLE {pg_table} (customer text)")
    with pytest.raises(RetrievalIndexError, match="not an index"):
        build_postgres_index(docs, pg_url, table=pg_table)
    with psycopg.connect(pg_url) as conn:
        columns = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s", (pg_table,)
        ).fetchall()
    assert columns == [("customer",)]


def test_an_index_of_another_language_is_refused(docs: Path, pg_url: str, pg_table: str) -> None:
    build_postgres_index(docs, pg_url, table=pg_table, language="english")
    with pytest.raises(RetrievalIndexError, match="english"):
        build_postgres_index(docs, pg_url, table=pg_table, language="simple")


def test_an_unknown_language_is_a_typed_error(docs: Path, pg_url: str, pg_table: str) -> None:
    with pytest.raises(RetrievalIndexError, match="klingon"):
        build_postgres_index(docs, pg_url, table=pg_table, language="klingon")


@pytest.mark.parametrize("table", ["Docs", "docs; DROP TABLE x", "a.b.c", "1docs", ""])
def test_a_table_name_that_is_not_a_plain_sql_name_is_refused(docs: Path, table: str) -> None:
    with pytest.raises(RetrievalIndexError, match="table"):
        build_postgres_index(docs, "postgresql://127.0.0.1:1/x", table=table)


def test_a_table_in_a_schema_of_its_own(docs: Path, pg_url: str, pg_table: str) -> None:
    import psycopg

    with psycopg.connect(pg_url) as conn:
        conn.execute(f"CREATE SCHEMA {pg_table}")
    report = build_postgres_index(docs, pg_url, table=f"{pg_table}.kb")
    assert len(_rows(pg_url, f"{pg_table}.kb")) == report.chunks == 3


def test_a_database_that_is_down_is_a_typed_error(docs: Path) -> None:
    url = f"postgresql://nobody:secret@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(RetrievalError, match="unavailable") as raised:
        build_postgres_index(docs, url)
    assert "secret" not in str(raised.value)


def test_without_psycopg_it_is_a_typed_error_naming_the_extra(docs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(RetrievalError, match=r"\[postgres\]"):
        build_postgres_index(docs, "postgresql://127.0.0.1/x")


def test_the_retrievers_load_without_importing_psycopg_or_numpy() -> None:
    code = (
        "import sys\n"
        "from llm_fsm.retrieval import EmbeddingsRetriever, PostgresRetriever, build_postgres_index\n"
        "assert not {'psycopg', 'numpy'} & set(sys.modules), sorted({'psycopg', 'numpy'} & set(sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
