"""Enum values and indifference in people's words: mentions, close spellings, "I don't mind".

Three finders the engine (normalising, grounding) and its extractors share:

- ``enum_mentions``: every enum value or synonym a message mentions, with its span. Word-bounded (``pho`` is
  not in "photo"), case-, accent- and spacing-folded ("creme   brulee" is "Crème brûlée"), longest first and
  non-overlapping ("fish and chips" is not "fish"), and, when the key declares ``fuzzy``, misspelt
  ("vietnamesse"). It runs on every user turn: each declaration's table (one compiled pattern, the fuzzy
  choices) is built once, and each message is searched once per table.
- ``closest_values``: the values a model's misspelt spelling is close to (``fuzzy``): one is a match, two or
  more a question ("medium-large or medium-small?"), none a refusal.
- ``dontcare_in``: expressions of indifference ("any time is fine", "I don't mind", "no preference"), which alone
  ground SGD's value ``dontcare`` (a model must not decide for the user that they have no preference).

Fuzzy matching uses rapidfuzz (imported on first use; an optional extra, checked when a declaration is loaded).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_fsm.definition._keys import KeyDeclaration, fold
from llm_fsm.definition._spoken import Found

if TYPE_CHECKING:
    from collections.abc import Sequence

DONTCARE = "dontcare"
"""The value of a key whose user has no preference (SGD's spelling); a key declaring ``dontcare`` may take it."""

CLEAR_MARGIN = 3.0
"""How much closer (rapidfuzz's 0-100 similarity) the best value must be than the next to be clearly the one
meant: "medium" is as close to "medium-large" as to "medium-small", and a guess between them would be silent."""

CACHE_SIZE = 4096
"""Messages whose mentions are kept per table (a turn searches the same messages for several keys)."""

_WORD = re.compile(r"\w+(?:['’.\-]\w+)*")


def fold_accents(text: str) -> str:
    """``fold`` with accents removed: "Crème  Brûlée" and "creme brulee" are one spelling."""
    decomposed = unicodedata.normalize("NFKD", text)
    return fold("".join(c for c in decomposed if not unicodedata.combining(c)))


def _folded_with_positions(text: str) -> tuple[str, Sequence[int]]:
    """The text case- and accent-folded (spacing kept), and for each folded character its index in ``text``."""
    if text.isascii():  # the usual message: one character each, folded by lower()
        return text.lower(), range(len(text))
    chars: list[str] = []
    positions: list[int] = []
    for index, char in enumerate(text):
        decomposed = unicodedata.normalize("NFKD", char)
        for piece in "".join(c for c in decomposed if not unicodedata.combining(c)).casefold():
            chars.append(piece)
            positions.append(index)
    return "".join(chars), positions


@dataclass(frozen=True, eq=False)
class _Table:
    """A declaration's spellings prepared for searching: built once per declaration's values (``_table``)."""

    canonical: dict[str, Any]
    """folded spelling -> the value it names (enum values first, then synonyms)"""
    pattern: re.Pattern[str] | None
    fuzzy: float | None
    by_length: dict[int, tuple[str, ...]]
    """folded spellings by their number of words (a fuzzy mention is compared with spellings as long as it)"""
    spans: dict[int, tuple[int, int]]
    """the shortest and longest of those spellings, in characters"""


def _signature(declaration: KeyDeclaration) -> tuple[tuple[tuple[str, Hashable], ...], float | None] | None:
    pairs: list[tuple[str, Hashable]] = [(v, v) for v in declaration.enum or () if isinstance(v, str)]
    pairs += [(a, v) for a, v in (declaration.synonyms or {}).items() if isinstance(v, Hashable)]
    if declaration.enum is None:  # free text: the values the aliases stand for are spellings of themselves
        pairs += [(v, v) for v in (declaration.synonyms or {}).values() if isinstance(v, str)]
    return (tuple(pairs), declaration.fuzzy) if pairs else None


@functools.lru_cache(maxsize=256)
def _build(pairs: tuple[tuple[str, Hashable], ...], fuzzy: float | None) -> _Table:
    canonical: dict[str, Any] = {}
    for spelling, value in pairs:
        folded = fold_accents(spelling)
        if folded:
            canonical.setdefault(folded, value)
    alternatives = sorted(canonical, key=len, reverse=True)  # at one position the longest spelling wins
    body = "|".join(r"\s+".join(map(re.escape, spelling.split())) for spelling in alternatives)
    by_length: dict[int, list[str]] = {}
    for spelling in canonical:
        by_length.setdefault(len(spelling.split()), []).append(spelling)
    return _Table(
        canonical=canonical,
        pattern=re.compile(rf"(?<!\w)(?:{body})(?!\w)") if body else None,
        fuzzy=fuzzy,
        by_length={n: tuple(spellings) for n, spellings in by_length.items()},
        spans={n: (min(map(len, spellings)), max(map(len, spellings))) for n, spellings in by_length.items()},
    )


_TABLES: dict[int, tuple[KeyDeclaration, _Table | None]] = {}


def _table(declaration: KeyDeclaration) -> _Table | None:
    """The declaration's table, found by identity first: hashing its spellings on every call took ~50 µs for a
    city slot's hundred aliases, a quarter of a turn's extraction budget. Declarations live as long as their
    definition; the few kept here are those in use (a changed one builds its table anew)."""
    held = _TABLES.get(id(declaration))
    if held is not None and held[0] is declaration:
        return held[1]
    signature = _signature(declaration)
    table = None if signature is None else _build(*signature)
    if len(_TABLES) >= CACHE_SIZE:
        _TABLES.clear()
    _TABLES[id(declaration)] = (declaration, table)
    return table


MIN_FUZZY_CHARS = 4
"""Shorter words are not read as misspellings: "in" is 80 % like "inn", "at" 80 % like "art"."""


@functools.cache
def _rapidfuzz() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """rapidfuzz's ratio and extract, imported on first use (an optional extra; ``import llm_fsm`` stays light)."""
    from rapidfuzz import fuzz, process

    return fuzz.ratio, process.extract


def _scores(table: _Table, folded: str, choices: Sequence[str]) -> dict[Any, float]:
    """The best similarity of ``folded`` to each value (through any of its spellings), those above the threshold."""
    assert table.fuzzy is not None
    best: dict[Any, float] = {}
    if len(folded) < MIN_FUZZY_CHARS:
        return best
    ratio, extract = _rapidfuzz()
    for spelling, score, _ in extract(folded, choices, scorer=ratio, score_cutoff=table.fuzzy * 100, limit=None):
        value = table.canonical[spelling]
        best[value] = max(score, best.get(value, 0.0))
    return best


def _clear(best: dict[Any, float]) -> tuple[Any, ...]:
    """The value clearly closest, alone; or the values tied for closest; or nothing."""
    if not best:
        return ()
    top = max(best.values())
    return tuple(value for value, score in best.items() if score >= top - CLEAR_MARGIN)


def closest_values(declaration: KeyDeclaration, text: str) -> tuple[Any, ...]:
    """The values a spelling names: by their folded spelling exactly, else (``fuzzy``) the clearly closest one,
    or every value tied for closest (a question for the user); () when none is close enough."""
    table = _table(declaration)
    if table is None:
        return ()
    folded = fold_accents(text)
    if folded in table.canonical:
        return (table.canonical[folded],)
    if table.fuzzy is None or not folded:
        return ()
    return _clear(_scores(table, folded, tuple(table.canonical)))


def enum_mentions(declaration: KeyDeclaration, text: str) -> tuple[Found, ...]:
    """Every enum value or synonym ``text`` mentions, in order, with its span (``Found.value`` is the value).

    A misspelt mention (``fuzzy``) as close to two values is found as both, at one span: the caller asks which.
    """
    table = _table(declaration)
    if table is None or not text:
        return ()
    return _mentions(table, text)


def sole_mentions(declaration: KeyDeclaration, text: str) -> tuple[Found, ...]:
    """``enum_mentions`` but for spans as close to two values: those are a question, not an answer."""
    found = enum_mentions(declaration, text)
    spans = [(f.start, f.end) for f in found]
    return tuple(f for f in found if spans.count((f.start, f.end)) == 1)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _mentions(table: _Table, text: str) -> tuple[Found, ...]:
    folded, positions = _folded_with_positions(text)
    found: list[Found] = []
    taken: list[tuple[int, int]] = []
    if table.pattern is not None:
        for match in table.pattern.finditer(folded):
            start, end = positions[match.start()], positions[match.end() - 1] + 1
            key = " ".join(match.group().split())
            found.append(Found(table.canonical[key], start, end, text[start:end]))
            taken.append((match.start(), match.end()))
    if table.fuzzy is not None:
        found += _fuzzy_mentions(table, text, folded, positions, taken)
    return tuple(sorted(found, key=lambda f: (f.start, f.end)))


def _ngrams(folded: str, lengths: Sequence[int]) -> Iterator[tuple[int, int, str]]:
    words = [(m.start(), m.end()) for m in _WORD.finditer(folded)]
    for n in lengths:
        for i in range(len(words) - n + 1):
            start, end = words[i][0], words[i + n - 1][1]
            yield start, end, " ".join(folded[start:end].split())


def _may_reach(threshold: float, size: int, span: tuple[int, int]) -> bool:
    """Whether a text of ``size`` characters may be that similar to a spelling ``span`` long (shortest, longest):
    ratio is at most 2·min/(sum) of the lengths, so most of a message's word runs are skipped unscored."""
    nearest = min(max(size, span[0]), span[1])
    return 2 * min(size, nearest) >= threshold * (size + nearest)


def _fuzzy_mentions(
    table: _Table, text: str, folded: str, positions: Sequence[int], taken: list[tuple[int, int]]
) -> list[Found]:
    """Misspelt mentions outside the exact ones: word n-grams as long as some spelling, the closest first."""
    candidates: list[tuple[float, int, int, tuple[Any, ...]]] = []
    assert table.fuzzy is not None
    for start, end, gram in _ngrams(folded, sorted(table.by_length)):
        if any(start < b and a < end for a, b in taken):
            continue
        words = len(gram.split())
        if not _may_reach(table.fuzzy, len(gram), table.spans[words]):
            continue
        best = _scores(table, gram, table.by_length[words])
        values = _clear(best)
        if values:
            candidates.append((max(best.values()), start, end, values))
    found: list[Found] = []
    for _score, start, end, values in sorted(candidates, key=lambda c: (-c[0], c[1])):
        if any(start < b and a < end for a, b in taken):
            continue
        taken.append((start, end))
        first, last = positions[start], positions[end - 1] + 1
        found += [Found(value, first, last, text[first:last]) for value in values]
    return found


# --- indifference -------------------------------------------------------------------------------------

_Q = r"['’]"
_FINE = r"(?:fine|ok|okay|good|great|alright|all\s+right|perfect|acceptable)"
_BE = rf"(?:is|are|will\s+be|would\s+be|should\s+be|works?|will\s+do|{_Q}s)"
_ANY_THING = (
    r"(?:time|day|date|days|dates|price(?:\s+range)?|price\s+point|category|cuisine|kind|type|sort|place|city|"
    r"location|area|one|ones|of\s+them|genre|number|seat|class|airline|company|restaurant|event|option)"
)
_DONTCARE_PATTERNS = (
    # "any time is fine", "either is ok", "anything works": the longest form first, so it is the span found
    rf"(?:either|any|anything|anywhere|anyone|any\s+{_ANY_THING}|either\s+one)\s+{_BE}(?:\s+(?:just\s+)?{_FINE})?",
    rf"(?:(?:i|we){_Q}?(?:m|re)?\s+)?(?:fine|happy|ok|okay|good)\s+with\s+(?:anything|either|whatever|any\s+\w+)",
    rf"(?:(?:i|we)\s+)?(?:do\s*n{_Q}?t|do\s+not)\s+(?:really\s+)?(?:mind|care|have\s+(?:a|any)\s+preferences?)",
    rf"(?:it\s+)?(?:does\s*n{_Q}?t|does\s+not)\s+(?:really\s+)?(?:matter|make\s+(?:a|any)\s+difference)",
    r"(?:it\s+)?makes\s+no\s+difference",
    r"no\s+(?:real\s+|particular\s+)?preferences?",
    r"not\s+(?:really\s+)?(?:picky|fussy|particular)",
    rf"(?:it{_Q}?s\s+)?up\s+to\s+you",
    r"(?:i{_Q}?m\s+)?flexible",
    r"(?:i{_Q}?m|i\s+am|we{_Q}?re|we\s+are)\s+easy(?:\s+(?:on|about|with)\s+(?:the\s+)?\w+(?:\s+range)?)?",
    r"surprise\s+me",
    r"whatever(?:\s+(?:works|you\s+(?:like|want|think|recommend|suggest)))?",
    rf"any\s+{_ANY_THING}",
    r"anything(?=\s*(?:[.!?,;]|$))",
)


@functools.cache
def _dontcare_pattern() -> re.Pattern[str]:
    """Compiled on first use, like the expression finders' patterns (importing the engine stays cheap)."""
    body = "|".join(_DONTCARE_PATTERNS).replace("{_Q}", _Q)
    return re.compile(rf"(?<!\w)(?:{body})(?!\w)", re.IGNORECASE)


@functools.lru_cache(maxsize=CACHE_SIZE)
def dontcare_in(text: str) -> tuple[Found, ...]:
    """Every expression of indifference in ``text`` ("I don't mind", "any day is fine"), each as ``DONTCARE``."""
    return tuple(Found(DONTCARE, m.start(), m.end(), m.group()) for m in _dontcare_pattern().finditer(text))


__all__ = [
    "CLEAR_MARGIN",
    "DONTCARE",
    "closest_values",
    "dontcare_in",
    "enum_mentions",
    "fold_accents",
    "sole_mentions",
]
