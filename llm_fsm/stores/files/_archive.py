"""The archived transcript: linked JSONL parts whose lines carry the version of the save that wrote them, so lines
of a save that crashed are ignored by readers and trimmed by the next save."""

from __future__ import annotations

import builtins
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_fsm.stores.files._durable import _Durable, _unlink
from llm_fsm.stores.files._paths import _Paths

logger = logging.getLogger("llm_fsm.stores.files")  # the name it had as one module: logging configs name it

DEFAULT_ARCHIVE_PART_SIZE = 500
"""Messages per archive part file before a continuation part is started."""


@dataclass
class _Tail:
    """What a save needs to know about the archive: the last part, its first and last sequence numbers."""

    part: int  # 0: no archive yet
    first_seq: int
    last_seq: int


class _Archive(_Durable):
    """The archive half of ``FileStore``'s save; the caller holds the conversation's lock."""

    _part_size: int

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
