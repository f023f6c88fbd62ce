"""``FileStore``: the protocol over the record files, its backup and recovery, the archive and the turn log."""

from __future__ import annotations

import builtins
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import (
    ConcurrentUpdateError,
    StoreCorruptedError,
    StoreError,
    StoreUnavailableError,
)
from llm_fsm.stores._paging import ConversationPage, check_limit, decode_cursor, page_of
from llm_fsm.stores.base import AsyncStoreMixin, ConversationSummary, Retention
from llm_fsm.stores.codec import (
    DEFAULT_MAX_RECORD_BYTES,
    SizeLimits,
    committed,
    decode,
    decode_turn,
    encode,
    for_turn,
    not_found,
    owned_by,
    summary_of,
    with_log,
)
from llm_fsm.stores.files._archive import DEFAULT_ARCHIVE_PART_SIZE, _Archive, _entries, _existing_parts
from llm_fsm.stores.files._durable import _unlink
from llm_fsm.stores.files._log import RECORD_TEXT, _find_reply, _kept, _log_entries, _read_log, _TurnLog
from llm_fsm.stores.files._paths import _Paths, segment, unsegment
from llm_fsm.stores.files._timers import _TimerIndex
from llm_fsm.stores.files._versions import _DefinitionVersions

logger = logging.getLogger("llm_fsm.stores.files")  # the name it had as one module: logging configs name it


class FileStore(_Archive, _TurnLog, _DefinitionVersions, _TimerIndex, AsyncStoreMixin):
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
            [decode_turn(e.get(RECORD_TEXT, e["record"]), where=where) for e in _kept(turns)],
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
                arming = self._arm(paths, instance, created=expected_version is None)
                self._write_atomic(paths.temp, encoded.record)
                if paths.primary.exists():
                    if primary_ok:
                        self._keep_backup(paths)
                    else:
                        os.replace(paths.primary, paths.corrupt)  # keep the good .bak; keep the bad file for forensics
                os.replace(paths.temp, paths.primary)
                self._sync_directory(paths.directory)
                self._unarm(paths, arming)
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
        owner = None if _everyone(user_id, room_id) else (user_id, room_id)
        return sorted(self._summaries(directories, owner), key=lambda s: s.updated_at, reverse=True)

    def list_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        """A page read from the records of the scope's folders (the store keeps no index: a listing reads every
        record of its scope, and a user's listing reads only that user's folder)."""
        check_limit(limit)
        if cursor is not None:
            decode_cursor(cursor)  # refused before the scan
        if not all_rooms:
            return page_of(self.list(user_id=user_id, room_id=room_id), limit, cursor)
        directories = _subdirs(self.root / segment(user_id))
        found = [s for s in self._summaries(directories, None) if s.user_id == user_id]
        return page_of(found, limit, cursor)

    def _summaries(
        self, directories: builtins.list[Path], owner: tuple[str | None, str | None] | None
    ) -> builtins.list[ConversationSummary]:
        summaries: list[ConversationSummary] = []
        for directory in directories:
            for primary in _primaries(directory):
                instance = self._read_listed(directory, primary)
                if instance is None:
                    continue
                if owner is not None and not owned_by(instance, *owner):
                    continue
                summaries.append(summary_of(instance))
        return summaries

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
        _unlink(paths.timers)
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


def _everyone(user_id: str | None, room_id: str | None) -> bool:
    return user_id is None and room_id is None


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
