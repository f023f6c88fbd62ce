"""Candidate values of a declared key found in a message, one finder per kind of value, each with its span.

The engine's extractors (``llm_fsm.engine._extract``) ask "what in this message could be this key's value?".
Each kind has one finder returning ``Found`` (value, start, end, text), the shape grounding's finders share:

- ``date``: every date expression, read as ``date_readings`` reads a whole value (a date without a year is the next
  one on or after today; "next Friday" on a Monday keeps both its readings, so it asks instead of guessing);
- ``time``: every time expression ("at 7" is 07:00 and 19:00: two candidates, so it asks);
- ``number``: numbers in digits or words, except those inside a date, a time, a phone number or an email address
  (the 12 of "March 12th", the 7 of "7 pm") and "one" used as a pronoun ("that one", "one of them");
- ``phone`` (a key with a ``region``) and ``email``: what libphonenumber's matcher and ``emails_in`` find;
- ``enum``: a word-bounded mention of an enum value or a synonym, in the declared spelling. A yes/no word
  ("yes", "sure", "no") is not a mention: it answers whatever was asked last, and nothing here knows what that
  was. A number among the values follows the number rule (the 2 of "2 pm" is no 2).

Pure: the text and the conversation's date in, candidates out; the finders of ``_spoken`` cache per text.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable

from llm_fsm.definition._email import emails_in
from llm_fsm.definition._enums import dontcare_in, enum_mentions
from llm_fsm.definition._keys import KeyDeclaration, fold
from llm_fsm.definition._phone import phones_in
from llm_fsm.definition._spoken import (
    NUMBER_WORDS,
    Found,
    Order,
    date_readings,
    dates_in,
    missing_day,
    numbers_in,
    times_in,
)

Finder = Callable[[str, KeyDeclaration, "dt.date | None"], tuple[Found, ...]]

_YES_NO = frozenset(
    {"yes", "y", "yeah", "yep", "yup", "sure", "ok", "okay", "correct", "right", "no", "n", "nope", "nah", "wrong"}
)
# vague words that name no value: "is there anything else?", "any bus" ask for none (a "don't care" is said so)
_VAGUE = frozenset({"any", "anything", "whatever", "either", "all", "none", "some", "something"})
_PHONE = re.compile(r"(?<![\w+])\+?\(?\d[\d ().\-]{5,}\d(?!\w)")
_EMAIL = re.compile(r"[\w.%+'\-]+@[\w\-]+(?:\.[\w\-]+)+")
_NEGATED = re.compile(
    r"\b(?:not|no|don'?t|do\s+not|doesn'?t|does\s+not|without|never|nothing|isn'?t|aren'?t)\s+(?:[\w-]+\s+){0,2}$",
    re.IGNORECASE,
)
_RANGE_END = re.compile(r"\s*(?:-|–|to|through|until|till)\s*(?:the\s+)?\d", re.IGNORECASE)
_POLAR = re.compile(
    r"(?:^|\band\s+|,\s*)(?:do|does|did|is|are|was|were|has|have|had)\s+(?:there|they|their|it|its|the|you|we|this|that)\b"
    r"|^\s*how\s+(?!about\b)\w+",
    re.IGNORECASE,
)
_PRONOUN_ONE = re.compile(
    r"(?:\b(?:that|this|the|which|any|no|every|each|another|other|last|first|next|right|good|new|only|same|me|us)\s+$)",
    re.IGNORECASE,
)
_ONE_OF = re.compile(r"^\s+(?:of|more|another|way)\b", re.IGNORECASE)
_LAST_WORD = re.compile(r"(\w+)\W*$")
_COUNTED_ALONE = frozenset({"for", "just", "only", "of", "is", "be", "are"})


def _phone_spans(text: str) -> list[tuple[int, int]]:
    """Runs of at least seven digits with the separators phone numbers are written with."""
    return [m.span() for m in _PHONE.finditer(text) if sum(c.isdigit() for c in m[0]) >= 7]


def _spans(found: tuple[Found, ...]) -> list[tuple[int, int]]:
    return [(f.start, f.end) for f in found]


def _overlaps(start: int, end: int, spans: list[tuple[int, int]]) -> bool:
    return any(start < other_end and other_start < end for other_start, other_end in spans)


def date_candidates(text: str, declaration: KeyDeclaration, today: dt.date | None) -> tuple[Found, ...]:
    """Each date expression with the dates it is read as (``date_readings``: the rule a whole value follows); the
    first day of a range ("March 10-15") is none."""
    out: list[Found] = []
    order, window = declaration.date_order, declaration.window
    for start, end in dict.fromkeys(_spans(dates_in(text, today, order, window))):
        if _RANGE_END.match(text, end):
            continue  # "March 10-15", "the 3rd to the 5th": a range is no one date
        said = text[start:end]
        out += [Found(value, start, end, said) for value in date_readings(said, today, order, window)]
    return tuple(out)


_WORD_RUN = re.compile(r"[^\s,;!?]+")


def impossible_date(text: str, order: Order = None) -> str | None:
    """Why a date the message says names no day ("'February 30th': February has 28 or 29 days"), or None.

    Read over runs of one to four words, the shortest first, as a whole value is (``missing_day``): no finder
    reports a date that does not exist, and the user who wrote one is told so instead of hearing nothing."""
    if not any(c.isdigit() for c in text):
        return None
    words = list(_WORD_RUN.finditer(text))
    for size in (1, 2, 3, 4):
        for first in range(len(words) - size + 1):
            said = text[words[first].start() : words[first + size - 1].end()].rstrip(".")
            why = missing_day(said, order)
            if why is not None:
                return f"{said!r}: {why}"
    return None


def time_candidates(text: str, declaration: KeyDeclaration, today: dt.date | None) -> tuple[Found, ...]:
    """Each time expression with the times it may be ("at 7": 07:00 and 19:00)."""
    return times_in(text)


@functools.lru_cache(maxsize=1024)
def _numbers(text: str, today: dt.date | None) -> tuple[Found, ...]:
    taken = _spans(dates_in(text, today)) + _spans(times_in(text)) + _phone_spans(text)
    taken += [m.span() for m in _EMAIL.finditer(text)]
    out = []
    for found in numbers_in(text):
        if _overlaps(found.start, found.end, taken):
            continue
        if found.text.lower() == "one" and _pronoun(text, found):
            continue
        out.append(found)
    return tuple(out)


def _pronoun(text: str, one: Found) -> bool:
    """Whether this "one" is no count: "that one", "one of them", "please find one." (a count alone follows "for":
    "a table for one."), "One Ferry Building" (a name)."""
    before, after = text[: one.start], text[one.end :]
    if _PRONOUN_ONE.search(before) or _ONE_OF.match(after):
        return True
    if one.text == "One" and re.match(r"\s+[A-Z]", after) and before.strip() and before.rstrip()[-1] not in ".!?":
        return True
    if re.match(r"\s*(?:[.!?,;]|$)", after):
        previous = _LAST_WORD.search(before)
        return previous is None or previous[1].lower() not in _COUNTED_ALONE
    return False


def number_candidates(text: str, declaration: KeyDeclaration, today: dt.date | None) -> tuple[Found, ...]:
    """Numbers said as numbers: not inside a date, a time, a phone number or an email address."""
    return _numbers(text, today)


def _is_number_word(spelling: str) -> bool:
    return spelling.isdigit() or spelling in NUMBER_WORDS


def _in_polar_question(text: str, found: Found) -> bool:
    """Whether a mention is in a question about the thing ("Do they have outdoor seating?", "What's their number
    and is there an outdoor area?", "How expensive is it?"): the user asks, they do not choose the value."""
    start = max(text.rfind(mark, 0, found.start) for mark in ".!?\n") + 1
    ends = [i for i in (text.find(mark, found.end) for mark in ".!?\n") if i >= 0]
    end = min(ends) if ends else len(text)
    asked = text[start : found.end].strip()
    found_polar = _POLAR.search(asked)
    if found_polar is None:
        return False
    # a question mark, or a question by its word order though typed with a full stop ("Do they serve vegan food.")
    return (end < len(text) and text[end] == "?") or found_polar.start() == 0


def enum_candidates(text: str, declaration: KeyDeclaration, today: dt.date | None) -> tuple[Found, ...]:
    """The enum values and synonyms the message mentions (``enum_mentions``: word-bounded, accent-folded, misspelt
    within ``fuzzy``), as the values they name; yes/no and vague words aside, a negated mention aside ("not
    Italian", "I don't want a shared ride": no value said), and one in a yes/no question ("do they have outdoor
    seating?": the user asks, they do not choose), a number only where it is one."""
    numbers: set[tuple[int, int]] | None = None
    out: list[Found] = []
    for found in enum_mentions(declaration, text):
        spelling = fold(found.text)
        if spelling in _YES_NO or spelling in _VAGUE or _NEGATED.search(text[: found.start]):
            continue
        if _is_number_word(spelling):
            if numbers is None:
                numbers = set(_spans(_numbers(text, today)))
            if (found.start, found.end) not in numbers:
                continue
        elif _in_polar_question(text, found):  # (a count in one is asked for: "is there a bus for 3 people?")
            continue
        out.append(found)
    return tuple(out)


def phone_candidates(text: str, declaration: KeyDeclaration, today: dt.date | None) -> tuple[Found, ...]:
    """Phone numbers libphonenumber finds, read in the key's region, as E.164 (``phones_in``); a key without a
    region has no reader of what a number is, so none."""
    return phones_in(text, declaration.region) if declaration.region is not None else ()


def email_candidates(text: str, declaration: KeyDeclaration, today: dt.date | None) -> tuple[Found, ...]:
    """Email addresses written in the message, in the form ``format: email`` stores (``emails_in``)."""
    return emails_in(text)


FINDERS: dict[str, Finder] = {
    "date": date_candidates,
    "time": time_candidates,
    "number": number_candidates,
    "enum": enum_candidates,
    "phone": phone_candidates,
    "email": email_candidates,
}
"""The finder of each kind of value; a new kind (a phone number, an email address) is one more entry."""


def candidate_kind(declaration: KeyDeclaration) -> str | None:
    """The kind of candidates a declaration's values are found as, or None when no finder reads them."""
    if declaration.enum is not None:
        return "enum" if declaration.type in ("string", "integer", "number") else None
    if declaration.format in ("date", "time", "email"):
        return declaration.format
    if declaration.format == "phone" and declaration.region is not None:
        return "phone"
    if declaration.type in ("integer", "number"):
        return "number"
    return None


def candidates_in(kind: str, text: str, declaration: KeyDeclaration, today: dt.date | None) -> tuple[Found, ...]:
    """Every candidate of ``kind`` in ``text`` for ``declaration`` (not yet checked against it), and "dontcare"
    where the key may take it and the user said they have no preference ("any time is fine")."""
    found = FINDERS[kind](text, declaration, today)
    return found + dontcare_in(text) if declaration.dontcare else found


__all__ = [
    "FINDERS",
    "candidate_kind",
    "candidates_in",
    "date_candidates",
    "email_candidates",
    "enum_candidates",
    "impossible_date",
    "number_candidates",
    "phone_candidates",
    "time_candidates",
]
