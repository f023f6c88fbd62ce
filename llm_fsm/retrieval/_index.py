"""Build the full-text index: a folder of documents into one SQLite file with an FTS5 table, BM25-ranked.

SQLite's FTS5 ships with Python, so the built-in retriever needs no service. The build is incremental because a
docs folder is rebuilt on every change (a CI step, a pre-commit hook): a file whose size and modification time
are those recorded is not opened at all; one that changed is read and hashed, and its chunks are replaced only
when its content did change (a ``touch`` or a fresh checkout keeps every snippet id). Files gone from the folder
lose their chunks. The whole build is one transaction, so a retriever reading the file meanwhile sees the old
index or the new one, never half of each.

Bad input never stops a build, it is reported: a file that is not UTF-8 is indexed with replacement characters, a
file over the size cap is skipped without being read whole, a file that cannot be read is skipped.

Walking, reading, hashing, chunking and change detection (``update_index``) do not depend on SQLite: an
``IndexTarget`` holds the chunks, so the PostgreSQL index (``_pg_index``) is built by the same code.
"""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Protocol

from llm_fsm.errors import RetrievalIndexError
from llm_fsm.retrieval._chunks import SUFFIXES, chunk_document

#: the size over which a file is skipped: a document that large is an export or a dump, not something to cite
DEFAULT_MAX_BYTES = 20 * 1024 * 1024

_PIECE = 1024 * 1024

#: the index file's layout version; another version is rebuilt by nobody silently, it is refused
FORMAT = "llm-fsm-fts-1"

#: the meta key of a token that a build which changed the index writes anew: what a reader caches about the
#: index (FTSRetriever's word counts) is of one token. Random, not a counter: an index deleted and built again
#: from scratch must not repeat a token
BUILD = "build"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # a file's chunks are the rows first_row..last_row: replacing a file deletes a rowid range, not a table scan
    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,"
    " sha256 TEXT NOT NULL, first_row INTEGER NOT NULL, last_row INTEGER NOT NULL)",
    # porter: "refund" finds "refunds"; unicode61 with diacritics removed: "cafe" finds "café"
    "CREATE VIRTUAL TABLE IF NOT EXISTS chunks USING fts5(id UNINDEXED, path UNINDEXED, heading, text,"
    " tokenize = 'porter unicode61 remove_diacritics 2')",
)


@dataclass(frozen=True)
class Problem:
    """A file the build could not index as it is (``path`` relative to the folder) and why."""

    path: str
    reason: str


@dataclass
class IndexReport:
    """What a build did, by file (paths relative to the folder, in walk order)."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    chunks: int = 0


def snippet_id(path: str, heading: str, index: int) -> str:
    """A chunk's id: the same file, heading path and position give the same id in every build, so a reply's
    citation still resolves after the index is rebuilt."""
    return hashlib.sha256(f"{path}\n{heading}\n{index}".encode()).hexdigest()[:16]


def build_index(
    docs: str | os.PathLike[str], out: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES
) -> IndexReport:
    """Bring the index at ``out`` up to date with the documents under ``docs`` (created when missing)."""
    return build_sqlite_index(documents_folder(docs), Path(out), _SCHEMA, FORMAT, SQLiteTarget, max_bytes)


def build_sqlite_index(
    folder: Path,
    out: Path,
    schema: tuple[str, ...],
    fmt: str,
    target: Callable[[sqlite3.Connection], IndexTarget],
    max_bytes: int,
) -> IndexReport:
    """``update_index`` into the SQLite file ``out`` (of layout ``schema`` and ``fmt``), in one transaction."""
    db = open_for_writing(out, schema, fmt)
    try:
        with db:
            db.execute("BEGIN IMMEDIATE")  # two builds of one file take turns instead of interleaving
            changes = db.total_changes
            report = update_index(folder, target(db), max_bytes)
            if db.total_changes != changes or not db.execute("SELECT 1 FROM meta WHERE key = ?", (BUILD,)).fetchone():
                db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (BUILD, uuid.uuid4().hex))
            return report
    except sqlite3.Error as exc:  # locked by another writer past the timeout, a full disk, a damaged file
        raise RetrievalIndexError(f"{out}: the index could not be written: {exc}") from exc
    finally:
        db.close()


def documents_folder(docs: str | os.PathLike[str]) -> Path:
    """``docs`` as a folder, checked before any index is opened: a typo must not create an empty index."""
    folder = Path(docs)
    if not folder.is_dir():
        raise FileNotFoundError(errno.ENOENT, "no such folder of documents", str(folder))
    return folder


@dataclass(frozen=True)
class IndexedChunk:
    """A chunk as an index stores it: with its stable id and the document it is from."""

    id: str
    path: str
    heading: str
    text: str


#: what an index remembers of a file: size, modification time (ns) and the SHA-256 of its bytes
Known = tuple[int, int, str]


class IndexTarget(Protocol):
    """Where a build writes its changes: the SQLite file here, a PostgreSQL table in ``_pg_index``. Every backend
    walks, reads, hashes and chunks the same way (``update_index``), so the same folder gives the same snippet ids
    and the same report whichever engine holds the index."""

    def known(self) -> dict[str, Known]: ...

    def touch(self, name: str, size: int, mtime_ns: int) -> None:
        """The file's content is as indexed; remember its new size and time so it is not read next build."""

    def replace(self, name: str, known: Known, chunks: list[IndexedChunk]) -> None:
        """The file's old chunks (if any) go, ``chunks`` come in."""

    def forget(self, name: str) -> None: ...

    def count(self) -> int: ...


def update_index(folder: Path, target: IndexTarget, max_bytes: int) -> IndexReport:
    """Bring ``target`` up to date with the documents under ``folder``; the caller holds the transaction."""
    report = IndexReport()
    known = target.known()
    seen: set[str] = set()
    for path, name in _documents(folder):
        if not _is_utf8(name):  # the engines hold text as UTF-8; such a name cannot be a source either
            report.problems.append(Problem(_printable(name), "its name is not UTF-8: skipped"))
            continue
        seen.add(name)
        _update_file(target, path, name, known.get(name), max_bytes, report)
    for name in sorted(set(known) - seen):
        target.forget(name)
        report.removed.append(name)
    report.chunks = target.count()
    return report


class SQLiteTarget:
    """A file's chunks are the rows first_row..last_row: replacing a file deletes a rowid range, not a table scan."""

    #: the chunks table's columns after rowid; an index that stores more per chunk (a vector) adds its own
    columns: tuple[str, ...] = ("id", "path", "heading", "text")

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def values(self, chunks: list[IndexedChunk]) -> list[tuple[object, ...]]:
        """Each chunk's row, in ``columns`` order."""
        return [(c.id, c.path, c.heading, c.text) for c in chunks]

    def known(self) -> dict[str, Known]:
        rows = self.db.execute("SELECT path, size, mtime_ns, sha256 FROM files")
        return {row[0]: (row[1], row[2], row[3]) for row in rows}

    def touch(self, name: str, size: int, mtime_ns: int) -> None:
        self.db.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?", (size, mtime_ns, name))

    def replace(self, name: str, known: Known, chunks: list[IndexedChunk]) -> None:
        self.forget(name)
        first = self.db.execute("SELECT coalesce(max(rowid), 0) + 1 FROM chunks").fetchone()[0]
        rows = [(first + n, *values) for n, values in enumerate(self.values(chunks))]
        marks = ", ".join("?" * (len(self.columns) + 1))
        self.db.executemany(f"INSERT INTO chunks (rowid, {', '.join(self.columns)}) VALUES ({marks})", rows)
        self.db.execute(
            "INSERT INTO files (path, size, mtime_ns, sha256, first_row, last_row) VALUES (?, ?, ?, ?, ?, ?)",
            (name, *known, first, first + len(rows) - 1),
        )

    def forget(self, name: str) -> None:
        row = self.db.execute("SELECT first_row, last_row FROM files WHERE path = ?", (name,)).fetchone()
        if row is not None:
            self.db.execute("DELETE FROM chunks WHERE rowid BETWEEN ? AND ?", row)
            self.db.execute("DELETE FROM files WHERE path = ?", (name,))

    def count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM chunks").fetchone()[0])


def open_for_writing(out: Path, schema: tuple[str, ...], fmt: str) -> sqlite3.Connection:
    """The index file at ``out``, created with ``schema`` when new; a file of other tables or another format is
    refused, never altered."""
    db = sqlite3.connect(out)
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "meta" not in tables:
            raise RetrievalIndexError(
                f"{out} is not an index of `llm-fsm index` (it has other tables); choose another --out"
            )
        for statement in schema:
            db.execute(statement)
        row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None:
            db.execute("INSERT INTO meta (key, value) VALUES ('format', ?)", (fmt,))
            db.commit()
        elif row[0] != fmt:
            raise RetrievalIndexError(f"{out} is an index of format {row[0]!r}, not {fmt!r}; delete it to rebuild")
    except sqlite3.DatabaseError as exc:
        db.close()
        raise RetrievalIndexError(f"{out} is not an index of `llm-fsm index`: {exc}") from exc
    except RetrievalIndexError:
        db.close()
        raise
    return db


def _documents(folder: Path) -> list[tuple[Path, str]]:
    """The indexable files under ``folder``, sorted; hidden folders and files (``.git``) are not documents."""
    found: list[tuple[Path, str]] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if not name.startswith(".") and name.lower().endswith(SUFFIXES):
                path = Path(root) / name
                found.append((path, path.relative_to(folder).as_posix()))
    return found


def _update_file(
    target: IndexTarget, path: Path, name: str, known: Known | None, max_bytes: int, report: IndexReport
) -> None:
    try:
        stat = path.stat()
        if known is not None and (stat.st_size, stat.st_mtime_ns) == known[:2]:
            report.unchanged.append(name)
            return
        if not S_ISREG(stat.st_mode):  # a FIFO or a device under a document's name: opening it could block
            _skip(target, name, known, "not a regular file: skipped", report)
            return
        data = None if stat.st_size > max_bytes else _read_capped(path, max_bytes)
    except OSError as exc:
        _skip(target, name, known, f"cannot be read: {exc.strerror or exc}", report)
        return
    if data is None:
        _skip(target, name, known, f"over the cap of {max_bytes} bytes (--max-bytes): skipped", report)
        return
    digest = hashlib.sha256(data).hexdigest()
    if known is not None and digest == known[2]:
        target.touch(name, stat.st_size, stat.st_mtime_ns)
        report.unchanged.append(name)
        return
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8-sig", errors="replace")
        report.problems.append(Problem(name, f"not UTF-8 (byte {exc.start}): indexed with replacement characters"))
    chunks = [
        IndexedChunk(snippet_id(name, c.heading, c.index), name, c.heading, c.text) for c in chunk_document(name, text)
    ]
    target.replace(name, (stat.st_size, stat.st_mtime_ns, digest), chunks)
    (report.added if known is None else report.updated).append(name)


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(name: str) -> str:
    return os.fsencode(name).decode("utf-8", errors="replace")


def _read_capped(path: Path, cap: int) -> bytes | None:
    """The file's bytes, or None when it holds more than ``cap`` (it may have grown since it was measured): at most
    ``cap + 1`` bytes are ever read."""
    parts: list[bytes] = []
    total = 0
    with path.open("rb") as handle:
        while total <= cap:  # in pieces: read(cap + 1) would allocate the whole cap for every small file
            part = handle.read(min(_PIECE, cap + 1 - total))
            if not part:
                break
            parts.append(part)
            total += len(part)
    return None if total > cap else b"".join(parts)


def _skip(target: IndexTarget, name: str, known: Known | None, reason: str, report: IndexReport) -> None:
    """A file that cannot be indexed now loses its old chunks too: answering from a version of it that no longer
    exists would be worse than not answering from it."""
    if known is not None:
        target.forget(name)
    report.problems.append(Problem(name, reason))


__all__ = [
    "BUILD",
    "DEFAULT_MAX_BYTES",
    "FORMAT",
    "IndexReport",
    "IndexTarget",
    "IndexedChunk",
    "Known",
    "Problem",
    "SQLiteTarget",
    "build_index",
    "build_sqlite_index",
    "documents_folder",
    "open_for_writing",
    "snippet_id",
    "update_index",
]
