"""``FTSRetriever``: the built-in retriever, reading an index ``llm-fsm index`` built (BM25 over SQLite FTS5).

The user's words are never FTS5 query syntax: a message such as ``"refund*`` or ``cats NOT dogs`` or ``NEAR`` is
cut into words and each word searched as a quoted term, any of them matching (OR), best first by BM25. A stray
quote therefore cannot raise, and an operator word cannot silently change what is searched.

Words found in most chunks ("the", "is", "how") are left out of that OR (``common_terms``): each would match most
of a large index, and BM25 would rank every chunk it matched, for little: such a word barely moves a chunk's score.
At 100,000 chunks that was nine tenths of a query's time (benchmarks/README.md). How many chunks hold a word is
asked of FTS5 itself, with the word as a query (``count(*) ... MATCH``): it is tokenized as the index was, so
"running" is counted as the stem "run" the index holds, and a word FTS5 cuts in two ("don_t") as that phrase.

Each query opens its own read-only connection: a retriever is shared by every conversation of a manager and may be
called from several threads, and a connection per query needs no lock and sees a rebuilt index at once. The word
counts are cached for one build of the index (the build token ``build_index`` writes in the same transaction as
the chunks), read in the query's own snapshot: a rebuilt index is counted anew, never with another build's counts.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from llm_fsm.errors import RetrievalError, RetrievalIndexError
from llm_fsm.retrieval._index import BUILD, FORMAT
from llm_fsm.retrieval._types import Snippet

#: the most words of a query searched: a pasted page must not become a query of thousands of terms
MAX_TERMS = 64

#: the default ``common_terms``: a word in more than this share of the chunks is left out of the search. Measured
#: on 100,000 chunks: 5 % kept recall@5 and took p50 from 94 to 9 ms; 2 % lost recall (benchmarks/README.md)
COMMON_TERMS = 0.05

#: a word in at most this many chunks is never left out: in a small index every word is in a large share of a few
#: chunks, and ranking all of them is cheap. An index of at most 50 chunks searches every word; below 1,000 chunks
#: (at the default share) a word is left out only when it is in more than 50
MIN_COMMON_CHUNKS = 50

#: the most word counts cached for one build: the words users type are unbounded, the cache is not
MAX_COUNTED = 100_000

_WORD = re.compile(r"\w+")


@dataclass
class _Counts:
    """How many chunks hold each word looked up so far, in the index of one build (``build`` None: an index built
    before build tokens, whose counts are not kept past the query)."""

    build: str | None
    chunks: int
    words: dict[str, int] = field(default_factory=dict)


class FTSRetriever:
    """A Retriever over the index file at ``path``; raises RetrievalIndexError at once when the index is missing,
    is not an index, or holds no documents (a misconfiguration to see at start-up, not on every turn).

    ``common_terms``: a word of the query found in more than this share of the chunks (and in more than
    ``MIN_COMMON_CHUNKS``) is left out of the search, unless every word found is: then the rarest of them is
    searched, so a question of common words still finds something. Words found in no chunk are left out too (they
    cannot match). ``None`` or ``1.0`` searches every word.
    """

    def __init__(self, path: str | os.PathLike[str], *, common_terms: float | None = COMMON_TERMS) -> None:
        if common_terms is not None and not 0 < common_terms <= 1:
            raise ValueError(f"common_terms must be a share of the chunks (0 < share <= 1) or None, not {common_terms}")
        self.path = Path(path)
        self.common_terms = common_terms
        self._share = None if common_terms is None or common_terms >= 1 else common_terms
        self._lock = threading.Lock()
        self._counts: _Counts | None = None
        if not self.path.is_file():
            raise RetrievalIndexError(
                f"{self.path}: no such index; build it with `llm-fsm index DOCS/ --out {self.path}`"
            )
        try:
            with closing(self._connect()) as db:
                (version,) = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() or (None,)
                if version != FORMAT:
                    raise RetrievalIndexError(f"{self.path} is not an index of format {FORMAT!r} (found {version!r})")
                (count,) = db.execute("SELECT count(*) FROM chunks").fetchone()
        except sqlite3.Error as exc:
            raise RetrievalIndexError(f"{self.path} is not an index of `llm-fsm index`: {exc}") from exc
        if not count:
            raise RetrievalIndexError(f"{self.path} holds no documents: was `llm-fsm index` given the right folder?")

    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        terms = list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))[:MAX_TERMS]
        if not terms or k <= 0:
            return []
        try:
            with closing(self._connect()) as db:
                if self._share is not None:
                    db.execute("BEGIN")  # one snapshot: the words are counted in the index they are searched in
                    terms = self._searched(db, terms, self._share)
                    if not terms:
                        return []
                match = " OR ".join(f'"{term}"' for term in terms)  # \w+ holds no quote: each term is one string
                rows = db.execute(
                    "SELECT id, path, heading, text, bm25(chunks) FROM chunks WHERE chunks MATCH ?"
                    " ORDER BY bm25(chunks) LIMIT ?",
                    (match, k),
                ).fetchall()
        except sqlite3.Error as exc:
            raise RetrievalError(f"{self.path}: the full-text index could not be searched: {exc}") from exc
        return [
            Snippet(id=id_, text=text, source=f"{path} > {heading}" if heading else path, score=-rank)
            for id_, path, heading, text, rank in rows
        ]

    def _searched(self, db: sqlite3.Connection, terms: list[str], share: float) -> list[str]:
        """``terms`` without the common ones and those found nowhere; the rarest alone when all found are common."""
        counts = self._current(db)
        found: dict[str, int] = {}
        for term in terms:
            count = counts.words.get(term)
            if count is None:
                (count,) = db.execute("SELECT count(*) FROM chunks WHERE chunks MATCH ?", (f'"{term}"',)).fetchone()
                with self._lock:
                    if len(counts.words) >= MAX_COUNTED:
                        counts.words.clear()
                    counts.words[term] = count
            if count:
                found[term] = count
        if not found:
            return []
        most = max(share * counts.chunks, MIN_COMMON_CHUNKS)
        rare = [term for term, count in found.items() if count <= most]
        return rare or [min(found, key=found.__getitem__)]

    def _current(self, db: sqlite3.Connection) -> _Counts:
        """The counts of the build ``db`` reads, kept when the index has a build token."""
        row = db.execute("SELECT value FROM meta WHERE key = ?", (BUILD,)).fetchone()
        build = None if row is None else str(row[0])
        with self._lock:
            if build is not None and self._counts is not None and self._counts.build == build:
                return self._counts
        # a file's chunks are its rows first_row..last_row; count(*) of the FTS5 table would read every chunk
        (chunks,) = db.execute("SELECT coalesce(sum(last_row - first_row + 1), 0) FROM files").fetchone()
        counts = _Counts(build, int(chunks))
        if build is not None:
            with self._lock:
                self._counts = counts
        return counts

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{quote(str(self.path.resolve()))}?mode=ro", uri=True)

    def __repr__(self) -> str:
        return f"FTSRetriever({str(self.path)!r}, common_terms={self.common_terms!r})"


__all__ = ["COMMON_TERMS", "MAX_TERMS", "MIN_COMMON_CHUNKS", "FTSRetriever"]
