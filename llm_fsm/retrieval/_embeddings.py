"""The embeddings retriever (the ``embeddings`` extra): snippets by cosine similarity of vectors, for questions whose
words are not the documents' words ("can I send it back?" for a section on returns).

The package loads no model and downloads nothing: the application passes ``embed``, its own function from texts
to vectors (a local model's ``encode``, as sentence-transformers and model2vec models loaded from a path offer, or
a call to the embeddings service it already uses), and names the model with ``model``. Vectors of two models are
not comparable, so the index records the name and refuses another.

The index is a SQLite file built as the full-text index is (``_index.update_index``: the same walk, report,
incremental rebuild and snippet ids; only changed files are embedded again), each chunk's vector stored beside its
text as float32, normalised. The retriever keeps the vectors in one numpy matrix, so a query is one embedding call
and one matrix product (exact search: fine for the tens of thousands of chunks of a team's docs). Each build gives
the index a new random ``generation``; a query reads it, the matrix (reloaded when it changed) and the texts in one read
transaction, so a rebuilt index is seen at once and never half of it.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from llm_fsm.errors import RetrievalError, RetrievalIndexError
from llm_fsm.retrieval._index import (
    DEFAULT_MAX_BYTES,
    IndexedChunk,
    IndexReport,
    SQLiteTarget,
    build_sqlite_index,
    documents_folder,
)
from llm_fsm.retrieval._types import Snippet

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

#: the application's embedding function: texts in, one vector per text out (anything numpy reads as a 2-D array)
Embed = Callable[[list[str]], Any]

FORMAT = "llm-fsm-embeddings-1"

#: the most characters of a query embedded: a pasted page is cut, not sent whole to the embedding function
MAX_QUERY_CHARS = 4000

DEFAULT_BATCH = 64

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,"
    " sha256 TEXT NOT NULL, first_row INTEGER NOT NULL, last_row INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS chunks (rowid INTEGER PRIMARY KEY, id TEXT NOT NULL, path TEXT NOT NULL,"
    " heading TEXT NOT NULL, text TEXT NOT NULL, vector BLOB NOT NULL)",
)


def build_embeddings_index(
    docs: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    embed: Embed,
    model: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    batch: int = DEFAULT_BATCH,
) -> IndexReport:
    """Bring the embeddings index at ``out`` up to date with the documents under ``docs`` (created when missing),
    embedding the chunks of new and changed files with ``embed``, ``batch`` texts a call. A failing ``embed``
    stops the build with RetrievalIndexError and leaves the index as it was."""
    import_numpy()
    folder = documents_folder(docs)
    path = Path(out)
    return build_sqlite_index(
        folder, path, _SCHEMA, FORMAT, lambda db: _EmbeddingsTarget(db, path, embed, model, batch), max_bytes
    )


class _EmbeddingsTarget(SQLiteTarget):
    columns = (*SQLiteTarget.columns, "vector")

    def __init__(self, db: sqlite3.Connection, out: Path, embed: Embed, model: str, batch: int) -> None:
        super().__init__(db)
        self.out, self.embed, self.model, self.batch = out, embed, model, max(1, batch)
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        if meta.setdefault("model", model) != model:
            raise RetrievalIndexError(
                f"{out} holds vectors of model {meta['model']!r}, not {model!r}; delete it to rebuild"
            )
        self.dims = int(meta["dims"]) if "dims" in meta else None
        # random, never a counter: an index deleted and built again from scratch would count from 1 again, and a
        # running retriever would take the new file's vectors for the ones it loaded
        db.executemany(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            [("model", model), ("generation", secrets.token_hex(16))],
        )

    def values(self, chunks: list[IndexedChunk]) -> list[tuple[object, ...]]:
        vectors: list[bytes] = []
        for start in range(0, len(chunks), self.batch):
            part = chunks[start : start + self.batch]
            texts = [f"{c.heading}\n{c.text}" if c.heading else c.text for c in part]
            try:
                matrix = unit_rows(self.embed(texts), len(texts), self.dims)
            except Exception as exc:  # the application's function: any failure stops the build, reported
                raise RetrievalIndexError(
                    f"{self.out}: the embedding function failed on {part[0].path}: {type(exc).__name__}: {exc}"
                ) from exc
            if self.dims is None:
                self.dims = int(matrix.shape[1])
                self.db.execute("INSERT INTO meta (key, value) VALUES ('dims', ?)", (str(self.dims),))
            vectors.extend(row.tobytes() for row in matrix)
        return [(*row, vector) for row, vector in zip(super().values(chunks), vectors, strict=True)]


@dataclass(frozen=True)
class _Vectors:
    generation: str
    rowids: NDArray[np.int64]
    matrix: NDArray[np.float32]


class EmbeddingsRetriever:
    """A Retriever over the embeddings index at ``path``: the ``k`` chunks closest to the query (cosine similarity,
    the snippet's ``score``), best first. ``embed`` and ``model`` must be those the index was built with.

    Raises RetrievalIndexError at once when the index is missing, is not an embeddings index, is of another model or
    holds no documents; a query whose embedding fails or is not a vector of the index's size raises RetrievalError.
    """

    def __init__(self, path: str | os.PathLike[str], *, embed: Embed, model: str) -> None:
        import_numpy()
        self.path = Path(path)
        self.embed = embed
        self.model = model
        self._lock = threading.Lock()
        if not self.path.is_file():
            raise RetrievalIndexError(
                f"{self.path}: no such index; build it with llm_fsm.retrieval.build_embeddings_index"
            )
        try:
            with closing(self._connect()) as db:
                db.execute("BEGIN")  # the meta and the vectors of one build
                meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
                if meta.get("format") != FORMAT:
                    raise RetrievalIndexError(
                        f"{self.path} is not an index of format {FORMAT!r} (found {meta.get('format')!r})"
                    )
                if meta.get("model") != model:
                    raise RetrievalIndexError(
                        f"{self.path} holds vectors of model {meta.get('model')!r}, not {model!r}"
                    )
                self.dims = int(meta.get("dims", 0))
                self._vectors = self._load(db)
        except sqlite3.Error as exc:
            raise RetrievalIndexError(f"{self.path} is not an embeddings index: {exc}") from exc
        if not len(self._vectors.rowids):
            raise RetrievalIndexError(f"{self.path} holds no documents: was the build given the right folder?")

    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        import numpy as np

        text = query.strip()[:MAX_QUERY_CHARS]
        if not text or k <= 0:
            return []
        try:
            wanted = unit_rows(self.embed([text]), 1, self.dims)[0]
        except Exception as exc:  # the application's function, or what it returned
            raise RetrievalError(f"{self.path}: the embedding function failed: {type(exc).__name__}: {exc}") from exc
        try:
            with closing(self._connect()) as db:
                db.execute("BEGIN")  # one snapshot: the vectors and the texts are of the same build
                vectors = self._current(db)
                scores = vectors.matrix @ wanted
                best = np.argsort(-scores, kind="stable")[:k]
                rowids = [int(vectors.rowids[i]) for i in best]
                marks = ", ".join("?" * len(rowids))
                found = {
                    row[0]: row[1:]
                    for row in db.execute(
                        f"SELECT rowid, id, path, heading, text FROM chunks WHERE rowid IN ({marks})", rowids
                    )
                }
        except sqlite3.Error as exc:
            raise RetrievalError(f"{self.path}: the embeddings index could not be read: {exc}") from exc
        return [
            Snippet(id=id_, text=body, source=f"{path} > {heading}" if heading else path, score=float(scores[i]))
            for i, rowid in zip(best, rowids, strict=True)
            for id_, path, heading, body in [found[rowid]]
        ]

    def _current(self, db: sqlite3.Connection) -> _Vectors:
        """The loaded vectors, reloaded first when a build changed the index since."""
        (generation,) = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone() or ("",)
        with self._lock:
            if generation != self._vectors.generation:
                self._vectors = self._load(db)
            return self._vectors

    def _load(self, db: sqlite3.Connection) -> _Vectors:
        import numpy as np

        (generation,) = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone() or ("",)
        rows = db.execute("SELECT rowid, vector FROM chunks ORDER BY rowid").fetchall()
        rowids = np.array([row[0] for row in rows], dtype=np.int64)
        matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float32).reshape(len(rows), self.dims)
        return _Vectors(str(generation), rowids, matrix)

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{quote(str(self.path.resolve()))}?mode=ro", uri=True)

    def __repr__(self) -> str:
        return f"EmbeddingsRetriever({str(self.path)!r}, model={self.model!r})"


def unit_rows(vectors: object, count: int, dims: int | None) -> NDArray[np.float32]:
    """What ``embed`` returned as ``count`` rows of ``dims`` finite float32s, each of length 1 (cosine similarity is
    then a dot product); ValueError saying what was wrong otherwise."""
    import numpy as np

    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the embedding function did not return vectors: {exc}") from exc
    if matrix.ndim != 2 or matrix.shape[0] != count or not matrix.shape[1] or dims not in (None, matrix.shape[1]):
        raise ValueError(
            f"the embedding function returned an array of shape {matrix.shape}, not ({count}, {dims or 'n'})"
        )
    if not np.isfinite(matrix).all():
        raise ValueError("the embedding function returned a vector that is not finite (NaN or infinity)")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: NDArray[np.float32] = (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)
    return unit


def import_numpy() -> None:
    """numpy, imported only when an embeddings index is built or read: ``import llm_fsm`` never needs it."""
    try:
        import numpy  # noqa: F401
    except ImportError as exc:
        raise RetrievalError('the embeddings retriever needs numpy: pip install "llm_fsm[embeddings]"') from exc


__all__ = ["FORMAT", "MAX_QUERY_CHARS", "Embed", "EmbeddingsRetriever", "build_embeddings_index"]
