"""German as people write it, for a conversation held in German: yes and no, numbers in words and with a decimal
comma, relative and written-out dates.

English is read everywhere (``_spoken``); these readings are added when the conversation's language is German
(``de``, ``de-AT``, ``de-CH``). A German date expression is read by rewriting it into the English one it means
("nächsten Freitag" → "next Friday", "7. Mai 2099" → "7 May 2099") and handing that to ``_spoken``'s reader, so
both languages share one set of rules for what a date without a year or a weekday means. A German numeric date
("07.05.2099", "7.5.") is always day first.
"""

from __future__ import annotations

import datetime as dt
import math
import re

from llm_fsm.definition._spoken import Order, Window, date_readings

TRUE_DE = frozenset({"ja", "jawohl", "jep", "jo", "genau", "richtig", "stimmt", "klar", "gerne", "gern", "korrekt"})
FALSE_DE = frozenset({"nein", "nö", "noe", "ne", "nee", "falsch", "nicht", "keinesfalls"})
"""Yes and no in German, folded (the English words are read in every language)."""

_UNITS = {
    "null": 0,
    "ein": 1,
    "eins": 1,
    "eine": 1,
    "einen": 1,
    "zwei": 2,
    "zwo": 2,
    "drei": 3,
    "vier": 4,
    "fünf": 5,
    "fuenf": 5,
    "sechs": 6,
    "sieben": 7,
    "acht": 8,
    "neun": 9,
    "zehn": 10,
    "elf": 11,
    "zwölf": 12,
    "zwoelf": 12,
    "dreizehn": 13,
    "vierzehn": 14,
    "fünfzehn": 15,
    "fuenfzehn": 15,
    "sechzehn": 16,
    "siebzehn": 17,
    "achtzehn": 18,
    "neunzehn": 19,
}
_TENS = {
    "zwanzig": 20,
    "dreißig": 30,
    "dreissig": 30,
    "vierzig": 40,
    "fünfzig": 50,
    "fuenfzig": 50,
    "sechzig": 60,
    "siebzig": 70,
    "achtzig": 80,
    "neunzig": 90,
}
_COMPOUND = re.compile(rf"({'|'.join(k for k in _UNITS if _UNITS[k] < 10 and _UNITS[k] > 0)})und({'|'.join(_TENS)})")


def _below_hundred(word: str) -> int | None:
    if word in _UNITS:
        return _UNITS[word]
    if word in _TENS:
        return _TENS[word]
    match = _COMPOUND.fullmatch(word)
    return _UNITS[match[1]] + _TENS[match[2]] if match else None


def _below_thousand(word: str) -> int | None:
    if "hundert" not in word:
        return _below_hundred(word)
    head, _, rest = word.partition("hundert")
    count = 1 if head in ("", "ein", "eins") else _below_hundred(head)
    tail = 0 if rest in ("", "und") else _below_hundred(rest.removeprefix("und"))
    if count is None or tail is None or not 0 < count < 10:
        return None
    return count * 100 + tail


def words_value(text: str) -> int | None:
    """A whole number written in German words, below a million ("einundzwanzig", "zweihundertfünf", "tausend")."""
    word = re.sub(r"[\s\-]+", "", text.strip().lower())
    if not word:
        return None
    if "tausend" not in word:
        return _below_thousand(word)
    head, _, rest = word.partition("tausend")
    count = 1 if head in ("", "ein", "eins") else _below_thousand(head)
    tail = 0 if rest in ("", "und") else _below_thousand(rest.removeprefix("und"))
    if count is None or tail is None or count == 0:
        return None
    return count * 1000 + tail


_GERMAN_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:\.\d{3})+|\d+)(?:,\d+)?")
_CURRENCY = "$€£¥"


def to_number(text: str) -> int | float | None:
    """A number written the German way: a decimal comma and dots between thousands ("3,5", "1.234,50", "1.000").
    None for anything else (a plain "3.5" is left to the English reading, which has only one)."""
    cleaned = text.strip().strip(_CURRENCY).strip().removesuffix("euro").removesuffix("EUR").strip()
    if not _GERMAN_NUMBER.fullmatch(cleaned) or not ("," in cleaned or "." in cleaned):
        return None
    whole, _, fraction = cleaned.replace(".", "").partition(",")
    if not fraction:
        return int(whole)
    number = float(f"{whole}.{fraction}")
    return number if math.isfinite(number) else None


def number_readings(text: str) -> tuple[int | float, ...]:
    """The number German words or a German-written number mean, when the whole text is one."""
    value = words_value(text)
    if value is not None:
        return (value,)
    number = to_number(text)
    return (number,) if number is not None else ()


# --- dates -------------------------------------------------------------------------------------------------

_WEEKDAYS = {
    "montag": "Monday",
    "dienstag": "Tuesday",
    "mittwoch": "Wednesday",
    "donnerstag": "Thursday",
    "freitag": "Friday",
    "samstag": "Saturday",
    "sonnabend": "Saturday",
    "sonntag": "Sunday",
}
_MONTHS = {
    "januar": "January",
    "jänner": "January",
    "jan": "January",
    "februar": "February",
    "feb": "February",
    "märz": "March",
    "maerz": "March",
    "mär": "March",
    "april": "April",
    "apr": "April",
    "mai": "May",
    "juni": "June",
    "jun": "June",
    "juli": "July",
    "jul": "July",
    "august": "August",
    "aug": "August",
    "september": "September",
    "sep": "September",
    "sept": "September",
    "oktober": "October",
    "okt": "October",
    "november": "November",
    "nov": "November",
    "dezember": "December",
    "dez": "December",
}
_RELATIVE = {
    "heute": "today",
    "morgen": "tomorrow",
    "übermorgen": "the day after tomorrow",
    "uebermorgen": "the day after tomorrow",
    "gestern": "yesterday",
}
_WHICH = {
    "nächsten": "next",
    "nächster": "next",
    "nächste": "next",
    "naechsten": "next",
    "kommenden": "this coming",
    "kommender": "this coming",
    "diesen": "this",
    "dieser": "this",
    "am": "",
}
_WEEK = {"nächste": "next", "naechste": "next", "kommende": "next", "diese": "this"}

_LEAD = re.compile(r"^(?:(?:am|für|fuer|zum|bis|ab)\s+)?(?:den\s+)?")
_WEEKDAY_RE = re.compile(
    rf"^(?:(?P<which>{'|'.join(_WHICH)})\s+)?(?P<wd>{'|'.join(_WEEKDAYS)})"
    rf"(?:\s+(?:in\s+der\s+)?(?P<week>{'|'.join(_WEEK)})\s+woche)?$"
)
_WRITTEN_RE = re.compile(rf"^(?P<day>\d{{1,2}})\.?\s*(?P<month>{'|'.join(_MONTHS)})\.?(?:\s+(?P<year>\d{{4}}))?$")
_NUMERIC_RE = re.compile(r"^(?P<day>\d{1,2})\.(?P<month>\d{1,2})(?:\.(?P<year>\d{4}|\d{2})?)?$")


def english_date(text: str) -> tuple[str, Order] | None:
    """The English date expression a German one means, with the order its numbers are in (None: not German)."""
    body = _LEAD.sub("", text.strip().lower().rstrip(".!?,"), count=1).strip()
    if body in _RELATIVE:
        return _RELATIVE[body], None
    match = _WEEKDAY_RE.match(body)
    if match:
        which = _WHICH.get(match["which"] or "", "")
        week = f" {_WEEK[match['week']]} week" if match["week"] else ""
        return f"{which} {_WEEKDAYS[match['wd']]}{week}".strip(), None
    match = _WRITTEN_RE.match(body)
    if match:
        return f"{int(match['day'])} {_MONTHS[match['month']]}" + (f" {match['year']}" if match["year"] else ""), None
    match = _NUMERIC_RE.match(body)
    if match:
        year = match["year"]
        if year and len(year) == 2:
            year = f"20{year}"
        return f"{match['day']}/{match['month']}" + (f"/{year}" if year else ""), "DMY"
    return None


def date_readings_de(text: str, today: dt.date | None, window: Window = None) -> tuple[str, ...]:
    """The dates a German date expression means, read as ``_spoken.date_readings`` reads the English one."""
    found = english_date(text)
    if found is None:
        return ()
    english, order = found
    return date_readings(english, today, order, window)


def is_yes(word: str) -> bool | None:
    """True for a German yes, False for a German no, None for neither (``word`` folded)."""
    if word in TRUE_DE:
        return True
    if word in FALSE_DE:
        return False
    return None


def is_german(language: str | None) -> bool:
    """Whether a conversation in ``language`` reads German (any German tag)."""
    return language is not None and language.split("-", 1)[0].lower() == "de"


__all__ = [
    "FALSE_DE",
    "TRUE_DE",
    "date_readings_de",
    "english_date",
    "is_german",
    "is_yes",
    "number_readings",
    "to_number",
    "words_value",
]
