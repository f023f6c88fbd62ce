"""The file store's timer index (``TimerStore``): beside each record that arms timers, ``<id>.timers.json`` lists
them with the claim holding each.

Correct and simple rather than fast: there is no global index, so a claim reads every ``*.timers.json`` of the
store (one small file per conversation that arms timers, never a record) and ``timer_count`` does too: the cost of a
claim grows with the conversations that arm timers, fine for the thousands a file store is for; past that, use
SQLite. Claimers take ``timers.lock`` at the root in turn, and each entry is claimed and released under its
conversation's lock, the one its saves take, so a claim never meets half a save.

Crash rule: the record is the truth, and the index may hold more than it but never less. A save that arms new timers
writes them (beside the ones it drops) before it replaces the record, and drops the old ones after; a crash in
between leaves entries the record no longer arms, which the firing worker finds stale and releases.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.stores.base import DueTimer
from llm_fsm.stores.files._durable import _Durable, _unlink
from llm_fsm.stores.files._paths import _Paths, owner_of, segment, unsegment

TIMERS_SUFFIX = ".timers.json"
CLAIMS = "timers"
"""Claimers take turns on ``<root>/timers.lock``: a dotted name, which no user's folder has."""

_SEGMENT = re.compile(r"[A-Za-z0-9_%-]+")
"""What ``segment`` makes of an id: never ``.`` or ``..``, never a separator."""

_Entry = dict[str, Any]
"""``{"id", "due_at", "token", "until"}``: an armed timer and the claim holding it (``token`` None: none)."""

_Arming = tuple[list[_Entry], list[_Entry]]
"""A save's entries: those the file holds before its record is committed, and those it holds after."""


class _TimerIndex(_Durable):
    """``TimerStore`` for ``FileStore``; the save calls ``_arm`` and ``_unarm`` with the conversation's lock held."""

    root: Path

    def _paths(self, conversation_id: str, user_id: str | None, room_id: str | None) -> _Paths:
        raise NotImplementedError  # pragma: no cover - FileStore's

    def _arm(self, paths: _Paths, instance: FSMInstance, *, created: bool) -> _Arming:
        """Before the record is replaced: add the entries of newly armed timers (the old ones stay until ``_unarm``).

        Returns what the index holds now and what it is to hold once the record is committed (an entry kept with the
        same due time keeps its claim; a changed due time is a new entry). ``created``: a new conversation, whose
        leftovers (of an interrupted delete) are not its own.
        """
        old = _read(paths.timers)
        held = [] if created else old
        by_key = {(e["id"], e["due_at"]): e for e in held}
        new = [by_key.get((t.id, t.due_at)) or _entry(t.id, t.due_at) for t in instance.timers]
        added = [e for e in new if (e["id"], e["due_at"]) not in by_key]
        if added or held != old:
            held = held + added
            self._write_entries(paths, held)
        return held, new

    def _unarm(self, paths: _Paths, arming: _Arming) -> None:
        """After the record is committed: the index holds exactly the entries its armed timers make."""
        held, new = arming
        if held != new:
            self._write_entries(paths, new)

    def claim_due_timers(self, *, now: float, limit: int, lease: float) -> builtins.list[DueTimer]:
        if limit <= 0:
            return []
        with self._io(self.root), self._locked(_Paths(self.root, CLAIMS)):
            due = sorted(
                (entry["due_at"], unsegment(path.name[: -len(TIMERS_SUFFIX)]), entry["id"], path)
                for path in _timer_files(self.root)
                for entry in _read(path)
                if entry["due_at"] <= now and (entry["token"] is None or entry["until"] <= now)
            )[:limit]
            claimed: list[DueTimer] = []
            for path in sorted({p for *_, p in due}):
                paths = _Paths(path.parent, path.name[: -len(TIMERS_SUFFIX)])
                wanted = {timer_id for _, _, timer_id, p in due if p == path}
                token = f"{uuid.uuid4().hex}@{path.parent.parent.name}/{path.parent.name}"
                with self._locked(paths):  # a save may have changed them since the look
                    entries = _read(path)
                    for entry in entries:
                        free = entry["token"] is None or entry["until"] <= now
                        if entry["id"] in wanted and entry["due_at"] <= now and free:
                            entry["token"], entry["until"] = token, now + lease
                            owner = owner_of(path.parent.parent.name), owner_of(path.parent.name)
                            claimed.append(DueTimer(unsegment(paths.base), entry["id"], entry["due_at"], token, *owner))
                    if any(t.token == token for t in claimed):
                        self._write_entries(paths, entries)
        return sorted(claimed, key=lambda t: (t.due_at, t.conversation_id, t.timer_id))

    def release_timer(self, timer: DueTimer) -> None:
        _, _, folders = timer.token.partition("@")
        user, _, room = folders.partition("/")
        if not (_SEGMENT.fullmatch(user) and _SEGMENT.fullmatch(room)):
            return  # no claim of this store's gave that token (and no path outside the root is ever touched)
        paths = _Paths(self.root / user / room, segment(timer.conversation_id))
        with self._io(paths.timers):
            if not paths.timers.exists():
                return
            with self._locked(paths):
                entries = _read(paths.timers)
                kept = [e for e in entries if not (e["id"] == timer.timer_id and e["token"] == timer.token)]
                if kept != entries:
                    self._write_entries(paths, kept)

    def timer_count(self) -> int:
        with self._io(self.root):
            return sum(len(_read(path)) for path in _timer_files(self.root))

    def _write_entries(self, paths: _Paths, entries: builtins.list[_Entry]) -> None:
        if not entries:
            _unlink(paths.timers)
            return
        self._write_atomic(paths.timers_temp, json.dumps(entries))
        os.replace(paths.timers_temp, paths.timers)


def _entry(timer_id: str, due_at: float) -> _Entry:
    return {"id": timer_id, "due_at": due_at, "token": None, "until": 0.0}


def _read(path: Path) -> builtins.list[_Entry]:
    """The entries of one conversation; none when the file is absent (or unreadable: written whole and renamed into
    place, it is never torn, so only a damaged disk makes one)."""
    try:
        entries = json.loads(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _timer_files(root: Path) -> builtins.list[Path]:
    """Every conversation's timers file: ``<root>/<user>/<room>/<id>.timers.json``."""
    found: list[Path] = []
    for user in _folders(root):
        for room in _folders(user):
            try:
                found += [room / name for name in os.listdir(room) if name.endswith(TIMERS_SUFFIX)]
            except FileNotFoundError:
                continue
    return found


def _folders(directory: Path) -> builtins.list[Path]:
    try:
        return [p for p in directory.iterdir() if p.is_dir()]
    except FileNotFoundError:
        return []
