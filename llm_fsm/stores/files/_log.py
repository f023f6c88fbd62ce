"""The turn log: one JSONL file of turn records and answered message ids, appended by each save and compacted
when a kind holds more than twice what it keeps."""

from __future__ import annotations

import builtins
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llm_fsm.errors import StoreUnavailableError
from llm_fsm.stores.codec import Encoded, turns_after
from llm_fsm.stores.files._durable import _Durable, _unlink
from llm_fsm.stores.files._paths import _Paths

logger = logging.getLogger("llm_fsm.stores.files")  # the name it had as one module: logging configs name it


class _TurnLog(_Durable):
    """The turn-log half of ``FileStore``'s save; the caller holds the conversation's lock."""

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


_TURN_LINE = b'\n{"turn_index":'
_REPLY_LINE = b'\n{"message_id":'


def _json(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _line(entry: dict[str, Any]) -> str:
    """A log entry as its line again, its key first (what ``_TURN_LINE`` and ``_REPLY_LINE`` look for); a turn's
    record exactly as it was read (``RECORD_TEXT``)."""
    text = entry.get(RECORD_TEXT)
    if isinstance(text, str):
        head = {key: value for key, value in entry.items() if key not in ("record", RECORD_TEXT)}
        return json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1] + f',"record":{text}}}\n'
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
    if turn:
        text = _record_text(line)
        if text is not None:
            entry[RECORD_TEXT] = text
    return entry if turn or reply else None


RECORD_TEXT = "_record_text"
"""Where a turn entry keeps its record's text as the line holds it, byte for byte: the record's hash chain covers its
stored bytes (``engine._chain``), so the record is decoded from, and rewritten as, exactly these."""


def _record_text(line: bytes) -> str | None:
    """The record's text in a turn line, which ``FileStore._log`` writes last, as ``"record":<text>}``."""
    at = line.find(b',"record":')
    if at < 0 or not line.endswith(b"}"):
        return None
    return line[at + len(b',"record":') : -1].decode("utf-8", "replace")


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
