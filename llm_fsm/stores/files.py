"""File store: one JSON file per conversation that an operator can read, copy and grep.

Layout (every path segment escaped so any id is a safe file name, see ``segment``)::

    <root>/<user>/<room>/<id>.json               the hot record (FSMInstance less the turn log, indented JSON)
    <root>/<user>/<room>/<id>.json.bak           the previously committed record
    <root>/<user>/<room>/<id>.lock               flock target serialising writers of this conversation
    <root>/<user>/<room>/<id>.archive.<n>.jsonl  archived transcript, at most ``archive_part_size`` messages per part
    <root>/<user>/<room>/<id>.log.jsonl          turn log: turn records and processed message ids with their replies
    <root>/<user>/<room>/<id>.recovery.json      written when a record and its backup are both unreadable

A missing user or room is written as ``_``. Because the owner is part of the
path, a load for another user or room looks in another directory and finds
nothing; the owner stored inside the record is checked as well.

Save is transaction-safe in the Penguin seed's sense: write a temp file in the
same directory, flush and fsync it, keep the current record as ``.bak`` (a hard
link, so the primary never disappears), ``os.replace`` the temp file over the
primary and fsync the directory. Compare-and-set reads the current version
while holding ``fcntl.flock`` on the conversation's lock file, so several
processes can share the directory.

Recovery: a load whose primary cannot be decoded falls back to the backup with
a warning. When both are unreadable we do not invent an empty conversation (the
seed's "recovery session" would silently start over with a user who is
mid-flow); we raise StoreCorruptedError and leave ``<id>.recovery.json`` naming
the lost conversation, the time, the reason and the files, for the operator and
for the application to start a fresh conversation knowingly.

Archive: messages pruned from the live transcript are appended to JSONL parts.
Each part begins with a header naming the conversation, its part number, the
first sequence number it holds and the part it continues from; when a part
reaches ``archive_part_size`` messages a new linked part is started, so nothing
is ever dropped. Every archived line carries the record version whose save
wrote it; lines written by a save that crashed before its record was committed
carry a version above the committed one, are ignored by readers and are
trimmed by the next save, so a crash never duplicates nor loses messages.

Turn log: the same rule, in one file so that a save costs one more fsync, not
two. A save appends a line per new turn record (``{"turn_index": i, "version":
v, "keep": n, "record": {...}}``) and per new message id (``{"message_id": id,
"version": v, "keep": n, "reply": text}``) before it replaces the record;
readers take the committed lines and keep the newest ``keep`` of each kind. The
log is appended to, not rewritten, on every turn: it is compacted (rewritten
atomically with only the lines kept) when a kind holds more than twice what it
keeps. The key a line starts with is found without decoding it (compact JSON
has no newline inside a line, so ``\n{"message_id":`` only matches a line's start).
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import (
    ConcurrentUpdateError,
    StoreCorruptedError,
    StoreError,
    StoreUnavailableError,
)
from llm_fsm.stores.base import AsyncStoreMixin, ConversationSummary, Retention
from llm_fsm.stores.codec import (
    DEFAULT_MAX_RECORD_BYTES,
    Encoded,
    SizeLimits,
    committed,
    decode,
    decode_turn,
    encode,
    for_turn,
    not_found,
    owned_by,
    summary_of,
    turns_after,
    with_log,
)

logger = logging.getLogger(__name__)

DEFAULT_ARCHIVE_PART_SIZE = 500
"""Messages per archive part file before a continuation part is started."""

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def segment(value: str | None) -> str:
    """An id as one path segment: reversible, never ``.``/``..``, never containing a separator or a dot.

    Letters, digits, ``-`` and ``_`` stay readable; everything else is
    percent-encoded. ``None`` is ``_`` and a literal ``"_"`` is ``%5F`` so the two
    never meet; the empty string is ``%``.
    """
    if value is None:
        return "_"
    if value == "":
        return "%"
    if value == "_":
        return "%5F"
    return "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in value)


def unsegment(text: str) -> str:
    """A conversation id back from its file-name segment (the inverse of ``segment`` for non-None ids)."""
    return "" if text == "%" else unquote(text)


@dataclass(frozen=True)
class _Paths:
    directory: Path
    base: str

    @property
    def primary(self) -> Path:
        return self.directory / f"{self.base}.json"

    @property
    def backup(self) -> Path:
        return self.directory / f"{self.base}.json.bak"

    @property
    def temp(self) -> Path:
        return self.directory / f"{self.base}.json.tmp"

    @property
    def backup_temp(self) -> Path:
        return self.directory / f"{self.base}.json.bak.tmp"

    @property
    def corrupt(self) -> Path:
        return self.directory / f"{self.base}.json.corrupt"

    @property
    def lock(self) -> Path:
        return self.directory / f"{self.base}.lock"

    @property
    def recovery(self) -> Path:
        return self.directory / f"{self.base}.recovery.json"

    def part(self, n: int) -> Path:
        return self.directory / f"{self.base}.archive.{n}.jsonl"

    @property
    def log(self) -> Path:
        return self.directory / f"{self.base}.log.jsonl"

    @property
    def log_temp(self) -> Path:
        return self.directory / f"{self.base}.log.jsonl.tmp"


@dataclass
class _Tail:
    """What a save needs to know about the archive: the last part, its first and last sequence numbers."""

    part: int  # 0: no archive yet
    first_seq: int
    last_seq: int


class FileStore(AsyncStoreMixin):
    """Conversations as JSON files under one directory."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        archive_part_size: int = DEFAULT_ARCHIVE_PART_SIZE,
        indent: int | None = 2,
        fsync: bool = True,
        max_record_bytes: int | None = DEFAULT_MAX_RECORD_BYTES,
        max_context_bytes: int | None = None,
    ) -> None:
        """``fsync=False`` trades power-loss durability for speed; a killed process still never corrupts a record."""
        if archive_part_size < 1:
            raise StoreError(f"archive_part_size must be at least 1, not {archive_part_size}")
        self.root = Path(root).expanduser()
        self._part_size = int(archive_part_size)
        self._indent = indent
        self._fsync = fsync
        self._limits = SizeLimits(max_record_bytes=max_record_bytes, max_context_bytes=max_context_bytes)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnavailableError(f"{self.root}: cannot create the conversation directory: {exc}") from exc

    def __repr__(self) -> str:
        return f"FileStore({str(self.root)!r})"

    # --- protocol ---------------------------------------------------------------

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> FSMInstance:
        paths = self._paths(conversation_id, user_id, room_id)
        instance = self._hot(paths, conversation_id, user_id, room_id)
        turns, replies = _log_entries(_read_log(paths.log), instance.version, paths.log)
        where = str(paths.log)
        return with_log(
            instance,
            [decode_turn(e["record"], where=where) for e in _kept(turns)],
            [(str(e["message_id"]), str(e["reply"])) for e in _kept(replies)],
        )

    def load_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> FSMInstance:
        paths = self._paths(conversation_id, user_id, room_id)
        instance = self._hot(paths, conversation_id, user_id, room_id)
        reply = None if message_id is None else _find_reply(_read_log(paths.log), message_id, instance.version)
        return for_turn(instance, message_id, reply)

    def _hot(self, paths: _Paths, conversation_id: str, user_id: str | None, room_id: str | None) -> FSMInstance:
        instance = self._read_record(paths, conversation_id)
        if instance is None or not owned_by(instance, user_id, room_id) or instance.conversation_id != conversation_id:
            raise not_found(conversation_id)
        return instance

    def save(self, instance: FSMInstance, *, expected_version: int | None, retention: Retention | None = None) -> int:
        encoded = encode(
            instance,
            expected_version=expected_version,
            limits=self._limits,
            indent=self._indent,
            split=True,
            retention=retention,
        )
        cid = instance.conversation_id
        paths = self._paths(cid, instance.user_id, instance.room_id)
        with self._io(paths.primary):
            self._ensure_directory(paths.directory)
            with self._locked(paths):
                current, primary_ok = self._current(paths, cid)
                if expected_version is None:
                    if current is not None:
                        raise ConcurrentUpdateError(f"conversation {cid!r} already exists")
                    self._remove_archive(paths)  # leftovers of an interrupted delete must not join a new conversation
                    self._remove_logs(paths)
                elif (
                    current is None
                    or current.version != expected_version
                    or not owned_by(current, instance.user_id, instance.room_id)
                ):
                    found = "absent" if current is None else f"at version {current.version}"
                    raise ConcurrentUpdateError(f"conversation {cid!r} is {found}, not at version {expected_version}")
                committed_version = 0 if current is None else current.version
                if encoded.archive or paths.part(1).exists():
                    tail = self._trimmed_tail(paths, cid, committed_version)
                    if encoded.archive:
                        self._append_archive(paths, cid, tail, encoded.version, encoded.archive)
                self._log(paths, cid, committed_version, encoded)
                self._write_atomic(paths.temp, encoded.record)
                if paths.primary.exists():
                    if primary_ok:
                        self._keep_backup(paths)
                    else:
                        os.replace(paths.primary, paths.corrupt)  # keep the good .bak; keep the bad file for forensics
                os.replace(paths.temp, paths.primary)
                self._sync_directory(paths.directory)
        return committed(instance, encoded)

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        paths = self._paths(conversation_id, user_id, room_id)
        if not paths.directory.is_dir():
            return False
        with self._io(paths.primary), self._locked(paths, remove=True):
            return self._remove_locked(paths, user_id, room_id, cutoff=None)

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> list[ConversationSummary]:
        if _everyone(user_id, room_id):
            directories = [d for u in _subdirs(self.root) for d in _subdirs(u)]
        else:
            directories = [self.root / segment(user_id) / segment(room_id)]
        summaries: list[ConversationSummary] = []
        for directory in directories:
            for primary in _primaries(directory):
                instance = self._read_listed(directory, primary)
                if instance is None:
                    continue
                if not _everyone(user_id, room_id) and not owned_by(instance, user_id, room_id):
                    continue
                summaries.append(summary_of(instance))
        return sorted(summaries, key=lambda s: s.updated_at, reverse=True)

    def expire(self, *, older_than: float) -> int:
        cutoff = time.time() - older_than
        removed = 0
        for summary in self.list():
            if summary.updated_at >= cutoff:
                continue
            paths = self._paths(summary.conversation_id, summary.user_id, summary.room_id)
            with self._io(paths.primary), self._locked(paths, remove=True):
                removed += self._remove_locked(paths, summary.user_id, summary.room_id, cutoff=cutoff)
        return removed

    def transcript(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> builtins.list[dict[str, Any]]:
        paths = self._paths(conversation_id, user_id, room_id)
        instance = self._hot(paths, conversation_id, user_id, room_id)
        archived: list[dict[str, Any]] = []
        n = 1
        while True:
            try:
                raw = paths.part(n).read_bytes()
            except FileNotFoundError:
                break
            except OSError as exc:
                raise StoreUnavailableError(f"{paths.part(n)}: {exc}") from exc
            for entry, _end in _entries(raw, paths.part(n)):
                if entry is not None and entry["version"] <= instance.version:
                    archived.append(entry["message"])
            n += 1
        return archived + [dict(m) for m in instance.context.conversation.exchanges]

    def close(self) -> None:
        """Nothing is held open between calls."""

    # --- records ----------------------------------------------------------------

    def _remove_locked(self, paths: _Paths, user_id: str | None, room_id: str | None, *, cutoff: float | None) -> bool:
        """Delete every file of the conversation (record first, so it vanishes at once); caller holds the lock.

        With ``cutoff``, only if the record is still older than it: a save that
        raced ``expire`` keeps its conversation.
        """
        existed = paths.primary.exists()
        if existed:
            record = self._decodable(paths.primary) or self._decodable(paths.backup)
            if record is not None and not owned_by(record, user_id, room_id):
                return False
            if cutoff is not None and (record is None or record.updated_at >= cutoff):
                return False
        for path in (paths.primary, paths.backup, paths.temp, paths.backup_temp, paths.corrupt, paths.recovery):
            _unlink(path)
        self._remove_archive(paths)
        self._remove_logs(paths)
        self._sync_directory(paths.directory)
        return existed

    def _paths(self, conversation_id: str, user_id: str | None, room_id: str | None) -> _Paths:
        return _Paths(self.root / segment(user_id) / segment(room_id), segment(conversation_id))

    def _read_record(self, paths: _Paths, conversation_id: str) -> FSMInstance | None:
        """The committed record, from the backup if the primary is damaged; None when absent."""
        try:
            text = paths.primary.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreUnavailableError(f"{paths.primary}: {exc}") from exc
        try:
            return decode(text, where=str(paths.primary))
        except StoreCorruptedError as primary_error:
            backup = self._decodable(paths.backup)
            if backup is not None:
                logger.warning(
                    "conversation %s: %s is unreadable (%s); loaded the backup %s (version %d)",
                    conversation_id,
                    paths.primary,
                    primary_error,
                    paths.backup,
                    backup.version,
                )
                return backup
            self._write_recovery(paths, conversation_id, str(primary_error))
            raise StoreCorruptedError(
                f"conversation {conversation_id!r}: {paths.primary} and its backup are unreadable;"
                f" recovery record written to {paths.recovery}"
            ) from primary_error

    def _read_listed(self, directory: Path, primary: Path) -> FSMInstance | None:
        paths = _Paths(directory, primary.name[: -len(".json")])
        try:
            return self._read_record(paths, unsegment(paths.base))
        except StoreCorruptedError as exc:
            logger.warning("skipping an unreadable conversation in list(): %s", exc)
            return None

    def _current(self, paths: _Paths, conversation_id: str) -> tuple[FSMInstance | None, bool]:
        """The committed record under the lock, and whether the primary itself is sound."""
        primary = self._decodable(paths.primary)
        if primary is not None:
            return primary, True
        if not paths.primary.exists():
            return None, False
        return self._read_record(paths, conversation_id), False

    @staticmethod
    def _decodable(path: Path) -> FSMInstance | None:
        try:
            return decode(path.read_bytes(), where=str(path))
        except (OSError, StoreCorruptedError):
            return None

    def _write_recovery(self, paths: _Paths, conversation_id: str, reason: str) -> None:
        record = {
            "conversation_id": conversation_id,
            "lost_at": time.time(),
            "lost_at_iso": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "reason": reason,
            "primary": str(paths.primary),
            "backup": str(paths.backup),
            "archive_parts": [str(p) for p in _existing_parts(paths)],
            "turn_log": str(paths.log) if paths.log.exists() else None,
            "note": (
                "Both the record and its backup could not be decoded. The files were left in place; "
                "the archived transcript parts listed here are intact. Start a new conversation and "
                "delete this one when the files are no longer needed."
            ),
        }
        try:
            self._write_atomic(paths.directory / f"{paths.base}.recovery.json.tmp", json.dumps(record, indent=2))
            os.replace(paths.directory / f"{paths.base}.recovery.json.tmp", paths.recovery)
        except OSError as exc:
            logger.error("could not write recovery record %s: %s", paths.recovery, exc)

    # --- archive ----------------------------------------------------------------

    def _trimmed_tail(self, paths: _Paths, conversation_id: str, committed_version: int) -> _Tail:
        """The archive's last part after cutting lines a crashed save left behind (version above the committed one)."""
        n = _last_part(paths)
        while n > 0:
            path = paths.part(n)
            raw = path.read_bytes()
            header = _header(raw)
            last = _last_entry(raw) if header is not None else None
            if header is not None and last is not None and last["version"] <= committed_version:
                return _Tail(part=n, first_seq=int(header["first_seq"]), last_seq=int(last["seq"]))  # the usual case
            keep = 0
            first_seq = last_seq = 0
            if header is not None:
                first_seq = int(header["first_seq"])
                keep = raw.index(b"\n") + 1
                last_seq = first_seq - 1
                for entry, end in _entries(raw, path, warn=False):
                    if entry is not None and entry["version"] <= committed_version:
                        keep, last_seq = end, int(entry["seq"])
            if header is None or last_seq < first_seq:
                _unlink(path)  # nothing committed in this part: drop it, the previous part is the tail
                n -= 1
                continue
            if keep < len(raw):
                logger.warning(
                    "conversation %s: trimming %d bytes of an interrupted save from %s",
                    conversation_id,
                    len(raw) - keep,
                    path,
                )
                os.truncate(path, keep)
                self._sync_file(path)
            return _Tail(part=n, first_seq=first_seq, last_seq=last_seq)
        return _Tail(part=0, first_seq=1, last_seq=0)

    def _append_archive(
        self, paths: _Paths, conversation_id: str, tail: _Tail, version: int, messages: builtins.list[dict[str, Any]]
    ) -> None:
        part, first_seq, seq = tail.part, tail.first_seq, tail.last_seq
        buffer: list[str] = []

        def flush() -> None:
            if part and buffer:
                with open(paths.part(part), "a", encoding="utf-8") as fh:
                    fh.write("".join(buffer))
                    self._flush(fh)
                buffer.clear()

        for message in messages:
            if part == 0 or seq - first_seq + 1 >= self._part_size:
                flush()
                previous = paths.part(part).name if part else None
                part, first_seq = part + 1, seq + 1
                header = {
                    "archive_of": conversation_id,
                    "part": part,
                    "first_seq": first_seq,
                    "continued_from": previous,
                    "max_messages": self._part_size,
                }
                buffer.append(json.dumps(header, ensure_ascii=False) + "\n")
            seq += 1
            line = {"seq": seq, "version": version, "message": message}
            buffer.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        flush()

    def _remove_archive(self, paths: _Paths) -> None:
        for path in _existing_parts(paths):
            _unlink(path)

    # --- turn log ---------------------------------------------------------------

    def _log(self, paths: _Paths, conversation_id: str, committed_version: int, encoded: Encoded) -> None:
        """Append the save's new turn records and message ids (before its record is committed); caller holds the
        lock. Runs whenever a log exists, so lines of a save that crashed never outlive the next save."""
        if not (encoded.turns or encoded.replies or paths.log.exists()):
            return
        raw = self._committed_log(paths.log, conversation_id, committed_version)
        view = b"\n" + raw
        keep, version = encoded.retention, encoded.version
        lines: list[str] = []
        if encoded.turns:
            at = view.rfind(_TURN_LINE)
            last = _log_entry(view[at + 1 : view.index(b"\n", at + 1)]) if at >= 0 else None
            for index, text in turns_after(encoded.turns, None if last is None else int(last["turn_index"])):
                lines.append(
                    f'{{"turn_index":{index},"version":{version},"keep":{keep.turn_records},"record":{text}}}\n'
                )
        for message_id, reply in encoded.replies:
            if _reply_token(message_id) not in view:
                lines.append(
                    f'{{"message_id":{_json(message_id)},"version":{version},"keep":{keep.message_ids},'
                    f'"reply":{_json(reply)}}}\n'
                )
        if not lines:
            return
        turns = view.count(_TURN_LINE) + sum(line.startswith('{"turn_index":') for line in lines)
        replies = view.count(_REPLY_LINE) + sum(line.startswith('{"message_id":') for line in lines)
        if turns <= 2 * keep.turn_records and replies <= 2 * keep.message_ids:
            with open(paths.log, "a", encoding="utf-8") as fh:
                fh.write("".join(lines))
                self._flush(fh)
            return
        # Rewritten with what the committed version shows (its newest ``keep`` of each kind), then this save's
        # lines: should the save not commit, its readers still find every entry they keep.
        old_turns, old_replies = _log_entries(raw, committed_version, paths.log)
        kept = [_line(e) for e in old_turns[-keep.turn_records :]] + [
            _line(e) for e in old_replies[-keep.message_ids :]
        ]
        self._write_atomic(paths.log_temp, "".join(kept + lines))
        os.replace(paths.log_temp, paths.log)

    def _committed_log(self, path: Path, conversation_id: str, committed_version: int) -> bytes:
        """The log's bytes after cutting the lines a crashed save left behind (version above the committed one).

        Saves append in version order, so those lines are a tail; the usual case decodes one line to know.
        """
        raw = _read_log(path)
        last = _last_entry_of(raw)
        if not raw or (last is not None and last["version"] <= committed_version):
            return raw
        keep = 0
        for entry, end in _log_lines(raw, path, warn=False):
            if entry is not None and entry["version"] <= committed_version:
                keep = end
        logger.warning(
            "conversation %s: trimming %d bytes of an interrupted save from %s", conversation_id, len(raw) - keep, path
        )
        os.truncate(path, keep)
        self._sync_file(path)
        return raw[:keep]

    def _remove_logs(self, paths: _Paths) -> None:
        for path in (paths.log, paths.log_temp):
            _unlink(path)

    # --- file system --------------------------------------------------------------

    def _write_atomic(self, path: Path, text: str) -> None:
        """Write and flush ``path`` (the caller renames it into place)."""
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
            self._flush(fh)

    def _keep_backup(self, paths: _Paths) -> None:
        """The current record becomes ``.bak`` without the primary ever disappearing."""
        _unlink(paths.backup_temp)
        try:
            os.link(paths.primary, paths.backup_temp)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            self._write_atomic(paths.backup_temp, paths.primary.read_text(encoding="utf-8"))
        os.replace(paths.backup_temp, paths.backup)

    def _flush(self, fh: Any) -> None:
        fh.flush()
        if self._fsync:
            os.fsync(fh.fileno())

    def _sync_file(self, path: Path) -> None:
        if self._fsync:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _sync_directory(self, directory: Path) -> None:
        """Make renames durable: the directory entry is what a rename changes."""
        if not self._fsync:
            return
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _ensure_directory(self, directory: Path) -> None:
        if directory.is_dir():
            return
        directory.mkdir(parents=True, exist_ok=True)
        self._sync_directory(directory.parent)
        self._sync_directory(directory.parent.parent)

    @contextmanager
    def _locked(self, paths: _Paths, *, remove: bool = False) -> Iterator[None]:
        """Exclusive flock on the conversation's lock file, across threads and processes.

        A lock file can be removed by ``delete`` while another process waits on
        it; the waiter then holds a lock on an orphaned inode, so after locking
        we check the path still names the file we locked and start over if not.
        """
        while True:
            fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                mine = os.fstat(fd)
                try:
                    now_there = os.stat(paths.lock)
                except FileNotFoundError:
                    now_there = None
            except BaseException:
                os.close(fd)
                raise
            if now_there is not None and (now_there.st_ino, now_there.st_dev) == (mine.st_ino, mine.st_dev):
                break
            os.close(fd)
        try:
            yield
        finally:
            if remove:
                _unlink(paths.lock)
            os.close(fd)

    @contextmanager
    def _io(self, where: Path) -> Iterator[None]:
        """OS errors (disk full, permissions) become StoreUnavailableError; the record on disk is untouched."""
        try:
            yield
        except OSError as exc:
            raise StoreUnavailableError(f"{where}: {exc}") from exc


# --- helpers ----------------------------------------------------------------------


def _everyone(user_id: str | None, room_id: str | None) -> bool:
    return user_id is None and room_id is None


def _unlink(path: Path) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)


def _subdirs(directory: Path) -> list[Path]:
    try:
        return [p for p in directory.iterdir() if p.is_dir()]
    except FileNotFoundError:
        return []


def _primaries(directory: Path) -> list[Path]:
    """Record files: ``<segment>.json`` where the segment has no dot (recovery records have one)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return [directory / n for n in names if n.endswith(".json") and "." not in n[: -len(".json")]]


_TURN_LINE = b'\n{"turn_index":'
_REPLY_LINE = b'\n{"message_id":'


def _json(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _line(entry: dict[str, Any]) -> str:
    """A log entry as its line again, its key first (what ``_TURN_LINE`` and ``_REPLY_LINE`` look for)."""
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"


def _reply_token(message_id: str) -> bytes:
    """The start of ``message_id``'s line in ``b"\\n" + log`` (``FileStore._log`` writes it in this exact form)."""
    return _REPLY_LINE + f"{_json(message_id)},".encode()


def _read_log(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StoreUnavailableError(f"{path}: {exc}") from exc


def _log_entry(line: bytes) -> dict[str, Any] | None:
    """A log line as a dict when sound (a version, a keep, and a turn index and record or a message id and reply);
    else None."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    if not (isinstance(entry, dict) and isinstance(entry.get("version"), int) and isinstance(entry.get("keep"), int)):
        return None
    turn = isinstance(entry.get("turn_index"), int) and isinstance(entry.get("record"), dict)
    reply = isinstance(entry.get("message_id"), str) and isinstance(entry.get("reply"), str)
    return entry if turn or reply else None


def _last_entry_of(raw: bytes) -> dict[str, Any] | None:
    """The last line of a log when complete and sound; else None."""
    if not raw.endswith(b"\n"):
        return None
    return _log_entry(raw[raw.rfind(b"\n", 0, len(raw) - 1) + 1 : -1])


def _log_lines(raw: bytes, path: Path, *, warn: bool = True) -> Iterator[tuple[dict[str, Any] | None, int]]:
    """(entry, byte offset just after it) for each line; entry None when the line is damaged."""
    start = 0
    while start < len(raw):
        end = raw.find(b"\n", start)
        if end < 0:
            if warn:
                logger.warning("%s: ignoring an unterminated last line (interrupted write)", path)
            yield None, len(raw)
            return
        entry = _log_entry(raw[start:end])
        if entry is None and warn:
            logger.warning("%s: ignoring a damaged line at byte %d", path, start)
        yield entry, end + 1
        start = end + 1


def _log_entries(
    raw: bytes, version: int, path: Path
) -> tuple[builtins.list[dict[str, Any]], builtins.list[dict[str, Any]]]:
    """The committed turn records and replies (version at most ``version``), oldest first, one per turn index (the
    last line: a later one supersedes) and per message id (the first: an id keeps its first reply)."""
    turns: dict[int, dict[str, Any]] = {}
    replies: dict[str, dict[str, Any]] = {}
    for entry, _end in _log_lines(raw, path):
        if entry is None or entry["version"] > version:
            continue
        if "turn_index" in entry:
            turns.pop(entry["turn_index"], None)
            turns[entry["turn_index"]] = entry
        else:
            replies.setdefault(entry["message_id"], entry)
    return builtins.list(turns.values()), builtins.list(replies.values())


def _kept(entries: builtins.list[dict[str, Any]]) -> builtins.list[dict[str, Any]]:
    """The newest entries, as many as the last one says (the log is compacted only now and then)."""
    return entries[-entries[-1]["keep"] :] if entries else entries


def _find_reply(raw: bytes, message_id: str, version: int) -> str | None:
    """The reply logged for ``message_id`` when it is committed and among the ids kept; else None.

    Two lines are decoded, not the log: an id has one line, and how many reply lines follow says whether it is kept.
    """
    view = b"\n" + raw
    at = view.find(_reply_token(message_id))
    end = view.find(b"\n", at + 1)
    if at < 0 or end < 0:
        return None
    entry = _log_entry(view[at + 1 : end])
    if entry is None or entry["version"] > version or entry.get("message_id") != message_id:
        return None
    last_at = view.rfind(_REPLY_LINE)
    last = _log_entry(view[last_at + 1 : view.find(b"\n", last_at + 1)]) or entry
    return str(entry["reply"]) if view.count(_REPLY_LINE, end) < last["keep"] else None


def _last_part(paths: _Paths) -> int:
    n = 0
    while paths.part(n + 1).exists():
        n += 1
    return n


def _existing_parts(paths: _Paths) -> list[Path]:
    return [paths.part(n) for n in range(1, _last_part(paths) + 1)]


def _header(raw: bytes) -> dict[str, Any] | None:
    end = raw.find(b"\n")
    if end < 0:
        return None
    try:
        header = json.loads(raw[:end])
    except ValueError:
        return None
    if not isinstance(header, dict) or not isinstance(header.get("first_seq"), int):
        return None
    return header


def _last_entry(raw: bytes) -> dict[str, Any] | None:
    """The last message line when it is complete and sound (the header is not an entry); else None."""
    if not raw.endswith(b"\n"):
        return None
    start = raw.rfind(b"\n", 0, len(raw) - 1) + 1
    if start == 0:
        return None
    try:
        entry = json.loads(raw[start:-1])
    except ValueError:
        return None
    if (
        isinstance(entry, dict)
        and all(isinstance(entry.get(k), int) for k in ("seq", "version"))
        and isinstance(entry.get("message"), dict)
    ):
        return entry
    return None


def _entries(raw: bytes, path: Path, *, warn: bool = True) -> Iterator[tuple[dict[str, Any] | None, int]]:
    """(entry, byte offset just after it) for each message line; entry None when the line is damaged."""
    start = raw.find(b"\n") + 1
    if start == 0:
        return
    while start < len(raw):
        end = raw.find(b"\n", start)
        if end < 0:
            if warn:
                logger.warning("%s: ignoring an unterminated last line (interrupted write)", path)
            yield None, len(raw)
            return
        line = raw[start:end]
        entry: dict[str, Any] | None
        try:
            entry = json.loads(line)
            if not (
                isinstance(entry, dict)
                and isinstance(entry.get("version"), int)
                and isinstance(entry.get("seq"), int)
                and isinstance(entry.get("message"), dict)
            ):
                raise ValueError("not an archive entry")
        except ValueError:
            if warn:
                logger.warning("%s: ignoring a damaged archive line at byte %d", path, start)
            entry = None
        yield entry, end + 1
        start = end + 1


__all__ = ["DEFAULT_ARCHIVE_PART_SIZE", "FileStore", "segment", "unsegment"]
