"""``FTSRetriever``: the built-in Retriever over an index file, BM25-ranked, safe with any words a user types."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from llm_fsm.errors import RetrievalError, RetrievalIndexError
from llm_fsm.retrieval import FTSRetriever, Retriever, Snippet
from llm_fsm.retrieval._index import build_index


@pytest.fixture
def index(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "policies.md").write_text(
        "# Policies\n\n## Refunds\nRefunds are paid within thirty days of a refund request.\n\n"
        "## Shipping\nParcels ship in five days; refunds of shipping costs are not paid.\n",
        encoding="utf-8",
    )
    (docs / "team.txt").write_text("The support team answers from nine to five.\n", encoding="utf-8")
    build_index(docs, tmp_path / "index.db")
    return tmp_path / "index.db"


def test_it_is_a_retriever(index: Path) -> None:
    assert isinstance(FTSRetriever(index), Retriever)


def test_the_best_chunk_for_a_query_comes_first(index: Path) -> None:
    snippets = FTSRetriever(index).retrieve("how long do refunds take?", k=3)
    assert snippets[0].source == "policies.md > Policies > Refunds"
    assert "thirty days" in snippets[0].text
    assert [s.score for s in snippets] == sorted((s.score for s in snippets), reverse=True)


def test_at_most_k_snippets_come_back(index: Path) -> None:
    assert len(FTSRetriever(index).retrieve("refunds shipping team", k=1)) == 1


def test_a_query_matching_nothing_gives_no_snippets(index: Path) -> None:
    assert FTSRetriever(index).retrieve("zebra", k=3) == []


def test_snippet_ids_are_the_ids_the_index_stored(index: Path) -> None:
    (snippet,) = FTSRetriever(index).retrieve("support team", k=1)
    with sqlite3.connect(index) as db:
        (stored,) = db.execute("SELECT id FROM chunks WHERE path = 'team.txt'").fetchone()
    assert snippet == Snippet(id=stored, text=snippet.text, source="team.txt", score=snippet.score)


@pytest.mark.parametrize(
    "query",
    [
        '"refunds',
        "refund*",
        "refunds NEAR shipping",
        "-refunds",
        "NOT refunds",
        "refunds AND",
        "(refunds",
        "a:b",
        "^refunds",
        "refunds OR",
        "",
        "   ",
        "'; DROP TABLE chunks; --",
        "{refunds}",
        "+",
    ],
)
def test_query_syntax_in_the_users_words_never_raises(index: Path, query: str) -> None:
    snippets = FTSRetriever(index).retrieve(query, k=3)
    assert all(isinstance(s, Snippet) for s in snippets)


def test_operator_words_are_searched_as_words(index: Path) -> None:
    assert FTSRetriever(index).retrieve("NOT refunds", k=3) != []


def test_a_missing_index_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(RetrievalIndexError, match="no-such.db"):
        FTSRetriever(tmp_path / "no-such.db")


def test_a_file_that_is_not_an_index_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "x.db").write_bytes(b"")
    with pytest.raises(RetrievalIndexError, match="not an index"):
        FTSRetriever(tmp_path / "x.db")


def test_an_index_of_no_documents_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    build_index(tmp_path / "empty", tmp_path / "i.db")
    with pytest.raises(RetrievalIndexError, match="no documents"):
        FTSRetriever(tmp_path / "i.db")


def test_an_index_that_breaks_after_start_up_is_a_retrieval_error_the_state_can_handle(index: Path) -> None:
    retriever = FTSRetriever(index)
    index.write_bytes(b"not a database any more")
    with pytest.raises(RetrievalError, match="could not be searched"):
        retriever.retrieve("refunds", k=3)
