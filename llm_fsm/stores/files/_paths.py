"""Where each file of a conversation lives: ids escaped into safe file names, one directory per user and room."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

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


def owner_of(text: str) -> str | None:
    """A user or room directory's name back to the id (``_`` is None): the inverse of ``segment``."""
    return None if text == "_" else unsegment(text)


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

    @property
    def timers(self) -> Path:
        return self.directory / f"{self.base}.timers.json"

    @property
    def timers_temp(self) -> Path:
        return self.directory / f"{self.base}.timers.json.tmp"
