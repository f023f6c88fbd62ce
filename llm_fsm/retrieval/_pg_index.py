"""Build the full-text index in PostgreSQL, for teams that already run it: the same walk, change detection, report
and snippet ids as the SQLite index (``_index.update_index`` does the work; this module only stores it).

Layout, for a table name ``T`` (``llm_fsm_docs`` by default; ``schema.name`` puts it in a schema)::

    T         the chunks: (path, position) as primary key, the snippet id, heading, text, and ``tsv``, a tsvector
              GENERATED from heading (weight A) and text (weight B) in the index's text search configuration,
              with a GIN index: PostgreSQL keeps it right on every write, and a query reads the index alone
    T_files   one row per indexed file: path, size, mtime_ns, sha256 (what the SQLite index's ``files`` holds)
    T_meta    key/value: the layout's ``format`` and the ``language`` (text search configuration) of ``tsv``

A build is one transaction, begun by a transaction-level advisory lock on the table's name: two builds of one
table take turns, and a retriever reading meanwhile sees the old index or the new one (MVCC), never half of each.
The tables are created by the first build; tables of that name that are not an index, or an index of another
format or language, are refused rather than altered.

psycopg is imported on first use: ``import llm_fsm.retrieval`` must not need the ``postgres`` extra.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_fsm.errors import RetrievalError, RetrievalIndexError
from llm_fsm.retrieval._index import (
    DEFAULT_MAX_BYTES,
    IndexedChunk,
    IndexReport,
    Known,
    documents_folder,
    update_index,
)

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

#: the tables' layout version; another version is refused, never migrated silently
FORMAT = "llm-fsm-pgfts-1"

DEFAULT_TABLE = "llm_fsm_docs"

#: PostgreSQL's text search configuration: stemming ("refunds" finds "refund") and stop words of a language
DEFAULT_LANGUAGE = "english"

DEFAULT_CONNECT_TIMEOUT = 5.0

# a plain lowercase SQL name (no quoting needed), short enough for the "_files" and "_meta" suffixes
_TABLE = re.compile(r"(?:[a-z_][a-z0-9_]{0,62}\.)?[a-z_][a-z0-9_]{0,56}")
_LANGUAGE = re.compile(r"(?:[a-z_][a-z0-9_]{0,62}\.)?[a-z_][a-z0-9_]{0,62}")


@dataclass(frozen=True)
class Tables:
    """The index's tables as SQL identifiers, from a table name checked to be a plain SQL name."""

    name: str
    chunks: sql.Identifier
    files: sql.Identifier
    meta: sql.Identifier
    tsv_index: sql.Identifier

    @classmethod
    def named(cls, table: str) -> Tables:
        if not _TABLE.fullmatch(table):
            raise RetrievalIndexError(
                f"PostgreSQL index table must be a lowercase SQL name ([schema.]name of a-z, 0-9, _), got {table!r}"
            )
        from psycopg import sql

        *schema, base = table.split(".")
        return cls(
            table,
            sql.Identifier(*schema, base),
            sql.Identifier(*schema, f"{base}_files"),
            sql.Identifier(*schema, f"{base}_meta"),
            sql.Identifier(f"{base}_tsv"),  # an index lives in its table's schema
        )


def build_postgres_index(
    docs: str | os.PathLike[str],
    dsn: str,
    *,
    table: str = DEFAULT_TABLE,
    language: str = DEFAULT_LANGUAGE,
    max_bytes: int = DEFAULT_MAX_BYTES,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> IndexReport:
    """Bring the index in ``table`` of the database at ``dsn`` (a libpq URL or ``key=value`` string) up to date with
    the documents under ``docs`` (tables created when missing)."""
    folder = documents_folder(docs)
    import_psycopg()
    tables = Tables.named(table)
    if not _LANGUAGE.fullmatch(language):
        raise RetrievalIndexError(f"{language!r} is not the name of a PostgreSQL text search configuration")
    where = describe(dsn)
    with (
        translated_errors(where, f"{where}: index {table} could not be written"),
        connect(dsn, connect_timeout) as conn,
        conn.transaction(),
    ):
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"llm-fsm index {table}",))
        _prepare(conn, tables, language, where)
        return update_index(folder, _PostgresTarget(conn, tables), max_bytes)


def _prepare(conn: psycopg.Connection[Any], tables: Tables, language: str, where: str) -> None:
    """Create the tables, or check that those found are an index of this format and language."""
    from psycopg import errors, sql

    try:
        with conn.transaction():  # a savepoint: the error is reported, the lock's transaction stays usable
            conn.execute("SELECT %s::regconfig", (language,))
    except errors.UndefinedObject:
        raise RetrievalIndexError(
            f"{where} has no text search configuration {language!r} (see \\dF in psql: english, simple, ...)"
        ) from None
    found = read_meta(conn, tables)
    if found is None:
        if _exists(conn, tables.chunks) or _exists(conn, tables.files):
            raise RetrievalIndexError(
                f"{where}: table {tables.name} is not an index of `llm-fsm index` (no {tables.name}_meta);"
                " choose another --table"
            )
        config = sql.Literal(language)
        for statement in (
            "CREATE TABLE {chunks} (path text NOT NULL, position integer NOT NULL, id text NOT NULL,"
            " heading text NOT NULL, text text NOT NULL, tsv tsvector GENERATED ALWAYS AS"
            " (setweight(to_tsvector({config}::regconfig, heading), 'A')"
            " || setweight(to_tsvector({config}::regconfig, text), 'B')) STORED,"
            " PRIMARY KEY (path, position))",
            "CREATE INDEX {tsv_index} ON {chunks} USING gin (tsv)",
            "CREATE TABLE {files} (path text PRIMARY KEY, size bigint NOT NULL, mtime_ns bigint NOT NULL,"
            " sha256 text NOT NULL)",
            "CREATE TABLE {meta} (key text PRIMARY KEY, value text NOT NULL)",
        ):
            conn.execute(
                sql.SQL(statement).format(
                    chunks=tables.chunks,
                    files=tables.files,
                    meta=tables.meta,
                    tsv_index=tables.tsv_index,
                    config=config,
                )
            )
        conn.execute(
            sql.SQL("INSERT INTO {} (key, value) VALUES ('format', %s), ('language', %s)").format(tables.meta),
            (FORMAT, language),
        )
        return
    check_meta(found, tables, where)
    if found.get("language") != language:
        raise RetrievalIndexError(
            f"{where}: index {tables.name} was built for language {found.get('language')!r}, not {language!r};"
            " drop its tables to rebuild it in another language"
        )


def read_meta(conn: psycopg.Connection[Any], tables: Tables) -> dict[str, str] | None:
    """The index's meta rows, or None when it has no meta table (no index of that name)."""
    from psycopg import sql

    if not _exists(conn, tables.meta):
        return None
    rows = conn.execute(sql.SQL("SELECT key, value FROM {}").format(tables.meta)).fetchall()
    return {str(key): str(value) for key, value in rows}


def check_meta(meta: dict[str, str], tables: Tables, where: str) -> None:
    if meta.get("format") != FORMAT:
        raise RetrievalIndexError(
            f"{where}: {tables.name} is an index of format {meta.get('format')!r}, not {FORMAT!r}"
        )


def _exists(conn: psycopg.Connection[Any], table: sql.Identifier) -> bool:
    from psycopg import sql

    row = conn.execute(sql.SQL("SELECT to_regclass(%s) IS NOT NULL"), (table.as_string(conn),)).fetchone()
    return bool(row and row[0])


class _PostgresTarget:
    """update_index's writes, as statements in the build's transaction."""

    def __init__(self, conn: psycopg.Connection[Any], tables: Tables) -> None:
        from psycopg import sql

        self.conn = conn
        self.q = {
            name: sql.SQL(text).format(chunks=tables.chunks, files=tables.files)
            for name, text in {
                "known": "SELECT path, size, mtime_ns, sha256 FROM {files}",
                "touch": "UPDATE {files} SET size = %s, mtime_ns = %s WHERE path = %s",
                "copy": "COPY {chunks} (path, position, id, heading, text) FROM STDIN",
                "file": "INSERT INTO {files} (path, size, mtime_ns, sha256) VALUES (%s, %s, %s, %s)",
                "forget_chunks": "DELETE FROM {chunks} WHERE path = %s",
                "forget_file": "DELETE FROM {files} WHERE path = %s",
                "count": "SELECT count(*) FROM {chunks}",
            }.items()
        }

    def known(self) -> dict[str, Known]:
        rows = self.conn.execute(self.q["known"]).fetchall()
        return {str(path): (int(size), int(mtime), str(digest)) for path, size, mtime, digest in rows}

    def touch(self, name: str, size: int, mtime_ns: int) -> None:
        self.conn.execute(self.q["touch"], (size, mtime_ns, name))

    def replace(self, name: str, known: Known, chunks: list[IndexedChunk]) -> None:
        self.forget(name)
        with self.conn.cursor() as cursor, cursor.copy(self.q["copy"]) as copy:
            for position, chunk in enumerate(chunks):
                copy.write_row((chunk.path, position, chunk.id, _no_nul(chunk.heading), _no_nul(chunk.text)))
        self.conn.execute(self.q["file"], (name, *known))

    def forget(self, name: str) -> None:
        self.conn.execute(self.q["forget_chunks"], (name,))
        self.conn.execute(self.q["forget_file"], (name,))

    def count(self) -> int:
        row = self.conn.execute(self.q["count"]).fetchone()
        return int(row[0]) if row else 0


def _no_nul(text: str) -> str:
    """PostgreSQL's text cannot hold U+0000 (SQLite's can): it becomes the replacement character, as an undecodable
    byte does, so a document holding one is indexed rather than failing the whole build."""
    return text.replace("\x00", "\ufffd")


def import_psycopg() -> None:
    """Imported only when a PostgreSQL index is built or read, so ``import llm_fsm`` never needs psycopg; a missing
    extra is a typed error naming it."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise RetrievalError('the PostgreSQL retriever needs psycopg 3: pip install "llm_fsm[postgres]"') from exc


def connect(dsn: str, connect_timeout: float) -> psycopg.Connection[Any]:
    """A new connection (``import_psycopg`` first); libpq's connect_timeout is whole seconds, at least 2."""
    import psycopg

    return psycopg.connect(dsn, connect_timeout=max(2, round(connect_timeout)))


@contextmanager
def translated_errors(
    where: str, failed: str, *, as_type: type[RetrievalError] = RetrievalIndexError
) -> Iterator[None]:
    """psycopg's errors as the retrieval errors a caller can act on: a server that cannot be reached (or is
    shutting down, or dropped the connection) is unavailable, a RetrievalError; anything else the database
    refused is ``failed``, an ``as_type``."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        if connection_lost(exc):
            raise RetrievalError(f"{where} is unavailable: {first_line(exc)}") from exc
        raise as_type(f"{failed}: {type(exc).__name__}: {first_line(exc)}") from exc


def connection_lost(exc: Exception) -> bool:
    """A refused or dropped connection, or a server shutting down: another connection, later, may do better."""
    import psycopg

    sqlstate = getattr(exc, "sqlstate", None)
    return isinstance(exc, psycopg.OperationalError) and (sqlstate is None or sqlstate.startswith(("08", "57P")))


def describe(dsn: str) -> str:
    """The database as a URL without its password, for messages and logs."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = conninfo_to_dict(dsn)
    except Exception:  # not for a message to judge: connecting reports a malformed DSN
        return "postgresql://"
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{parts.get('host') or ''}{port}/{parts.get('dbname') or ''}"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_LANGUAGE",
    "DEFAULT_TABLE",
    "FORMAT",
    "Tables",
    "build_postgres_index",
]
