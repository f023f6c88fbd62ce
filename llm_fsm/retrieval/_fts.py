"""``FTSRetriever``: the built-in retriever, reading an index ``llm-fsm index`` built (BM25 over SQLite FTS5).

The user's words are never FTS5 query syntax: a message such as ``"refund*`` or ``cats NOT dogs`` or ``NEAR`` is
cut into words and each word searched as a quoted term, any of them matching (OR), best first by BM25. A stray
quote therefore cannot raise, and an operator word cannot silently change what is searched.

Each query opens its own read-only connection: a retriever is shared by every conversation of a manager and may be
called from several threads, and a connection per query needs no lock and sees a rebuilt index at once.
"""

from __future__ import annotations

import os
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from urllib.parse import quote

from llm_fsm.errors import RetrievalError, RetrievalIndexError
from llm_fsm.retrieval._index import FORMAT
from llm_fsm.retrieval._types import Snippet

#: the most words of a query searched: a pasted page must not become a query of thousands of terms
MAX_TERMS = 64

_WORD = re.compile(r"\w+")


class FTSRetriever:
    """A Retriever over the index file at ``path``; raises RetrievalIndexError at once when the index is missing,
    is not an index, or holds no documents (a misconfiguration to see at start-up, not on every turn)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
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
        match = " OR ".join(f'"{term}"' for term in terms)  # \w+ holds no quote: each term is one string
        try:
            with closing(self._connect()) as db:
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

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{quote(str(self.path.resolve()))}?mode=ro", uri=True)

    def __repr__(self) -> str:
        return f"FTSRetriever({str(self.path)!r})"


__all__ = ["MAX_TERMS", "FTSRetriever"]
