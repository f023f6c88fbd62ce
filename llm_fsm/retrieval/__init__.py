"""Retrieval: snippets of the team's own documents for a state's prompt (issue 25; work in progress on branches).

The shared shapes (``Snippet``, ``Retriever``) load with the package; the built-in full-text retrievers (SQLite FTS5,
PostgreSQL), the embeddings retriever and their index builders load on first use (PEP 562), so code that only needs
the shapes does not import sqlite3, and nothing imports psycopg or numpy before such an index is used.
``RetrieverRegistry`` (the runtime's, where retrievers are asked with their timeouts) is re-exported here, also on
first use, so an application imports what it registers and how from one place, as it does actions from
``llm_fsm.actions``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_fsm._lazy import lazy_exports
from llm_fsm.retrieval._types import AsyncRetriever, Retriever, Snippet

if TYPE_CHECKING:
    from llm_fsm.retrieval._embeddings import EmbeddingsRetriever, build_embeddings_index
    from llm_fsm.retrieval._fts import FTSRetriever
    from llm_fsm.retrieval._index import IndexReport, Problem, build_index
    from llm_fsm.retrieval._pg import PostgresRetriever
    from llm_fsm.retrieval._pg_index import build_postgres_index
    from llm_fsm.runtime._retrievers import RetrieverRegistry

_EXPORTS: dict[str, tuple[str, str]] = {
    "EmbeddingsRetriever": ("llm_fsm.retrieval._embeddings", "EmbeddingsRetriever"),
    "build_embeddings_index": ("llm_fsm.retrieval._embeddings", "build_embeddings_index"),
    "FTSRetriever": ("llm_fsm.retrieval._fts", "FTSRetriever"),
    "IndexReport": ("llm_fsm.retrieval._index", "IndexReport"),
    "Problem": ("llm_fsm.retrieval._index", "Problem"),
    "build_index": ("llm_fsm.retrieval._index", "build_index"),
    "PostgresRetriever": ("llm_fsm.retrieval._pg", "PostgresRetriever"),
    "build_postgres_index": ("llm_fsm.retrieval._pg_index", "build_postgres_index"),
    "RetrieverRegistry": ("llm_fsm.runtime._retrievers", "RetrieverRegistry"),
}

__all__ = [
    "AsyncRetriever",
    "EmbeddingsRetriever",
    "FTSRetriever",
    "IndexReport",
    "PostgresRetriever",
    "Problem",
    "Retriever",
    "RetrieverRegistry",
    "Snippet",
    "build_embeddings_index",
    "build_index",
    "build_postgres_index",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
