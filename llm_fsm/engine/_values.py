"""Checking a value against its declaration: normalise, validate, ground.

A model's value is a guess until checked. Three steps, each pure:

1. **Normalise** what is unambiguous: trim; enum values matched case- and
   spacing-insensitively and through synonyms to their canonical spelling;
   numeric strings to numbers for numeric keys; common yes/no words for
   booleans; dates, times and emails to one stored form. Nothing is guessed
   (``03/04/2027`` is not a date without a declared ``date_order``: day and month are ambiguous). A model's
   date, time or number in words ("next Friday", "two") is read as the one
   value it means on the conversation's clock, or refused (``_worded``).
2. **Validate** against the declaration: type, enum, format, pattern, length,
   range, list items. The first failure is the reason.
3. **Ground** (model writes of grounded keys only): the value must be
   supported by what the user said. The rule, documented in
   docs/definition-format.md: split the value and the user's messages into
   words and digit runs (Unicode-normalised, case-folded); every word of the
   value must be a word the user used (or its singular/plural), and the
   value's digits, run together, must appear in the digits of one message run
   together (so ``555-1234`` is supported by "555 1234"). The assistant's
   messages in the history window the model sees count too, for a short
   value found within one of them (at most ``MAX_OFFER_WORDS`` words): a
   value the assistant offered and the user accepted ("Akiko's at 7?" — "yes",
   or "What's their number?" first, then "OK, that one") is grounded; a
   sentence of the assistant's own copied into a name is not.

A refused value is never stored; the caller records the ``Refusal``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from llm_fsm.definition import _email as email
from llm_fsm.definition import _phone as phone
from llm_fsm.definition._enums import DONTCARE, closest_values, dontcare_in, sole_mentions
from llm_fsm.definition._keys import KeyDeclaration, fold, json_type_matches
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.definition._spoken import in_window, unordered
from llm_fsm.definition._spoken import iso_date as _date
from llm_fsm.definition._spoken import iso_time as _time
from llm_fsm.definition._spoken import missing_dated_day as _missing_day
from llm_fsm.definition._spoken_de import is_german, is_yes
from llm_fsm.definition._spoken_de import to_number as german_number
from llm_fsm.engine._lexical import MAX_OFFER_WORDS, _Texts, _words, span_of
from llm_fsm.engine._witness import Source, Witness, _search, typed_kind, typed_witness
from llm_fsm.engine._worded import Reworded, or_list, reword

if TYPE_CHECKING:
    from llm_fsm.engine._extract import Extraction, Extractor

Rule = Literal[
    "type",
    "enum",
    "format",
    "pattern",
    "length",
    "range",
    "items",
    "ungrounded",
    "not_writable",
    "undeclared",
    "not_changeable",
    "ambiguous",
    "window",
]

#: rules whose refusal makes the assistant ask again (the others are silent: the model wrote where it may not)
REASK_RULES: frozenset[str] = frozenset(
    {"type", "enum", "format", "pattern", "length", "range", "items", "ungrounded", "ambiguous", "window"}
)

#: refusals the engine's extractors may repair from the user's message (``_extract``)
_REPAIRABLE = frozenset({"type", "enum", "format", "pattern", "length", "range", "ungrounded", "window"})

MASK = "***"
"""What a sensitive value is shown as."""


@dataclass(frozen=True)
class Refusal:
    """Why a value was not stored: the rule it broke and a sentence for people."""

    rule: Rule
    reason: str


# --- normalising ---------------------------------------------------------------------------------

_TRUE = frozenset({"yes", "y", "true", "t", "1", "yeah", "yep", "yup", "sure", "correct", "right", "ok", "okay"})
_FALSE = frozenset({"no", "n", "false", "f", "0", "nope", "nah", "incorrect", "wrong"})
_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[+-]?\.\d+")
_CURRENCY = "$€£¥"


def _to_number(text: str) -> int | float | None:
    cleaned = text.strip().strip(_CURRENCY).strip()
    if not _NUMBER.fullmatch(cleaned):
        return None
    cleaned = cleaned.replace(",", "")
    number = float(cleaned)
    if not math.isfinite(number):
        return None
    return int(cleaned) if re.fullmatch(r"[+-]?\d+", cleaned) else number


def _date_time(text: str) -> str | None:
    candidate = text.strip().replace(" ", "T", 1)
    if candidate.endswith(("Z", "z")):
        candidate = candidate[:-1] + "+00:00"
    try:
        return dt.datetime.fromisoformat(candidate).isoformat()
    except ValueError:
        return None


_NORMALISE_FORMAT = {"time": _time, "date-time": _date_time}


def normalise(declaration: KeyDeclaration, value: Any, language: str | None = None) -> Any:
    """The value in its stored form where that is unambiguous; otherwise the value as given (validation decides).

    ``language``: the conversation's, for a model's value: in German, "ja"/"nein", a decimal comma ("3,5") and
    day-first numeric dates ("07.05.2099") are read too (``_spoken_de``)."""
    german = is_german(language)
    kind = declaration.type
    if isinstance(value, str):
        if declaration.enum is not None and (value in declaration.enum or value.strip() in declaration.enum):
            # already a value: kept, though another is spelt alike ("Paris", "paris"; "aB " and "aB")
            return value if value in declaration.enum else value.strip()
        value = value.strip()
        if declaration.dontcare and fold(value) == DONTCARE:
            return DONTCARE
        if declaration.enum is not None or declaration.synonyms:
            found = declaration.enum_lookup.get(fold(value.rstrip(".!")))
            if found is not None:
                return found
            if declaration.fuzzy is not None:
                close = closest_values(declaration, value.rstrip(".!"))
                if len(close) == 1:
                    return close[0]
        if kind in ("integer", "number"):
            number = german_number(value) if german else None
            number = _to_number(value) if number is None else number
            if number is not None:
                value = number
        elif kind == "boolean":
            word = fold(value).rstrip(".!")
            if word in _TRUE:
                return True
            if word in _FALSE:
                return False
            said = is_yes(word) if german else None
            if said is not None:
                return said
        elif kind == "array":
            value = _split_values(declaration.items, value) or [value]
        elif declaration.format == "date":
            return _date(value, declaration.date_order or ("DMY" if german else None)) or value
        elif declaration.format in _NORMALISE_FORMAT:
            return _NORMALISE_FORMAT[declaration.format](value) or value
        elif declaration.format == "email":
            return email.normalised(value)
        elif declaration.format == "phone" and declaration.region is not None:
            return phone.e164(value, declaration.region) or value
        elif declaration.format == "uuid":
            return value.lower()
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "string" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # a zip code or a flight number the model wrote as a number
    if kind == "boolean" and type(value) is int and value in (0, 1):
        return bool(value)
    if kind == "array":
        if isinstance(value, (str, int, float, bool)):
            value = [value]
        if isinstance(value, list) and declaration.items is not None:
            return [normalise(declaration.items, item) for item in value]
    return value


def _split_values(items: KeyDeclaration | None, text: str) -> list[str] | None:
    """Enum values a model wrote as one string for a list key ("Chinese, Thai", "Chinese or Thai") as a list,
    when every part is one of the items' values; None when the text is one value, or any part is none."""
    if items is None or items.enum is None or normalise(items, text) in items.enum:
        return None
    parts = [part for part in _SEPARATORS.split(text) if part.strip()]
    if len(parts) < 2 or any(check(items, normalise(items, part)) is not None for part in parts):
        return None
    return parts


_SEPARATORS = re.compile(r"\s*(?:[,;/&]|\bor\b|\band\b)\s*", re.IGNORECASE)


# --- validating ----------------------------------------------------------------------------------

_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:(?://)?[^\s]+")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ISO_TIME = re.compile(r"\d{2}:\d{2}(?::\d{2})?")


def _format_ok(name: str, text: str) -> bool:
    """Whether ``text`` has the stored shape of format ``name`` (email, region phones: ``format_problem``)."""
    if name == "phone":
        return phone.looks_like(text)
    if name == "uri":
        return _URI.fullmatch(text) is not None
    if name == "uuid":
        return _UUID.fullmatch(text) is not None
    if name == "date":
        return _ISO_DATE.fullmatch(text) is not None and _date(text) == text
    if name == "time":
        return _ISO_TIME.fullmatch(text) is not None and _time(text) is not None
    if name == "date-time":
        return _date_time(text) is not None
    return True


_FORMAT_HINT = {
    "email": "an email address",
    "phone": "a phone number",
    "uri": "a web address (URI)",
    "uuid": "a UUID",
    "date": "a date (YYYY-MM-DD)",
    "time": "a time (HH:MM)",
    "date-time": "a date and time (ISO 8601)",
}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def format_problem(declaration: KeyDeclaration, value: str, *, detail: bool = True) -> str | None:
    """Why a string breaks the declared ``format``, completing "'value'..." (`` is not a date (YYYY-MM-DD)``,
    ``: February has 28 or 29 days``), or None. The one rule the engine's check and lint's conditions share.

    ``detail``: say what is wrong beyond the format's name (not for a masked value: it may quote the value).
    """
    name = declaration.format
    if name is None:
        return None
    if name == "phone" and declaration.region is not None:  # libphonenumber decides, in the declared region
        why = phone.problem(value, declaration.region, detail=detail)
        return None if why is None else f" {why}"
    if name == "email":
        why = email.problem(value, detail=detail)
        return None if why is None else f" {why}"
    if _format_ok(name, value):
        return None
    missing_day = _missing_day(value, declaration.date_order) if name == "date" and detail else None
    return f": {missing_day}" if missing_day is not None else f" is not {_FORMAT_HINT[name]}"


def check(declaration: KeyDeclaration, value: Any, *, shown: Any = None) -> Refusal | None:
    """Why ``value`` breaks ``declaration``, or None. ``shown`` replaces the value in reasons (masking)."""
    label = _short(value) if shown is None else shown
    if declaration.dontcare and value == DONTCARE:
        return None
    if not json_type_matches(declaration.type, value):
        return Refusal("type", f"{label} is not of type {declaration.type}")
    if declaration.enum is not None and value not in declaration.enum:
        close = closest_values(declaration, value) if isinstance(value, str) and declaration.fuzzy else ()
        if len(close) > 1 and shown is None:
            return Refusal("enum", f"{label} could be {or_list([_short(v) for v in close])}: which one is meant?")
        allowed = ", ".join(map(str, declaration.enum[:12])) + (", ..." if len(declaration.enum) > 12 else "")
        return Refusal("enum", f"{label} is not one of the allowed values ({allowed})")
    if isinstance(value, str):
        why = format_problem(declaration, value, detail=shown is None)
        if why is not None:
            return Refusal("format", f"{label}{why}")
        pattern = declaration.compiled_pattern
        if pattern is not None and pattern.search(value) is None:
            return Refusal("pattern", f"{label} does not match the pattern {declaration.pattern!r}")
        if declaration.min_length is not None and len(value) < declaration.min_length:
            return Refusal("length", f"{label} is shorter than {declaration.min_length} characters")
        if declaration.max_length is not None and len(value) > declaration.max_length:
            return Refusal("length", f"{label} is longer than {declaration.max_length} characters")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if declaration.minimum is not None and value < declaration.minimum:
            return Refusal("range", f"{label} is less than {_number(declaration.minimum)}")
        if declaration.maximum is not None and value > declaration.maximum:
            return Refusal("range", f"{label} is more than {_number(declaration.maximum)}")
    if isinstance(value, list):
        if declaration.min_items is not None and len(value) < declaration.min_items:
            return Refusal("items", f"{label} has fewer than {declaration.min_items} items")
        if declaration.max_items is not None and len(value) > declaration.max_items:
            return Refusal("items", f"{label} has more than {declaration.max_items} items")
        if declaration.items is not None:
            for position, item in enumerate(value):
                problem = check(declaration.items, item, shown=None if shown is None else shown)
                if problem is not None:
                    return Refusal(problem.rule, f"item {position + 1}: {problem.reason}")
    return None


def outside(declaration: KeyDeclaration, value: Any, today: dt.date | None) -> Refusal | None:
    """Why a valid date (or date-time) lies outside the key's ``window`` as of ``today``, or None; today is in
    both. Without the conversation's date (an application's write) there is nothing to compare with."""
    if declaration.window is None or today is None or not isinstance(value, str) or value == DONTCARE:
        return None
    day = _date(value[:10])
    if day is None or in_window(declaration.window, day, today):
        return None
    side = "past" if declaration.window == "future" else "future"
    return Refusal("window", f"{day} is in the {side} (today is {today.isoformat()})")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# --- grounding -----------------------------------------------------------------------------------


def _nothing_to_find(value: Any) -> bool:
    """Booleans and objects are judged by their declaration only: no words of the user's say them."""
    return isinstance(value, bool) or value is None or isinstance(value, dict)


class Grounding:
    """What the user said, and what the assistant offered them, prepared once per turn for many look-ups.

    ``texts`` are the user's (oldest first, this turn's last); ``offers`` the assistant's messages the user may
    be accepting. An offer grounds only a short value (``MAX_OFFER_WORDS``) found within one offer: what the
    assistant proposed, not its prose. ``today`` is the conversation's date, which relative dates ("next
    Friday") resolve against; without it only absolute dates ground a date.
    """

    def __init__(
        self,
        texts: Iterable[str],
        offers: Iterable[str] = (),
        today: dt.date | None = None,
        now: dt.datetime | None = None,
    ) -> None:
        self._texts = list(texts)
        self._offer_texts = list(offers)
        self._user = _Texts(self._texts)
        self._offers = [_Texts([offer]) for offer in self._offer_texts]
        self.today = today
        self.now = now
        """The clock's instant (aware), from which a key with a ``timezone`` reads its own date."""

    def today_for(self, declaration: KeyDeclaration | None) -> dt.date | None:
        """The conversation's date where the key's dates are lived (its ``timezone``), else ``today``."""
        if declaration is not None and declaration.timezone and self.now is not None:
            return declaration.today(self.now)
        return self.today

    def supports(self, value: Any, declaration: KeyDeclaration | None = None) -> bool:
        """Whether ``value`` is supported by the texts (an enum value also through its synonyms)."""
        return _nothing_to_find(value) or self.witness(value, declaration) is not None

    def witness(self, value: Any, declaration: KeyDeclaration | None = None) -> Witness | None:
        """What supports ``value``: for a date, time or number the expression that means it; None if nothing.

        A list is supported when every item is (the witness is its last item's).
        """
        if isinstance(value, list):
            found: Witness | None = Witness("", "words")
            for item in value:
                if _nothing_to_find(item):
                    continue
                found = self.witness(item, declaration.items if declaration else None)
                if found is None:
                    return None
            return found
        if _nothing_to_find(value):
            return None
        if declaration is not None and declaration.dontcare and value == DONTCARE:
            return _search(self._texts, "user", DONTCARE, dontcare_in, "dontcare")
        if declaration is not None and declaration.region is not None and isinstance(value, str):
            find = functools.partial(phone.phones_in, region=declaration.region)  # the same number, in any form
            return _search(self._texts, "user", value, find, "phone") or _search(
                self._offer_texts, "assistant", value, find, "phone"
            )
        kind = typed_kind(declaration)
        if kind is not None:
            assert declaration is not None  # a typed kind is a declaration's
            today, order, window = self.today_for(declaration), declaration.date_order, declaration.window
            return typed_witness(kind, value, self._texts, self._offer_texts, today, order, window)
        spellings = [str(value)]
        if declaration is not None and declaration.synonyms:
            spellings += [alias for alias, target in declaration.synonyms.items() if target == value]
        for spelling in spellings:
            source = self._supports_text(spelling)
            if source is not None:
                return Witness(spelling, "words", source)
        if declaration is not None and (declaration.enum is not None or declaration.synonyms):
            # "cafe" for Café, or a misspelling with `fuzzy`: a mention of the value and of no other
            return _search(self._texts, "user", value, functools.partial(sole_mentions, declaration), "words")
        return None

    def located(self, witness: Witness) -> Witness:
        """A lexical witness with the message that holds all its words and their smallest span in it (the newest
        such message of its source): the rule reads words across messages, so none may hold them all, and then the
        witness is returned as it was. Only for the record (provenance, explain): grounding itself never needs it."""
        if witness.kind != "words" or witness.start is not None or not witness.expression:
            return witness
        texts = self._texts if witness.source == "user" else self._offer_texts
        for back, text in enumerate(reversed(texts)):
            span = span_of(text, witness.expression)
            if span is not None:
                return dataclasses.replace(witness, messages_back=back, start=span[0], end=span[1])
        return witness

    def _supports_text(self, text: str) -> Source | None:
        words = _words(text)
        if not words:
            return None
        if self._user.supports(words):
            return "user"
        if len(words) <= MAX_OFFER_WORDS and any(offer.supports(words) for offer in self._offers):
            return "assistant"
        return None


def masked(definition: FSMDefinition, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the values of sensitive keys replaced by ``MASK``: what the library shows people."""
    sensitive = [key for key, d in (definition.context_keys or {}).items() if d.sensitive]
    if not sensitive:
        return data
    for key in sensitive:
        data = _mask_path(data, key)
    return data


def _mask_path(data: dict[str, Any], path: str) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    if head not in data:
        return data
    out = dict(data)
    out[head] = MASK if not rest else (_mask_path(out[head], rest) if isinstance(out[head], dict) else out[head])
    return out


# --- the policy a write goes through ------------------------------------------------------------


class KeyPolicy:
    """A definition's declarations applied to one write at a time (built per update; cheap).

    ``grounding`` is given for model writes only: the application's values need no witness.
    """

    def __init__(
        self,
        definition: FSMDefinition,
        grounding: Grounding | Callable[[], Grounding] | None = None,
        extractor: Extractor | None = None,
    ) -> None:
        self.definition = definition
        self._grounding = grounding
        self.extractor = extractor
        """This turn's candidates from the user's message, which repair a failing model value (``_extract``)."""
        self.extracted: dict[str, Extraction] = {}
        """Values the extractors filled or repaired, and questions they asked, by path (for the turn's record)."""
        self.asked_readings: set[str] = set()
        """Paths whose model value in words asks already which of its readings is meant (no second question)."""
        self.witnesses: dict[str, Witness] = {}
        """What grounded each model value this policy let through, by path (for the turn's record)."""
        self.repairs: dict[str, Reworded] = {}
        """Model values written in words and stored in their declared form, by path (for the turn's record)."""
        self.language: str | None = None
        """The conversation's language: a model's value is read in it too (``normalise``, ``reword``)."""

    @property
    def grounding(self) -> Grounding | None:
        """Built on first use: most turns write no grounded key, and the texts are the whole transcript."""
        if callable(self._grounding):
            self._grounding = self._grounding()
        return self._grounding

    def is_sensitive(self, path: str) -> bool:
        found = self.definition.declaration_for(path)
        return found is not None and found[1].sensitive

    def vet(self, path: str, value: Any, *, model: bool) -> tuple[Any, Refusal | None]:
        """The value to store (normalised), or why it may not be stored."""
        found = self.definition.declaration_for(path)
        if found is None:
            if model and not self.definition.additional_keys and not self.definition.is_declared_path(path):
                return value, Refusal("undeclared", f"{path!r} is not a declared key")
            return value, None
        declared, declaration = found
        shown = MASK if declaration.sensitive else None
        if declared != path:
            if declaration.type == "object":
                return value, None
            return value, Refusal("type", f"{declared!r} is declared as {declaration.type}, not an object")
        written = value
        value, problem = self.checked(path, declaration, value, model, shown)
        if problem is not None and model and self.extractor is not None and problem.rule in _REPAIRABLE:
            return self.extractor.replace(self, path, declaration, written, (value, problem), shown)
        return value, problem

    def checked(
        self, path: str, declaration: KeyDeclaration, value: Any, model: bool, shown: str | None
    ) -> tuple[Any, Refusal | None]:
        """Normalised, validated (a model's words read) and grounded: the value to store, or why not."""
        value = normalise(declaration, value, self.language if model else None)
        problem = check(declaration, value, shown=shown)
        if problem is not None and model and isinstance(value, str) and self._grounding is not None:
            value, problem = self._reword(path, declaration, value, problem, shown)
        if problem is None and model and declaration.window is not None and self.grounding is not None:
            problem = outside(declaration, value, self.grounding.today_for(declaration))
        if problem is not None:
            return value, problem
        # "dontcare" is always grounded: the model must not decide for the user that they have no preference
        needs_witness = declaration.is_grounded or (declaration.dontcare and value == DONTCARE)
        grounding = self.grounding if model and needs_witness and self._grounding is not None else None
        if grounding is not None and not _nothing_to_find(value):
            witness = grounding.witness(value, declaration)
            if witness is None:
                return value, Refusal("ungrounded", f"{shown or _short(value)} is not something the user said")
            both = unordered(witness.expression, grounding.today_for(declaration)) if not declaration.date_order else ()
            if witness.kind == "date" and both:  # "03/04" without a declared order: asked, not guessed
                said = "it" if shown else repr(witness.expression)
                return value, Refusal("ambiguous", f"{said} could be {or_list(both)}: which one is meant?")
            self.witnesses[path] = witness
        return value, None

    def _reword(
        self, path: str, declaration: KeyDeclaration, written: str, problem: Refusal, shown: str | None
    ) -> tuple[Any, Refusal | None]:
        """A value written in words read as the one value it means in the declared form (``_worded``), or why not."""
        grounding = self.grounding
        if grounding is None or problem.rule not in ("type", "format"):
            return written, problem
        today = grounding.today_for(declaration)
        words = reword(declaration, written, today, lambda v: grounding.witness(v, declaration), self.language)
        if words is None:
            return written, problem
        label = shown or _short(written)
        if words.missing is not None:
            return written, Refusal(problem.rule, f"{label}: {words.missing if shown is None else 'no such day'}")
        if words.ambiguous:
            self.asked_readings.add(path)
            readings = "has several readings" if shown else f"could be {or_list(words.readings)}"
            return written, Refusal(problem.rule, f"{label} {readings}: which one is meant?")
        self.repairs[path] = words
        return words.value, check(declaration, words.value, shown=shown)


__all__ = [
    "MASK",
    "MAX_OFFER_WORDS",
    "KeyPolicy",
    "REASK_RULES",
    "Grounding",
    "Refusal",
    "Rule",
    "Witness",
    "check",
    "format_problem",
    "masked",
    "normalise",
    "outside",
]
