"""``PostgresRetriever``: the built-in retriever over an index in PostgreSQL (``llm-fsm index DOCS/ --out
postgresql://...``), for teams already running it; ranked by ``ts_rank_cd`` over the GIN-indexed tsvector.

The user's words are never tsquery syntax. As ``FTSRetriever`` does, a message is cut into words and any of them
may match, best first: each word is one ``plainto_tsquery`` of a bound parameter, and the words are OR-ed (``||``).
So ``!refunds``, ``refund:*``, ``a & b``, a stray quote or ``'; DROP TABLE`` can neither raise nor change what is
searched. (``websearch_to_tsquery`` would require every word and read ``-word`` and ``or`` as operators.)

Connections: given a URL, the retriever keeps a few idle connections of its own and opens one when none is idle,
so a query costs no connection set-up and a server that is down is reported at once, not after a pool's wait; a
query on an idle connection that dropped (the server restarted) is retried once on a new one. Given a
``psycopg_pool.ConnectionPool``, it borrows the application's connections instead. A server that cannot be
reached is a RetrievalError, which the state's ``on_error`` handles like any failed retrieval.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from llm_fsm.errors import RetrievalError, RetrievalIndexError
from llm_fsm.retrieval._fts import MAX_TERMS
from llm_fsm.retrieval._pg_index import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_TABLE,
    Tables,
    check_meta,
    connect,
    connection_lost,
    describe,
    import_psycopg,
    read_meta,
    translated_errors,
)
from llm_fsm.retrieval._types import Snippet

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql
    from psycopg_pool import ConnectionPool

_WORD = re.compile(r"\w+")

_T = TypeVar("_T")


class PostgresRetriever:
    """A Retriever over the index in ``table`` of a PostgreSQL database: ``dsn_or_pool`` is a libpq URL (or
    ``key=value`` string) or a ``psycopg_pool.ConnectionPool`` of the application's.

    Raises at once, as ``FTSRetriever`` does: RetrievalIndexError when there is no index of that name, it is of
    another format or language, or it holds no documents; RetrievalError when the database cannot be reached.
    ``language`` (the text search configuration) defaults to the one the index was built with.
    """

    def __init__(
        self,
        dsn_or_pool: str | ConnectionPool[Any],
        *,
        table: str = DEFAULT_TABLE,
        language: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        idle_connections: int = 4,
    ) -> None:
        import_psycopg()
        self.tables = Tables.named(table)
        self._pool = None if isinstance(dsn_or_pool, str) else dsn_or_pool
        self._dsn = dsn_or_pool if isinstance(dsn_or_pool, str) else ""
        self.where = describe(self._dsn) if self._pool is None else f"postgres pool {self._pool.name!r}"
        self._connect_timeout = connect_timeout
        self._idle: list[psycopg.Connection[Any]] = []
        self._idle_max = idle_connections
        self._lock = threading.Lock()
        with translated_errors(self.where, f"{self.where}: index {table} cannot be read"):
            self.language, count = self._run(lambda conn: self._check(conn, language))
        if not count:
            raise RetrievalIndexError(
                f"{self.where}: index {table} holds no documents: was `llm-fsm index` given the right folder?"
            )
        from psycopg import sql

        self._config = sql.Literal(self.language)

    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        terms = list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))[:MAX_TERMS]
        if not terms or k <= 0:
            return []
        statement = self._statement(len(terms))
        failed = f"{self.where}: index {self.tables.name} could not be searched"
        with translated_errors(self.where, failed, as_type=RetrievalError):
            rows = self._run(lambda conn: conn.execute(statement, (*terms, k)).fetchall())
        return [
            Snippet(id=id_, text=text, source=f"{path} > {heading}" if heading else path, score=float(rank))
            for id_, path, heading, text, rank in rows
        ]

    def close(self) -> None:
        """Close the idle connections of the retriever's own (an application's pool is the application's)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _statement(self, terms: int) -> sql.Composed:
        """Any word matching (tsquery ``||``), each word a bound parameter given to ``plainto_tsquery``; ranked
        by cover density, normalised by the chunk's length (1: divided by 1 + its log) as BM25 is."""
        from psycopg import sql

        word = sql.SQL("plainto_tsquery({}::regconfig, %s)").format(self._config)
        return sql.SQL(
            "SELECT id, path, heading, text, ts_rank_cd(tsv, query, 1) AS rank FROM {}, (SELECT {} AS query) AS q"
            " WHERE tsv @@ query ORDER BY rank DESC, path, position LIMIT %s"
        ).format(self.tables.chunks, sql.SQL(" || ").join([word] * terms))

    def _check(self, conn: psycopg.Connection[Any], language: str | None) -> tuple[str, int]:
        from psycopg import sql

        meta = read_meta(conn, self.tables)
        if meta is None:
            raise RetrievalIndexError(
                f"{self.where}: no index {self.tables.name}; build it with"
                f" `llm-fsm index DOCS/ --out postgresql://... --table {self.tables.name}`"
            )
        check_meta(meta, self.tables, self.where)
        built = meta.get("language", "")
        if language is not None and language != built:
            raise RetrievalIndexError(
                f"{self.where}: index {self.tables.name} was built for language {built!r}, not {language!r}"
            )
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(self.tables.chunks)).fetchone()
        return built, int(row[0]) if row else 0

    def _run(self, work: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """``work(connection)``: on the application's pool, or on an idle connection of ours (retried once on a
        new one when that connection turns out to have dropped), or on a new one."""
        if self._pool is not None:
            with self._pool.connection(timeout=self._connect_timeout) as conn:
                return work(conn)
        for retry in (True, False):
            conn, reused = self._take()
            try:
                result = work(conn)
            except Exception as exc:
                conn.close()
                if reused and retry and connection_lost(exc):
                    continue
                raise
            except BaseException:
                conn.close()
                raise
            self._give(conn)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _take(self) -> tuple[psycopg.Connection[Any], bool]:
        with self._lock:
            if self._idle:
                return self._idle.pop(), True
        conn = connect(self._dsn, self._connect_timeout)
        conn.autocommit = True  # one statement per query: no transaction left open between turns
        return conn, False

    def _give(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            if len(self._idle) < self._idle_max:
                self._idle.append(conn)
                return
        conn.close()

    def __repr__(self) -> str:
        return f"PostgresRetriever({self.where!r}, table={self.tables.name!r})"


__all__ = ["PostgresRetriever"]
