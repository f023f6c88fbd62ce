"""What grounds a value: the expression found for it, and the typed search behind dates, times and numbers.

A typed value (a key declared ``format: date``, ``date-time`` or ``time``, or ``type: integer`` or
``number``) is grounded when an expression of the user's means it — whatever spelling the model chose
(``llm_fsm.definition._spoken`` finds the expressions). Matching its characters instead refused the date the
user said ("March 12th", the model writing ``2019-03-12T14:30:00.000Z``) and grounded numbers the user never
said (``12`` in a phone number's digits). A phone number of a key with a ``region`` is grounded the same way, by
a number of the user's that is the same number (``llm_fsm.definition._phone``). Free text keeps the lexical rule
(``_values``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.definition._spoken import Found, Order, Window, dates_in, numbers_in, times_in

Source = Literal["user", "assistant"]
Kind = Literal["date", "time", "number", "phone", "dontcare", "words"]


@dataclass(frozen=True)
class Witness:
    """Where a grounded value was found: the expression, its span in that message, and which message.

    ``messages_back`` counts back from the newest message of its source (0: the message of this turn for
    ``user``; the assistant's last message for ``assistant``). Lexical grounding finds words, not one span:
    its ``expression`` is the value's spelling and ``start``/``end`` are None.
    """

    expression: str
    kind: Kind
    source: Source = "user"
    messages_back: int = 0
    start: int | None = None
    end: int | None = None


def typed_kind(declaration: KeyDeclaration | None) -> Literal["date", "date-time", "time", "number"] | None:
    """The typed search a declaration's values are grounded by, or None for lexical grounding."""
    if declaration is None or declaration.enum is not None:
        return None
    if declaration.format in ("date", "date-time", "time"):
        return declaration.format
    if declaration.type in ("integer", "number"):
        return "number"
    return None


Finder = Callable[[str], Sequence[Found]]


def _search(texts: Sequence[str], source: Source, wanted: Any, finder: Finder, kind: Kind) -> Witness | None:
    for back, text in enumerate(reversed(texts)):
        for found in finder(text):
            if found.value == wanted:
                return Witness(found.text, kind, source, back, found.start, found.end)
    return None


def typed_witness(
    kind: Literal["date", "date-time", "time", "number"],
    value: Any,
    user: Sequence[str],
    offers: Sequence[str],
    today: dt.date | None,
    order: Order = None,
    window: Window = None,
) -> Witness | None:
    """The expression of the user's (or of an assistant's offer in view) that means ``value``, or None; numeric
    dates are read in the key's ``order`` and dates without a year in its ``window``."""

    def first(wanted: Any, finder: Finder, kind: Kind) -> Witness | None:
        return _search(user, "user", wanted, finder, kind) or _search(offers, "assistant", wanted, finder, kind)

    def on_date(text: str) -> Sequence[Found]:
        return dates_in(text, today, order, window)

    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return first(value, numbers_in, "number")
    if not isinstance(value, str):
        return None
    if kind == "date":
        return first(value[:10], on_date, "date")
    if kind == "time":
        return first(value[:5], times_in, "time")
    date = first(value[:10], on_date, "date")
    clock = value[11:16]
    if date is None or not clock or clock == "00:00":
        return date
    time = first(clock, times_in, "time")
    if time is None:
        return None
    return Witness(f"{date.expression} … {time.expression}", "date", date.source, date.messages_back, date.start)


__all__ = ["Witness", "typed_kind", "typed_witness"]
