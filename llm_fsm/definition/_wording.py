"""Approved wording: a fixed text a state says, with placeholders filled from the context.

Some sentences cannot be left to the model (a legal disclosure, a price read-back): the author writes them once,
and the engine says them as written. This module is the format's side (what ``say:`` and ``responses:`` are, and
which placeholders a text has); ``engine._wording`` fills them in at run time and ``lint._checks_wording`` checks them.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llm_fsm.definition._languages import Text


def _given(name: str) -> dict[str, Any]:
    """JSON Schema for "field ``name`` is given" (null counts as absent: a dumped definition has it)."""
    return {"required": [name], "properties": {name: {"type": ["string", "object"]}}}


class Say(BaseModel):
    """The long form of ``say:``: the text (or a ``responses`` id), how strictly it is said, which secrets it may
    show."""

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        validate_default=False,
        json_schema_extra={
            "oneOf": [
                {**_given("text"), "not": _given("response")},
                {**_given("response"), "not": _given("text")},
            ]
        },
    )

    text: Text | None = Field(
        default=None,
        description=(
            "The approved text, with {key} placeholders (Python format fields; {{ and }} are literal braces): a "
            "string, or one per language."
        ),
    )
    response: str | None = Field(default=None, description="Id of a text in the definition's `responses` table.")
    mode: Literal["strict", "guided"] = Field(
        default="strict",
        description=(
            "strict: the reply is exactly this text. guided: the model writes the reply and must include the text "
            "verbatim; it is asked once to rewrite, then the text alone is said."
        ),
    )
    reveal: list[str] | None = Field(
        default=None,
        description="Sensitive keys this text may show; any other sensitive key is never filled in.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Say:
        if (self.text is None) == (self.response is None):
            raise ValueError("say needs exactly one of text or response")
        return self


@dataclass(frozen=True)
class Placeholder:
    """One ``{path:spec}`` field of a text."""

    path: str
    spec: str


@dataclass(frozen=True)
class Parsed:
    """A text split into literal pieces and placeholders, alternating: ``pieces[i]`` precedes ``fields[i]``."""

    pieces: tuple[str, ...]
    fields: tuple[Placeholder, ...]


def parse(text: str) -> Parsed:
    """The text's literal pieces and placeholders; ValueError for a malformed text (an unmatched brace)."""
    pieces: list[str] = []
    fields: list[Placeholder] = []
    literal = ""
    for before, name, spec, conversion in string.Formatter().parse(text):
        literal += before
        if name is None:
            continue
        if not name or "[" in name:
            raise ValueError(f"placeholder {{{name}}} must name a context key (dot paths allowed)")
        if spec and ("{" in spec):
            raise ValueError(f"placeholder {{{name}}} has a nested field in its format spec")
        if conversion is not None:
            raise ValueError(f"placeholder {{{name}!{conversion}}}: conversions are not supported")
        pieces.append(literal)
        literal = ""
        fields.append(Placeholder(name, spec or ""))
    pieces.append(literal)
    return Parsed(tuple(pieces), tuple(fields))


def spec_error(spec: str) -> str | None:
    """Why a format spec is invalid for every value (None: some value formats with it)."""
    for sample in (1.5, 1, "text"):
        try:
            format(sample, spec)
        except (ValueError, TypeError):
            continue
        return None
    return f"format spec {spec!r} is invalid"
