"""A typed value the model wrote in words, read as the one value of its declared form the words mean.

Models copy the user's words into typed keys (``date: "March 9th"``, ``time: "8 in the night"``, ``party:
"two"``); the normaliser takes stored forms only, so these were refused as "not a date (YYYY-MM-DD)" and the
user was asked again for a date they had said well. They are read with the expression finder grounding uses
(``llm_fsm.definition._spoken``), against the conversation's date, and stored only when they have exactly one
reading. Words with several ("Friday" on a Friday, "a quarter past six") keep the one the user's own words
mean, if exactly one; otherwise they are refused naming the readings: a guess would be stored as if said.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.definition._spoken import (
    date_readings,
    date_time_readings,
    in_window,
    missing_day,
    number_readings,
    time_readings,
)
from llm_fsm.definition._spoken_de import date_readings_de, is_german
from llm_fsm.definition._spoken_de import number_readings as german_number_readings
from llm_fsm.engine._witness import Witness, typed_kind


@dataclass(frozen=True)
class Reworded:
    """What words written for a typed key mean: one value (``value``, read by ``rule``), or why none is taken."""

    written: str
    rule: str
    value: Any = None
    readings: tuple[Any, ...] = ()
    missing: str | None = None
    witness: Witness | None = None

    @property
    def ambiguous(self) -> bool:
        return len(self.readings) > 1


def _readings(
    kind: str, text: str, today: dt.date | None, declaration: KeyDeclaration, language: str | None = None
) -> tuple[tuple[Any, ...], str]:
    against = f", against the conversation's date {today.isoformat()}" if today is not None else ""
    order, window = declaration.date_order, declaration.window
    if kind == "date":
        if is_german(language):  # "morgen", "nächsten Freitag", "7. Mai": German read as well as English
            german = date_readings_de(text, today, window)
            if german:
                return german, f"date in German words{against}"
        return date_readings(text, today, order, window), f"date in words{against}"
    if kind == "date-time":
        return date_time_readings(text, today, order, window), f"date and time in words{against}"
    if kind == "time":
        return time_readings(text), "time in words (24-hour)"
    if is_german(language):
        german_numbers = german_number_readings(text)
        if german_numbers:
            return german_numbers, "number in German words or with a decimal comma"
    return number_readings(text), "number in words"


def reword(
    declaration: KeyDeclaration,
    written: str,
    today: dt.date | None,
    witness: Callable[[Any], Witness | None],
    language: str | None = None,
) -> Reworded | None:
    """The reading of ``written`` for ``declaration``, or None when the key is not a date, time or number key or
    the words are no expression of one. ``witness`` finds what in the conversation means a value: it settles
    which of several readings the user meant, and says where the stored one was said."""
    kind = typed_kind(declaration)
    if kind is None:
        return None
    readings, rule = _readings(kind, written, today, declaration, language)
    if kind in ("date", "date-time") and declaration.window and today is not None:
        # "Friday" in a future window is not last Friday; when no reading is inside, the window's refusal says so
        readings = tuple(r for r in readings if in_window(declaration.window, r, today)) or readings
    if declaration.type == "integer":
        readings = tuple(int(r) for r in readings if isinstance(r, int) or float(r).is_integer())
    if not readings:
        missing = missing_day(written, declaration.date_order) if kind == "date" else None
        return Reworded(written, rule, missing=missing) if missing else None
    found = {reading: witness(reading) for reading in readings}
    if len(readings) > 1:
        said = tuple(reading for reading, seen in found.items() if seen is not None)
        if len(said) != 1:
            return Reworded(written, rule, readings=readings)
        return Reworded(written, f"{rule}; the user's words settle which", said[0], witness=found[said[0]])
    return Reworded(written, rule, readings[0], witness=found[readings[0]])


def or_list(values: Sequence[Any]) -> str:
    """``a``, ``a or b``, ``a, b or c``."""
    shown = [str(v) for v in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


__all__ = ["Reworded", "or_list", "reword"]
