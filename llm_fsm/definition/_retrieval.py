"""Retrieval a definition declares: snippets of the team's documents the engine looks up for a state's prompt.

The engine, not the model, decides to retrieve (Parlant's design, issue 25): a state's ``retrieve:`` (or the
definition's, for every state without its own) names a retriever the application registered, what to ask it
and how much of its answer the prompt may hold. The model only reads the snippets, as data, and may cite their
ids; a failing retriever never fails the turn unless the definition sends it to a state that handles it.
"""

from __future__ import annotations

import re
import string
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

ON_ERROR_CONTINUE = "continue"
"""``on_error: continue``: the turn goes on without snippets (the failure is recorded)."""

DEFAULT_K = 4
MAX_K = 50
DEFAULT_MAX_CHARS = 4000
MAX_CHARS = 100_000
"""A prompt budget, not a document size: more than this is no longer a state's knowledge."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,99}$")


def _json_integer(value: Any) -> Any:
    # JSON Schema's integer: 5 and 5.0, never "5" or true (pydantic's lax int would take both)
    if isinstance(value, (bool, str)):
        raise ValueError("must be an integer")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def template_keys(template: str) -> list[str]:
    """The context keys a query template names (``{order.id}`` names ``order.id``); ValueError when malformed."""
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        raise ValueError(f"query template is malformed: {exc}") from None
    if any(not name for name in fields):
        raise ValueError("a query placeholder names a context key: {key} or {object.key}, never {}")
    return fields


class RetrieveDeclaration(BaseModel):
    """What a state (or, at the top level, every state) retrieves before the model is asked."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_default=False)

    retriever: str = Field(
        description="Name the application registered the retriever under (FSMManager(retrievers=...)).",
        json_schema_extra={"pattern": _NAME.pattern},
    )
    query: str | None = Field(
        default=None,
        description=(
            "What to ask the retriever: the user's message when unset, or a template over context keys "
            "('{product} refund policy'); a template whose keys have no value yet is not asked (no snippets)."
        ),
    )
    k: Annotated[int, BeforeValidator(_json_integer)] = Field(
        default=DEFAULT_K, ge=1, le=MAX_K, description=f"Snippets asked for, best first (default {DEFAULT_K})."
    )
    max_chars: Annotated[int, BeforeValidator(_json_integer)] = Field(
        default=DEFAULT_MAX_CHARS,
        ge=0,
        le=MAX_CHARS,
        description=(
            "Characters of snippet text the prompt may hold: snippets are taken best first and the last one cut "
            f"to fit (default {DEFAULT_MAX_CHARS}; 0 retrieves nothing, which lint reports)."
        ),
    )
    on_error: str = Field(
        default=ON_ERROR_CONTINUE,
        description=(
            "What a failure (an exception, a timeout, an unregistered retriever) does: 'continue' (default) "
            "answers without snippets; a state id moves the conversation there. Either way it is recorded."
        ),
    )
    description: str | None = Field(default=None, description="What is looked up, for people reading the file.")

    @field_validator("retriever")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                "a retriever name is a letter or underscore, then letters, digits or _ . : - (at most 100 characters)"
            )
        return value

    @field_validator("query")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is not None:
            template_keys(value)
        return value

    @property
    def query_keys(self) -> list[str]:
        """Context keys the query reads (none: the user's message)."""
        return template_keys(self.query) if self.query is not None else []


__all__ = [
    "DEFAULT_K",
    "DEFAULT_MAX_CHARS",
    "MAX_CHARS",
    "MAX_K",
    "ON_ERROR_CONTINUE",
    "RetrieveDeclaration",
    "template_keys",
]
