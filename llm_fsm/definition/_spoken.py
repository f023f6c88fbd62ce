"""Dates, times and numbers as people write them, found in a message with their place in it.

Grounding a typed value asks "did the user say this date?", not "are its characters in the message?": the
user writes "March 12th", "the 6th" or "Tuesday next week" and the model writes ``2019-03-12``. Each finder
returns every expression of its kind in a text with the value (or values) it may mean, so a value is grounded
when one of them is that value.

An expression that may mean several values yields each: "Friday" is this week's or next week's, "a quarter
past six" is 06:15 or 18:15, "the 6th" is this month's or next month's. That is not a guess about what is
stored (the model's value is stored, and validation checks it); it only widens what counts as said. A bare
number is never a date or a time ("2 people" grounds neither the 2nd nor 02:00).

The normaliser's readers of a value in its stored form (``iso_date``, ``iso_time``) live here too and read a
date with the same pattern: one English date reader, whoever wrote the date.

Relative dates need the conversation's date (``today``): without it they mean nothing and only absolute
dates are found. English only, and written here rather than by a library: ``dateparser`` 1.5 read "the 4th"
as the 1st of April and "the 6th" as the 1st of June, returned nothing for "Tuesday next week" or "Saturday
this week" (the forms SGD's users write most), and took ~0.45 s for its first parse; numbers in words are a
table of forty words, not worth a dependency.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from llm_fsm.definition._folding import fold

_MONTH_NAMES = (
    ("january", "jan"),
    ("february", "feb"),
    ("march", "mar"),
    ("april", "apr"),
    ("may",),
    ("june", "jun"),
    ("july", "jul"),
    ("august", "aug"),
    ("september", "sep", "sept"),
    ("october", "oct"),
    ("november", "nov"),
    ("december", "dec"),
)
MONTHS = {name: index for index, names in enumerate(_MONTH_NAMES, start=1) for name in names}
MONTH_NAMES = tuple(names[0].title() for names in _MONTH_NAMES)
"""English month names, spelled here: ``calendar.month_name`` follows the process's locale."""
_WEEKDAY_NAMES = (
    ("monday", "mon"),
    ("tuesday", "tue", "tues"),
    ("wednesday", "wed"),
    ("thursday", "thu", "thurs"),
    ("friday", "fri"),
    ("saturday", "sat"),
    ("sunday", "sun"),
)
_WEEKDAYS = {name: index for index, names in enumerate(_WEEKDAY_NAMES) for name in names}

_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
NUMBER_WORDS: dict[str, int] = {word: value for value, word in enumerate(_UNITS)}
NUMBER_WORDS.update({word: 20 + 10 * index for index, word in enumerate(_TENS)})
_TENS_UNITS = "|".join(_TENS)
_UNIT_WORDS = "|".join(_UNITS[1:10])
_SMALL = rf"(?:(?:{_TENS_UNITS})(?:[- ](?:{_UNIT_WORDS}))?|{'|'.join(sorted(_UNITS, key=len, reverse=True))})"
_WORDED = rf"(?:{_SMALL}(?:\s+(?:hundred|thousand)(?:\s+(?:and\s+)?{_SMALL})?)?)"


@dataclass(frozen=True)
class Found:
    """One expression in a text and a value it may mean; ``start``/``end`` index the text as given."""

    value: str | int | float
    start: int
    end: int
    text: str


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """Compiled on first use: the three patterns take ~6 ms, paid by every process that imports the engine."""
    return re.compile(pattern, re.IGNORECASE | re.VERBOSE)


def _spans(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    return list(pattern.finditer(text))


# --- numbers ---------------------------------------------------------------------------------------

_DIGITS = re.compile(r"(?<![\w.,])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w]|[.,]\d)")
_WORDS_NUMBER = rf"\b{_WORDED}\b"


def words_value(words: str) -> int | None:
    """``twenty-one`` → 21, ``two hundred and five`` → 205; None for anything else."""
    total = current = 0
    seen = False
    for word in re.split(r"[\s-]+", words.lower()):
        if word == "and":
            continue
        if word in NUMBER_WORDS:
            current += NUMBER_WORDS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        elif word == "thousand":
            total += max(current, 1) * 1000
            current = 0
        else:
            return None
        seen = True
    return total + current if seen else None


@functools.lru_cache(maxsize=1024)
def numbers_in(text: str) -> tuple[Found, ...]:
    """Numbers written in digits (``4``, ``1,200``, ``2.5``) or English words (``two``, ``twenty-one``)."""
    found: list[Found] = []
    for match in _spans(_DIGITS, text):
        raw = match[0].replace(",", "")
        value: int | float = float(raw) if "." in raw else int(raw)
        found.append(Found(value, match.start(), match.end(), match[0]))
    for match in _spans(_compiled(_WORDS_NUMBER), text):
        number = words_value(match[0])
        if number is not None:
            found.append(Found(number, match.start(), match.end(), match[0]))
    return tuple(found)


# --- times -----------------------------------------------------------------------------------------

_HOUR = rf"(?:\d{{1,2}}(?!\d)|(?:{'|'.join(_UNITS[1:13][::-1])})\b)"
_MERIDIEM = r"(?P<ampm>[ap])\.?\s*m\b\.?"
_CLOCK = rf"(?P<hour>{_HOUR})(?:[:.h](?P<minute>\d{{2}})|\s+o'?\s*clock)?"
_TIME = rf"""
    \b(?:(?P<before>morning|afternoon|evening|night)\s+(?:at\s+)?)?
    (?:(?P<fraction>(?:a\s+)?quarter\s+(?:past|after|to)|half\s+past)\s+)?
    {_CLOCK}
    (?:\s*{_MERIDIEM}|\s+(?:in\s+the\s+(?P<after>morning|afternoon|evening|night)|at\s+(?P<at_night>night)))?
    |\b(?P<word>noon|midday|midnight)\b
    """
_AT = re.compile(r"\b(?:at|around|about|by|from|after|before|until)\s+$", re.IGNORECASE)


def _hour_value(text: str) -> int | None:
    return int(text) if text.isdigit() else NUMBER_WORDS.get(text.lower())


@functools.lru_cache(maxsize=1024)
def times_in(text: str) -> tuple[Found, ...]:
    """Times of day: ``18:15``, ``6:15 pm``, ``a quarter past six``, ``seven in the evening``, ``noon``.

    A bare number is a time only after "at" (or "around", "by", ...) or with a part of the day, o'clock, am or
    pm; without am, pm or a part of the day an hour from 1 to 11 may be morning or evening.
    """
    found: list[Found] = []
    for match in _spans(_compiled(_TIME), text):
        if match["word"]:
            value = "00:00" if match["word"].lower() == "midnight" else "12:00"
            found.append(Found(value, match.start(), match.end(), match[0]))
            continue
        hour = _hour_value(match["hour"])
        minute = int(match["minute"]) if match["minute"] else 0
        part = (match["before"] or match["after"] or match["at_night"] or "").lower()
        marked = bool(match["minute"] or match["fraction"] or part or match["ampm"] or "clock" in match[0].lower())
        if hour is None or (not marked and not _AT.search(text[: match.start()])):
            continue
        if match["minute"] and not match["hour"].isdigit():
            continue
        if match["fraction"]:
            fraction = match["fraction"].lower()
            if hour > 12 or match["minute"]:
                continue
            minute = 30 if fraction.startswith("half") else 15 if not fraction.endswith(" to") else 45
            hour = hour - 1 if fraction.endswith(" to") else hour
            hour = 12 if hour == 0 else hour
        if hour > 23 or minute > 59:
            continue
        for reading in _readings(hour, match["ampm"], part):
            found.append(Found(f"{reading:02d}:{minute:02d}", match.start(), match.end(), match[0]))
    return tuple(found)


def _readings(hour: int, ampm: str | None, part: str) -> tuple[int, ...]:
    """The hours (24 h) an hour as written may be: "6 pm" one, "6" two, "18" one."""
    if hour == 0 or hour > 12:
        return (hour,) if not ampm else ()
    evening = ampm.lower() == "p" if ampm else part in ("afternoon", "evening") or (part == "night" and hour >= 6)
    morning = ampm.lower() == "a" if ampm else part == "morning" or (part == "night" and hour < 6)
    if hour == 12:
        return (0,) if morning and ampm else (12,) if ampm or part else (12,)
    if evening:
        return (hour + 12,)
    if morning:
        return (hour,)
    return (hour, hour + 12)


# --- dates -----------------------------------------------------------------------------------------

_MONTH = rf"(?P<month>{'|'.join(sorted(MONTHS, key=len, reverse=True))})\.?"
_WEEKDAY = rf"(?P<weekday>{'|'.join(sorted(_WEEKDAYS, key=len, reverse=True))})\.?"
_DAY = r"(?P<day>\d{1,2})(?P<suffix>st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(?P<year>\d{4}))?"
_FULL_WEEKDAY = "|".join(names[0] for names in _WEEKDAY_NAMES)
_DATE = rf"""
    \b(?P<iso>(?P<iy>\d{{4}})[-/.](?P<im>\d{{1,2}})[-/.](?P<id>\d{{1,2}}))
      (?:[t\s]\d{{1,2}}:\d{{2}}(?::\d{{2}}(?:\.\d+)?)?(?:z|[+-]\d{{2}}:?\d{{2}})?)?
    |\b(?P<n1>\d{{1,2}})[/.](?P<n2>\d{{1,2}})[/.](?P<nyear>\d{{4}})\b
    |\b(?P<s1>\d{{1,2}})/(?P<s2>\d{{1,2}})\b(?!/)
    |\b(?:{_WEEKDAY},?\s+)?(?:the\s+)?{_DAY}\s+(?:of\s+)?(?:(?P<this>this|next|the\s+coming)\s+month|{_MONTH}{_YEAR})\b
    |\b(?:(?P<wd2>{"|".join(sorted(_WEEKDAYS, key=len, reverse=True))})\.?,?\s+)?{_MONTH.replace("month>", "m2>")}
      \s+(?:the\s+)?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<y2>\d{{4}}))?\b
    |\bthe\s+(?P<d3>\d{{1,2}})(?:st|nd|rd|th)\b|\b(?P<d4>\d{{1,2}})(?:st|nd|rd|th)\b
    |\b(?P<rel>(?:the\s+)?day\s+after\s+tomorrow|today|tonight|tomorrow|yesterday)\b
    |\b(?:(?P<which>this|next|coming|this\s+coming)\s+)?(?P<wd>{_FULL_WEEKDAY})
      \b\.?(?:\s+(?:of\s+)?(?P<week>this|next)\s+week)?
    |\b(?P<week2>this|next)\s+week\s+(?:on\s+)?(?P<wd3>{_FULL_WEEKDAY})\b
    """


def _date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


Order = Literal["DMY", "MDY"] | None
"""How a numeric date ("03/04") is read: day first, month first, or (None) both ways."""
Window = Literal["future", "past"] | None
"""Which dates a date without its year or week means: the next one (None, "future") or the last one ("past")."""


def in_window(window: Window, day: str, today: dt.date) -> bool:
    """Whether the ISO date ``day`` (a date-time's date too) is in ``window`` as of ``today``, which is in both."""
    if window is None or day[:10] == today.isoformat():
        return True
    return (day[:10] > today.isoformat()) == (window == "future")


def _month_day(
    month: int, day: int, year: str | None, today: dt.date | None, window: Window = None
) -> list[dt.date | None]:
    if year:
        return [_date(int(year), month, day)]
    if today is None:
        return []
    back = -1 if window == "past" else 0
    return [_date(today.year + back, month, day), _date(today.year + back + 1, month, day)]


def _nth(
    day: int, today: dt.date | None, months: tuple[int, ...] = (0, 1), window: Window = None
) -> list[dt.date | None]:
    if today is None:
        return []
    months = tuple(ahead - 1 for ahead in months) if window == "past" and months == (0, 1) else months
    out: list[dt.date | None] = []
    for ahead in months:
        month = today.month + ahead
        out.append(_date(today.year + (month - 1) // 12, (month - 1) % 12 + 1, day))
    return out


def _weekday(name: str, which: str, week: str, today: dt.date | None, window: Window = None) -> list[dt.date | None]:
    """ "Friday", "this Friday", "next Friday", "Friday next week" against ``today`` (weeks start on Monday); in
    a past window a bare "Friday" is also the last one."""
    if today is None:
        return []
    target = _WEEKDAYS[name.lower().rstrip(".")]
    monday = today - dt.timedelta(days=today.weekday())
    this_week = monday + dt.timedelta(days=target)
    next_week = this_week + dt.timedelta(days=7)
    ahead = today + dt.timedelta(days=(target - today.weekday()) % 7 or 7)
    if week.lower() == "next":
        return [next_week]
    if week.lower() == "this":
        return [this_week]
    if which.lower() == "next":
        return [ahead, next_week]
    behind = today - dt.timedelta(days=(today.weekday() - target) % 7 or 7)
    last = [today if today.weekday() == target else behind, behind] if window == "past" and not which else []
    return [today if today.weekday() == target else ahead, ahead, this_week, *last]


def _relative(word: str, today: dt.date | None) -> list[dt.date | None]:
    if today is None:
        return []
    offset = {"today": 0, "tonight": 0, "tomorrow": 1, "yesterday": -1, "after": 2}[word.lower()]
    return [today + dt.timedelta(days=offset)]


Reading = Literal["as written", "next", "not past"]
"""How a value is read from a date expression: every date it may mean ("12/03/2019": two), the next one on or
after the conversation's date ("March 9th", "the 6th"), or those not before it ("Friday": this week's may be
over)."""


def _month_first(g: dict[str, str | None], order: Order) -> list[tuple[int, int]]:
    """(month, day) of a numeric date as the declared order reads it, or both ways without one."""
    a, b = int(g["n1"] or g["s1"] or 0), int(g["n2"] or g["s2"] or 0)
    return {"MDY": [(a, b)], "DMY": [(b, a)]}.get(order or "", [(a, b), (b, a)])


def _match_dates(
    g: dict[str, str | None], today: dt.date | None, order: Order = None, window: Window = None
) -> tuple[list[dt.date | None], Reading]:
    """The dates one matched expression may mean, and how one of them is chosen when a value is read from it."""
    if g["iso"]:
        return [_date(int(g["iy"] or 0), int(g["im"] or 0), int(g["id"] or 0))], "as written"
    if g["nyear"]:
        return [_date(int(g["nyear"]), month, day) for month, day in _month_first(g, order)], "as written"
    if g["s1"]:
        return [d for m, day in _month_first(g, order) for d in _month_day(m, day, None, today, window)], "next"
    if g["day"]:
        day = int(g["day"])
        if g["this"]:
            return _nth(day, today, (1,) if g["this"].lower() != "this" else (0,)), "as written"
        dates = _month_day(MONTHS[(g["month"] or "").lower()], day, g["year"], today, window)
        return dates, "as written" if g["year"] else "next"
    if g["m2"]:
        dates = _month_day(MONTHS[g["m2"].lower()], int(g["d2"] or 0), g["y2"], today, window)
        return dates, "as written" if g["y2"] else "next"
    if g["d3"] or g["d4"]:
        return _nth(int(g["d3"] or g["d4"] or 0), today, window=window), "next"
    if g["rel"]:
        return _relative("after" if "after" in g["rel"].lower() else g["rel"], today), "as written"
    if g["wd"]:
        return _weekday(g["wd"], g["which"] or "", g["week"] or "", today, window), "not past"
    return _weekday(g["wd3"] or "", "", g["week2"] or "", today), "not past"


@functools.lru_cache(maxsize=1024)
def dates_in(text: str, today: dt.date | None = None, order: Order = None, window: Window = None) -> tuple[Found, ...]:
    """Calendar dates: ``2019-03-12``, ``12/03/2019`` (either order), ``March 12th``, ``12th of March``,
    ``the 12th``, ``12th of this month``, ``next Friday``, ``Tuesday next week``, ``tomorrow``, ``03/04``.

    A date without its year is this year's or next year's (last year's or this year's in a past ``window``);
    "the 12th" this month's or next month's; "03/04" read in the declared ``order``, else both ways. The
    relative ones need ``today`` (the conversation's date) and are skipped without it.
    """
    found: list[Found] = []
    for match in _spans(_compiled(_DATE), text):
        dates, _ = _match_dates(match.groupdict(), today, order, window)
        for date in dict.fromkeys(d for d in dates if d is not None):
            found.append(Found(date.isoformat(), match.start(), match.end(), match[0]))
    return tuple(found)


# --- a value in its stored form ----------------------------------------------------------------------
# What the normaliser reads a model's date or time as without the conversation's date: absolute forms only.

_TIME_24 = re.compile(r"(\d{1,2})[:.h](\d{2})(?::(\d{2}))?(?:\s*h(?:rs)?)?")
_TIME_12 = re.compile(r"(\d{1,2})(?:[:.](\d{2}))?\s*([ap])\.?\s*m\.?")


def _date_fields(text: str, order: Order = None) -> tuple[int, int, int] | None:
    """Year, month and day as written (not yet checked to exist), when the whole text is a date with its year:
    ISO (``2019-03-12``, ``2019/3/12``, a time after it), ``12 March 2019``, ``Tuesday, March 12th, 2019``, and
    ``03/04/2019`` in a declared ``order``. Read by the expression finder's own pattern: one English date reader."""
    match = _compiled(_DATE).fullmatch(fold(text))
    if match is None:
        return None
    g = match.groupdict()
    if g["iso"]:
        return int(g["iy"] or 0), int(g["im"] or 0), int(g["id"] or 0)
    if g["nyear"] and order is not None:
        month, day = _month_first(g, order)[0]
        return int(g["nyear"]), month, day
    if g["day"] and g["month"] and g["year"]:
        return int(g["year"]), MONTHS[g["month"].lower()], int(g["day"])
    if g["m2"] and g["y2"]:
        return int(g["y2"]), MONTHS[g["m2"].lower()], int(g["d2"] or 0)
    return None


def iso_date(text: str, order: Order = None) -> str | None:
    """The stored form (``YYYY-MM-DD``) of a date written with its year, or None."""
    fields = _date_fields(text, order)
    if fields is None:
        return None
    try:
        return dt.date(*fields).isoformat()
    except ValueError:
        return None


def missing_dated_day(text: str, order: Order = None) -> str | None:
    """Why a text shaped like a date names no day ("February 2027 has 28 days"), or None.

    "'30 February 2027' is not a date" reads as if the format were wrong, and sends the user to rewrite a date
    they wrote well: the day is what does not exist.
    """
    fields = _date_fields(text, order)
    if fields is None:
        return None
    year, month, day = fields
    if not 1 <= month <= 12:
        return f"there is no month {month}"
    if not dt.MINYEAR <= year <= dt.MAXYEAR:
        return None
    days = calendar.monthrange(year, month)[1]
    if day < 1:
        return f"there is no day {day}"
    if day > days:
        # the month's name spelled here: calendar.month_name follows the process's locale
        return f"{MONTH_NAMES[month - 1]} {year} has {days} days"
    return None


def iso_time(text: str) -> str | None:
    folded = fold(text)
    if folded in ("noon", "midday"):
        return "12:00"
    if folded == "midnight":
        return "00:00"
    hour = minute = None
    second: int | None = None
    if match := _TIME_24.fullmatch(folded):
        hour, minute = int(match[1]), int(match[2])
        second = int(match[3]) if match[3] else None
    elif match := _TIME_12.fullmatch(folded):
        hour, minute = int(match[1]), int(match[2] or 0)
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if match[3] == "p" else 0)
    if hour is None or minute is None or hour > 23 or minute > 59 or (second is not None and second > 59):
        return None
    return f"{hour:02d}:{minute:02d}" + (f":{second:02d}" if second else "")


# --- a whole value read as one expression ---------------------------------------------------------


_LEAD = re.compile(r"\s*(?:(?:on|at|for)\s+)?", re.IGNORECASE)


def _body(text: str) -> tuple[int, int]:
    """Where the expression of a whole value is: after a leading "on", "at" or "for", before end punctuation."""
    lead = _LEAD.match(text)
    start = lead.end() if lead else 0
    return start, start + len(text[start:].rstrip().rstrip(".!?,;").rstrip())


def _bare(text: str) -> str:
    start, end = _body(text)
    return text[start:end]


def date_readings(text: str, today: dt.date | None, order: Order = None, window: Window = None) -> tuple[str, ...]:
    """The dates a value written in words means when the whole of it is one date expression ("March 9th",
    "next Friday"), read against ``today``; empty when it is not one, or names no day that exists.

    A date without a year, or "the 6th", is the next one on or after ``today`` (the last one on or before it in
    a past ``window``); a weekday is one not before ``today`` (not after it in a past window: "Friday" on a
    Friday is today or in a week, two readings). Nothing else is chosen: "next Friday" on a Monday may be in
    four days or in eleven, and "03/04/2019" without a declared ``order`` either way.
    """
    match = _compiled(_DATE).fullmatch(_bare(text))
    if match is None:
        return ()
    g = match.groupdict()
    if g["s1"] and order is None:  # each order's own next (or last) day
        ways = (date_readings(text, today, way, window) for way in ("MDY", "DMY"))
        return tuple(sorted(dict.fromkeys(day for days in ways for day in days)))
    dates, reading = _match_dates(g, today, order, window)
    days = sorted(dict.fromkeys(d for d in dates if d is not None))
    if today is not None and reading != "as written":
        past = window == "past"
        days = [d for d in days if (d <= today if past else d >= today)]
        days = (days[-1:] if past else days[:1]) if reading == "next" else days
    return tuple(d.isoformat() for d in days)


_NUMERIC = re.compile(r"\d{1,2}[/.]\d{1,2}(?:[/.]\d{4})?")


def unordered(text: str, today: dt.date | None) -> tuple[str, ...]:
    """The dates a numeric date ("03/04", "03/04/2019") means read day first and month first, when they differ
    and no order is declared: a value found in it was chosen by whoever wrote it, not said."""
    if _NUMERIC.fullmatch(_bare(text)) is None:
        return ()
    readings = date_readings(text, today)
    return readings if len(readings) > 1 else ()


_LONGEST = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def missing_day(text: str, order: Order = None) -> str | None:
    """Why a month and day written without a year name no day ("February 30th", "30/02" in a day-first
    ``order``: February has 28 or 29 days)."""
    match = _compiled(_DATE).fullmatch(_bare(text))
    if match is None:
        return None
    g = match.groupdict()
    if g["s1"]:  # read either way without an order: missing only when both are ("30/02": no month 30 either)
        ways = [f"there is no month {m}" if not 1 <= m <= 12 else _too_long(m, d) for m, d in _month_first(g, order)]
        reasons = [why for why in ways if why is not None]
        return min(reasons, key=lambda why: why.startswith("there is no month")) if len(reasons) == len(ways) else None
    month, day = (g["month"], g["day"]) if g["day"] and g["month"] and not g["year"] else (g["m2"], g["d2"])
    if not month or not day or (g["m2"] and g["y2"]):
        return None
    return _too_long(MONTHS[month.lower()], int(day))


def _too_long(index: int, day: int) -> str | None:
    """Said without a year, a day is missing only when no year has it: February 29th exists."""
    if day < 1:
        return f"there is no day {day}"
    if day <= _LONGEST[index - 1]:
        return None
    return f"{MONTH_NAMES[index - 1]} has {'28 or 29' if index == 2 else _LONGEST[index - 1]} days"


def _whole(found: Sequence[Found], text: str) -> tuple[str | int | float, ...]:
    """The values of the expressions that are the whole of ``text`` (punctuation around it aside)."""
    start, end = _body(text)
    return tuple(dict.fromkeys(f.value for f in found if f.start <= start and f.end >= end))


def time_readings(text: str) -> tuple[str, ...]:
    """The times a value written in words means ("8 in the night": 20:00; "a quarter past six": 06:15, 18:15)."""
    return tuple(str(value) for value in _whole(times_in(text), text))


_BETWEEN = re.compile(r"\s+at\s+|,\s*|\s+", re.IGNORECASE)


def date_time_readings(text: str, today: dt.date | None, order: Order = None, window: Window = None) -> tuple[str, ...]:
    """The date-times (``2019-03-08T20:00:00``) a value written in words means when it is a date expression and
    then a time expression ("next Friday at 8 pm"): every pairing of their readings."""
    start, end = _body(text)
    body = text[start:end]
    found: dict[str, None] = {}
    for between in _BETWEEN.finditer(body):
        days = date_readings(body[: between.start()], today, order, window)
        clocks = time_readings(body[between.start() :]) if days else ()
        found.update((f"{day}T{clock}:00", None) for day in days for clock in clocks)
    return tuple(found)


def number_readings(text: str) -> tuple[int | float, ...]:
    """The number a value written in words means ("two", "twenty-one"), when it is one number."""
    return tuple(v for v in _whole(numbers_in(text), text) if not isinstance(v, str))


__all__ = [
    "MONTHS",
    "MONTH_NAMES",
    "NUMBER_WORDS",
    "Found",
    "Order",
    "Reading",
    "Window",
    "date_readings",
    "date_time_readings",
    "in_window",
    "iso_date",
    "iso_time",
    "missing_dated_day",
    "dates_in",
    "missing_day",
    "number_readings",
    "numbers_in",
    "time_readings",
    "times_in",
    "unordered",
    "words_value",
]
