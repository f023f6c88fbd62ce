"""``FTSRetriever(common_terms=...)``: words found in most chunks ("the", "is", "how") are left out of the search,
so they neither decide the ranking nor make every query rank most of a large index.

Each corpus is one chunk per file: 300 chunks, so a word is common (default: in more than 5 % of the chunks and
in more than 50 of them) when it is in 60. A long chunk that says "refund" once competes with a short chunk that
repeats the common word: searching every word, the short one wins.
"""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from llm_fsm.retrieval import FTSRetriever
from llm_fsm.retrieval._index import build_index

#: a chunk that says "refund" once among 150 other words: it only wins when "refund" alone is searched
REFUND = "Refund policy. " + " ".join(f"clause{n}" for n in range(150))


def _index(tmp_path: Path, chunks: list[str], size: int = 300) -> Path:
    """An index of ``chunks`` filled up to ``size`` chunks with pages of no query word."""
    docs = tmp_path / "docs"
    docs.mkdir()
    texts = chunks + [f"Page {n}." for n in range(size - len(chunks))]
    for n, text in enumerate(texts):
        (docs / f"c{n:03}.txt").write_text(text + "\n", encoding="utf-8")
    build_index(docs, tmp_path / "index.db")
    return tmp_path / "index.db"


def _common(word: str, chunks: int = 60) -> list[str]:
    """``word`` in ``chunks`` chunks, one of them saying little else."""
    return [f"{word} {word} {word} {word} {word}."] + [f"{word} page {n}." for n in range(chunks - 1)]


def test_a_common_word_no_longer_decides_the_ranking(tmp_path: Path) -> None:
    index = _index(tmp_path, [*_common("The"), REFUND])
    (first,) = FTSRetriever(index).retrieve("the refund", k=1)
    assert first.text.startswith("Refund policy.")


def test_a_query_of_only_common_words_searches_the_rarest_of_them(tmp_path: Path) -> None:
    index = _index(tmp_path, [*_common("The", 80), *_common("seats", 55)])
    snippets = FTSRetriever(index).retrieve("the seats", k=3)
    assert len(snippets) == 3
    assert all(re.search(r"\bseats\b", s.text) for s in snippets)


@pytest.mark.parametrize(("asked", "written"), [("running", "runs"), ("does", "does"), ("was", "was")])
def test_a_common_word_is_counted_in_its_stemmed_form(tmp_path: Path, asked: str, written: str) -> None:
    index = _index(tmp_path, [*_common(written), REFUND])
    (first,) = FTSRetriever(index).retrieve(f"{asked} refund", k=1)
    assert first.text.startswith("Refund policy.")


@pytest.mark.parametrize(("asked", "written"), [("running", "runs"), ("does", "does"), ("was", "was")])
def test_a_rare_word_is_counted_in_its_stemmed_form(tmp_path: Path, asked: str, written: str) -> None:
    rare = f"Parcel {written} late. " + " ".join(f"clause{n}" for n in range(150))
    index = _index(tmp_path, [*_common("The"), rare])
    (first,) = FTSRetriever(index).retrieve(f"the {asked}", k=1)
    assert first.text.startswith("Parcel")


@pytest.mark.parametrize("off", [None, 1.0])
def test_with_the_cut_off_off_every_word_is_searched(tmp_path: Path, off: float | None) -> None:
    index = _index(tmp_path, [*_common("The"), REFUND])
    (first,) = FTSRetriever(index, common_terms=off).retrieve("the refund", k=1)
    assert first.text == "The The The The The."


def test_a_small_index_leaves_no_word_out(tmp_path: Path) -> None:
    index = _index(tmp_path, [*_common("The", 30), REFUND], size=45)
    every_word = FTSRetriever(index, common_terms=None).retrieve("the refund", k=3)
    assert FTSRetriever(index).retrieve("the refund", k=3) == every_word
    assert len(every_word) == 3


def test_a_rebuilt_index_is_searched_with_its_own_counts(tmp_path: Path) -> None:
    index = _index(tmp_path, [*_common("The"), REFUND])
    retriever = FTSRetriever(index)
    assert retriever.retrieve("the refund", k=1)[0].text.startswith("Refund policy.")
    for n in range(1, 60):  # "the" is left in one chunk: a rare word, searched
        (tmp_path / "docs" / f"c{n:03}.txt").unlink()
    build_index(tmp_path / "docs", index)
    assert retriever.retrieve("the refund", k=1)[0].text == "The The The The The."


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5])
def test_a_cut_off_outside_a_share_is_refused(tmp_path: Path, share: float) -> None:
    index = _index(tmp_path, [REFUND], size=3)
    with pytest.raises(ValueError, match="common_terms"):
        FTSRetriever(index, common_terms=share)


def test_an_index_without_a_build_token_is_counted_anew_on_every_query(tmp_path: Path) -> None:
    """An index built before build tokens existed: nothing tells one build from the next, so nothing is kept."""
    index = _index(tmp_path, [*_common("The"), REFUND])
    _drop_build_token(index)
    retriever = FTSRetriever(index)
    assert retriever.retrieve("the refund", k=1)[0].text.startswith("Refund policy.")
    for n in range(1, 60):
        (tmp_path / "docs" / f"c{n:03}.txt").unlink()
    build_index(tmp_path / "docs", index)
    _drop_build_token(index)
    assert retriever.retrieve("the refund", k=1)[0].text == "The The The The The."


def _drop_build_token(index: Path) -> None:
    with closing(sqlite3.connect(index)) as db, db:
        db.execute("DELETE FROM meta WHERE key = 'build'")
