"""Which known name (a declared key, a state) another name is a likely misspelling of, for the "did you mean"
hints of FSM030, FSM032 and the action checks. An index answers, so a hint costs the same however many names
there are."""

from __future__ import annotations

import re
from collections.abc import Iterator

#: longer names are not compared for spelling mistakes (the single-deletion index grows with the square of a name)
_MAX_TYPO_LENGTH = 64
#: entries of the single-deletion index; past it, names are compared only with case and separators ignored
_MAX_TYPO_INDEX = 100_000


class _Typos:
    """Declared names another name is a likely misspelling of: the same once case, ``_``, ``-`` and spaces are
    ignored, or (names of 4 characters or more) one insertion, deletion, substitution or swap away, digits equal.

    A single-deletion index (each name and every name with one character deleted) answers in O(len(name)),
    however many keys are declared; it is bounded (``_MAX_TYPO_INDEX``), so a file declaring a great many keys
    has only its first ones compared edit by edit."""

    def __init__(self, names: list[str]) -> None:
        self.folded: dict[str, str] = {}
        self.index: dict[str, str] = {}
        for name in names:
            folded = _fold(name)
            self.folded.setdefault(folded, name)
            if 4 <= len(folded) <= _MAX_TYPO_LENGTH and len(self.index) < _MAX_TYPO_INDEX:
                for variant in (folded, *_deletions(folded)):
                    self.index.setdefault(variant, name)

    def near(self, name: str) -> str | None:
        folded = _fold(name)
        match = self.folded.get(folded)
        if match is not None:
            return match if match != name else None
        if not 4 <= len(folded) <= _MAX_TYPO_LENGTH:
            return None
        for variant in (folded, *_deletions(folded)):
            match = self.index.get(variant)
            if match is not None and _digits(match) == _digits(name) and len(_fold(match)) >= 4:
                return match
        return None


def _fold(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.casefold())


def _digits(name: str) -> str:
    return "".join(c for c in name if c.isdigit())


def _deletions(text: str) -> Iterator[str]:
    return (text[:i] + text[i + 1 :] for i in range(len(text)))
