"""Declared context keys: what a value may be, who may write it, and how it is shown.

A definition may declare the keys its conversation carries. A declaration is a
small JSON Schema subset (the part form bots need: type, enum, pattern, format,
bounds, list items) plus the fields only a conversation engine needs: where a
value may come from (``grounded``, ``writable_by``), how it is spoken about
(``display_name``, ``synonyms``, ``invalid_message``) and whether it may be
shown (``sensitive``). The engine checks every write against it
(``llm_fsm.engine._values``); the reply schema carries it, so constrained
decoding enforces the same rules before any check; lint reads it to type-check
conditions.

Names are snake_case like the rest of the format (``min_length``, not JSON
Schema's ``minLength``); lint points at the JSON Schema spelling when it sees one.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, field_validator, model_validator

from llm_fsm.definition._folding import fold
from llm_fsm.definition._languages import Text, pick


def _not_bool_or_text(value: Any) -> Any:
    # Lax pydantic would take true as 1 and "5" as 5; JSON Schema's numbers do not, and the two must agree.
    if isinstance(value, (bool, str)):
        raise ValueError("must be a number")
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return value
    return value


def _json_count(value: Any) -> Any:
    if isinstance(value, (bool, str)):
        raise ValueError("must be an integer")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


JsonNumber = Annotated[float, BeforeValidator(_not_bool_or_text)]
JsonCount = Annotated[int, Field(ge=0), BeforeValidator(_json_count)]

KeyType = Literal["string", "integer", "number", "boolean", "array", "object"]
KeyFormat = Literal["email", "phone", "date", "time", "date-time", "uri", "uuid"]

FORMATS: tuple[str, ...] = ("email", "phone", "date", "time", "date-time", "uri", "uuid")

#: formats whose values are copied from what the user said (so grounded by default); the others are derived
#: (a date from "next Friday", a time from "half past seven")
_COPIED_FORMATS = frozenset({"email", "phone", "uri", "uuid"})

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def json_type_matches(type_name: str, value: Any) -> bool:
    """Is ``value`` of JSON Schema type ``type_name``? (booleans are not numbers; 5.0 is an integer)"""
    if isinstance(value, bool):
        return type_name == "boolean"
    if type_name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return isinstance(value, _PYTHON_TYPES[type_name])


class KeyDeclaration(BaseModel):
    """One declared context key (or, under ``items``, the items of a list key)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    type: KeyType = Field(default="string", description="JSON type of the value (default string).")
    description: str | None = Field(default=None, description="What the value is; shown to the model beside the key.")
    examples: list[Any] | None = Field(default=None, description="Example values, shown to the model (never stored).")
    enum: list[Any] | None = Field(
        default=None,
        description=(
            "The allowed values. The model's value is matched case-insensitively (and through `synonyms`) "
            "and stored in the spelling given here."
        ),
    )
    synonyms: dict[str, Any] | None = Field(
        default=None,
        description=(
            'Other ways to say a value: {"NYC": "New York"}. With an enum each maps to one of its values; on a '
            "free-text string key, to the value stored when the model writes the alias (the alias the user said "
            "grounds it)."
        ),
    )
    fuzzy: JsonNumber | None = Field(
        default=None,
        description=(
            "Similarity (0 < x <= 1) a misspelt enum value or synonym must reach to count as that value "
            '("moderatly priced" for "moderately priced" at 0.85); a spelling as close to two values is asked '
            'about. Needs rapidfuzz: pip install -e ".[values]" from a checkout.'
        ),
    )
    dontcare: StrictBool = Field(
        default=False,
        description=(
            'The key may take the value "dontcare" (the user has no preference) whatever its type, format or '
            'enum; stored only when the user said so ("I don\'t mind", "any time is fine").'
        ),
    )
    pattern: str | None = Field(
        default=None, description="A regular expression a string value must match (searched, as in JSON Schema)."
    )
    format: KeyFormat | None = Field(
        default=None,
        description=(
            "A string format: email, phone, date (stored as YYYY-MM-DD), time (HH:MM, 24 h), "
            "date-time (ISO 8601), uri, uuid. Common spellings are normalised to the stored form."
        ),
    )
    region: str | None = Field(
        default=None,
        description=(
            "For format: phone, the ISO 3166 two-letter region (GB, US, DE) a number written without a country code "
            "is read in: the value is then validated and stored in E.164 (+442079460958) and grounded by the same "
            'number in any form. Needs phonenumbers: pip install -e ".[values]" from a checkout.'
        ),
    )
    minimum: JsonNumber | None = Field(default=None, description="Smallest allowed number (inclusive).")
    maximum: JsonNumber | None = Field(default=None, description="Largest allowed number (inclusive).")
    min_length: JsonCount | None = Field(default=None, description="Fewest characters of a string value.")
    max_length: JsonCount | None = Field(default=None, description="Most characters of a string value.")
    items: KeyDeclaration | None = Field(
        default=None, description="Declaration every item of a list (type: array) must satisfy."
    )
    min_items: JsonCount | None = Field(default=None, description="Fewest items of a list value.")
    max_items: JsonCount | None = Field(default=None, description="Most items of a list value.")
    grounded: StrictBool | None = Field(
        default=None,
        description=(
            "Refuse a model value the user never said (docs/definition-format.md, 'Grounding'). Default: true "
            "for free-text strings and for email, phone, uri and uuid; false for enums, dates, times, numbers, "
            "booleans and lists."
        ),
    )
    writable_by: Literal["model", "application"] = Field(
        default="model",
        description=(
            "Who may write the key: model (from the conversation; the application may too) or application "
            "only (hooks, update_context, initial context; the model's writes are dropped)."
        ),
    )
    sensitive: StrictBool = Field(
        default=False,
        description=(
            "Mask the value wherever the library shows or logs data (explain, trace, CLI); it is still "
            "stored and still given to the model."
        ),
    )
    invalid_message: Text | None = Field(
        default=None,
        description=(
            "What the assistant tells the user when a value for this key is refused (a string, or one per language)."
        ),
    )
    display_name: Text | None = Field(
        default=None,
        description=(
            "How the key is named to the user, e.g. in a confirmation read-back (a string, or one per language)."
        ),
    )
    extract: Literal["auto", "off"] = Field(
        default="auto",
        description=(
            "Whether the engine's own extractors may fill this key from the user's message when the model leaves "
            "it out, or repair a model value that fails (docs/definition-format.md, 'Extractors'): auto (dates, "
            "times, numbers and enum values the state collects) or off."
        ),
    )

    timezone: str | None = Field(
        default=None,
        description=(
            'IANA time zone ("Europe/Paris") of a date key\'s relative dates: "today", "tomorrow" and "next Friday" '
            "are read on the conversation clock's date in that zone. Default: the clock's own date."
        ),
    )
    window: Literal["future", "past"] | None = Field(
        default=None,
        description=(
            "Dates a date key accepts: future (today or later) or past (today or earlier); a date outside is "
            "refused with invalid_message, and a weekday said is read inside the window."
        ),
    )
    date_order: Literal["DMY", "MDY"] | None = Field(
        default=None,
        description=(
            'How a numeric date such as "03/04" or "03/04/2019" is read: day first (DMY) or month first (MDY). '
            "Without it such a date has two readings and the user is asked which one is meant."
        ),
    )

    @field_validator("region")
    @classmethod
    def _region_in_capitals(cls, region: str | None) -> str | None:
        return region.upper() if region is not None else None

    @model_validator(mode="after")
    def _coherent(self) -> KeyDeclaration:
        # Checked at load time so a typo in a declaration fails the file, not a conversation.
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern {self.pattern!r} does not compile: {exc}") from None
        if self.enum is not None:
            if not self.enum:
                raise ValueError("enum must list at least one value")
            wrong = [v for v in self.enum if not json_type_matches(self.type, v)]
            if wrong:
                raise ValueError(f"enum values {wrong!r} are not of type {self.type}")
        if self.synonyms:
            if self.enum is None and self.type != "string":
                raise ValueError("synonyms need an enum or a string key: each synonym names one of its values")
            if self.enum is None:
                if not all(isinstance(v, str) for v in self.synonyms.values()):
                    raise ValueError("synonyms of a free-text key map to strings, the values stored")
            else:
                unknown = [v for v in self.synonyms.values() if v not in self.enum]
                if unknown:
                    raise ValueError(f"synonyms map to values not in enum: {unknown!r}")
        if self.fuzzy is not None:
            if not 0 < self.fuzzy <= 1:
                raise ValueError(f"fuzzy ({self.fuzzy}) is a similarity: more than 0, at most 1")
            if self.enum is None and not self.synonyms:
                raise ValueError("fuzzy matches spellings of enum values or synonyms: declare an enum or synonyms")
            try:
                import rapidfuzz  # noqa: F401  (checked at load: a missing extra fails the file, not a conversation)
            except ImportError:
                raise ValueError('fuzzy needs rapidfuzz: pip install -e ".[values]" from a checkout') from None
        if self.format is not None and self.type != "string":
            raise ValueError(f"format {self.format!r} applies to strings, not {self.type}")
        if self.region is not None:
            if self.format != "phone":
                raise ValueError(f"region applies to format: phone, not {self.format or 'a key without a format'}")
            # the library is needed by a key that declares a region only; without it the file fails now, naming
            # the extra, not the first conversation that writes a number (the module is read then too: a definition
            # without a region loads without it)
            from llm_fsm.definition._phone import region_problem

            why = region_problem(self.region)
            if why is not None:
                raise ValueError(f"region {self.region!r} {why}")
        for low, high in (("minimum", "maximum"), ("min_length", "max_length"), ("min_items", "max_items")):
            a, b = getattr(self, low), getattr(self, high)
            if a is not None and b is not None and a > b:
                raise ValueError(f"{low} ({a}) is greater than {high} ({b})")
        dated = [name for name in ("timezone", "window", "date_order") if getattr(self, name) is not None]
        if dated and self.format not in ("date", "date-time"):
            raise ValueError(f"{dated[0]} applies to dates (format: date or date-time), not {self.format or self.type}")
        if self.timezone is not None:
            _zone(self.timezone)
        if self.items is not None and self.type != "array":
            raise ValueError(f"items applies to lists (type: array), not {self.type}")
        return self

    @property
    def is_grounded(self) -> bool:
        """Whether a model value must be supported by what the user said (the documented default applies)."""
        if self.grounded is not None:
            return self.grounded
        if self.type != "string" or self.enum is not None:
            return False
        return self.format is None or self.format in _COPIED_FORMATS

    @functools.cached_property
    def compiled_pattern(self) -> re.Pattern[str] | None:
        return re.compile(self.pattern) if self.pattern is not None else None

    @functools.cached_property
    def enum_lookup(self) -> dict[str, Any]:
        """Folded spelling → canonical enum value, synonyms included (for normalising model values)."""
        table: dict[str, Any] = {}
        for value in self.enum or ():
            if isinstance(value, str):
                table.setdefault(fold(value), value)
        for alias, value in (self.synonyms or {}).items():
            table.setdefault(fold(alias), value)
        return table

    def today(self, now: dt.datetime) -> dt.date:
        """The date of the clock's instant ``now`` (aware) where this key's dates are lived (``timezone``)."""
        return now.astimezone(_zone(self.timezone)).date() if self.timezone else now.date()

    def label(self, key: str, language: str | None = None, default: str | None = None) -> str:
        """How the key is named to people (in ``language``, falling back as ``pick`` does to ``default``)."""
        return pick(self.display_name, language, default) or key.replace("_", " ")


@functools.cache
def _zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (an IANA name such as 'Europe/Paris')") from None


__all__ = ["FORMATS", "KeyDeclaration", "KeyFormat", "KeyType", "fold", "json_type_matches"]
