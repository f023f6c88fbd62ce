"""The embeddings retriever: vectors from the application's own embedding function (the package never loads or
downloads a model), kept in a SQLite file built like the full-text index, searched by cosine similarity (numpy)."""

from __future__ import annotations

import hashlib
import re
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from llm_fsm.errors import RetrievalError, RetrievalIndexError
from llm_fsm.retrieval import EmbeddingsRetriever, FTSRetriever, Retriever, build_embeddings_index, build_index

DIMS = 64


class BagOfWords:
    """A stand-in embedding model: each word adds one to a hashed dimension, so texts sharing words are close.
    It remembers every text it embedded."""

    def __init__(self, dims: int = DIMS) -> None:
        self.dims = dims
        self.seen: list[str] = []

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen.extend(texts)
        vectors = []
        for text in texts:
            vector = [0.0] * self.dims
            for word in re.findall(r"\w+", text.lower()):
                vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dims] += 1.0
            vectors.append(vector)
        return vectors


@pytest.fixture
def embed() -> BagOfWords:
    return BagOfWords()


@pytest.fixture
def index(docs: Path, tmp_path: Path, embed: BagOfWords) -> Path:
    build_embeddings_index(docs, tmp_path / "e.db", embed=embed, model="bag-of-words")
    return tmp_path / "e.db"


def test_it_is_a_retriever(index: Path, embed: BagOfWords) -> None:
    assert isinstance(EmbeddingsRetriever(index, embed=embed, model="bag-of-words"), Retriever)


def test_the_closest_chunk_comes_first(index: Path, embed: BagOfWords) -> None:
    snippets = EmbeddingsRetriever(index, embed=embed, model="bag-of-words").retrieve("express shipping", k=3)
    assert snippets[0].source == "shipping.md > Shipping"
    assert [s.score for s in snippets] == sorted((s.score for s in snippets), reverse=True)
    assert 0 < snippets[0].score <= 1


def test_at_most_k_snippets_come_back(index: Path, embed: BagOfWords) -> None:
    assert len(EmbeddingsRetriever(index, embed=embed, model="bag-of-words").retrieve("refunds", k=2)) == 2


def test_an_empty_query_gives_no_snippets_and_embeds_nothing(index: Path, embed: BagOfWords) -> None:
    retriever = EmbeddingsRetriever(index, embed=embed, model="bag-of-words")
    embed.seen.clear()
    assert retriever.retrieve("  \n", k=3) == []
    assert embed.seen == []


def test_snippet_ids_are_those_of_the_full_text_index(
    index: Path, embed: BagOfWords, docs: Path, tmp_path: Path
) -> None:
    build_index(docs, tmp_path / "i.db")
    by_fts = {(s.id, s.source, s.text) for s in FTSRetriever(tmp_path / "i.db").retrieve("refunds sale desk", k=10)}
    by_vectors = EmbeddingsRetriever(index, embed=embed, model="bag-of-words").retrieve("refunds sale desk", k=10)
    assert {(s.id, s.source, s.text) for s in by_vectors} >= by_fts


def test_a_rebuild_embeds_only_the_files_that_changed(index: Path, embed: BagOfWords, docs: Path) -> None:
    embed.seen.clear()
    (docs / "contact.txt").write_text("Call the hotline.\n", encoding="utf-8")
    report = build_embeddings_index(docs, index, embed=embed, model="bag-of-words")
    assert report.updated == ["contact.txt"]
    assert embed.seen == ["Call the hotline."]


def test_a_running_retriever_sees_a_rebuilt_index(index: Path, embed: BagOfWords, docs: Path) -> None:
    retriever = EmbeddingsRetriever(index, embed=embed, model="bag-of-words")
    (docs / "shipping.md").unlink()
    build_embeddings_index(docs, index, embed=embed, model="bag-of-words")
    assert all(not s.source.startswith("shipping.md") for s in retriever.retrieve("express shipping", k=10))


def test_a_running_retriever_sees_an_index_deleted_and_built_again_from_scratch(
    index: Path, embed: BagOfWords, docs: Path, tmp_path: Path
) -> None:
    retriever = EmbeddingsRetriever(index, embed=embed, model="bag-of-words")
    assert retriever.retrieve("express shipping", k=1)  # its vectors are loaded
    index.unlink()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "garden.md").write_text("# Garden\n\nWater the roses at dawn.\n", encoding="utf-8")
    build_embeddings_index(tmp_path / "other", index, embed=embed, model="bag-of-words")  # its first build again
    assert [s.source for s in retriever.retrieve("water the roses", k=5)] == ["garden.md > Garden"]


def test_an_index_of_another_model_is_refused(index: Path, embed: BagOfWords, docs: Path) -> None:
    with pytest.raises(RetrievalIndexError, match="bag-of-words"):
        EmbeddingsRetriever(index, embed=embed, model="other-model")
    with pytest.raises(RetrievalIndexError, match="bag-of-words"):
        build_embeddings_index(docs, index, embed=embed, model="other-model")


def test_a_full_text_index_is_not_an_embeddings_index(docs: Path, tmp_path: Path, embed: BagOfWords) -> None:
    build_index(docs, tmp_path / "i.db")
    with pytest.raises(RetrievalIndexError, match="format"):
        EmbeddingsRetriever(tmp_path / "i.db", embed=embed, model="bag-of-words")
    with pytest.raises(RetrievalIndexError, match="format"):
        build_embeddings_index(docs, tmp_path / "i.db", embed=embed, model="bag-of-words")
    with sqlite3.connect(tmp_path / "i.db") as db:
        assert {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} >= {"chunks"}
        assert "vectors" not in str(db.execute("SELECT sql FROM sqlite_master").fetchall())


def test_a_missing_index_is_a_typed_error(tmp_path: Path, embed: BagOfWords) -> None:
    with pytest.raises(RetrievalIndexError, match="build"):
        EmbeddingsRetriever(tmp_path / "missing.db", embed=embed, model="bag-of-words")


def test_an_embedding_function_that_fails_during_a_build_leaves_the_old_index(
    index: Path, embed: BagOfWords, docs: Path
) -> None:
    (docs / "contact.txt").write_text("Call the hotline.\n", encoding="utf-8")

    def broken(texts: Sequence[str]) -> list[list[float]]:
        raise ConnectionError("embedding service down")

    with pytest.raises(RetrievalIndexError, match="embedding service down"):
        build_embeddings_index(docs, index, embed=broken, model="bag-of-words")
    retriever = EmbeddingsRetriever(index, embed=embed, model="bag-of-words")
    assert "help desk" in retriever.retrieve("help desk", k=1)[0].text


def test_an_embedding_function_that_fails_on_a_query_is_a_retrieval_error(index: Path, embed: BagOfWords) -> None:
    retriever = EmbeddingsRetriever(index, embed=embed, model="bag-of-words")
    retriever.embed = lambda texts: (_ for _ in ()).throw(TimeoutError("embedding service timed out"))
    with pytest.raises(RetrievalError, match="timed out"):
        retriever.retrieve("refunds", k=1)


@pytest.mark.parametrize("vectors", [[[1.0, 2.0]], [], [[float("nan")] * DIMS], "not vectors"])
def test_vectors_of_the_wrong_shape_are_a_retrieval_error(index: Path, embed: BagOfWords, vectors: object) -> None:
    retriever = EmbeddingsRetriever(index, embed=embed, model="bag-of-words")
    retriever.embed = lambda texts: vectors
    with pytest.raises(RetrievalError, match="embedding"):
        retriever.retrieve("refunds", k=1)


def test_without_numpy_it_is_a_typed_error_naming_the_extra(
    index: Path, embed: BagOfWords, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(RetrievalError, match=r"\[embeddings\]"):
        EmbeddingsRetriever(index, embed=embed, model="bag-of-words")
