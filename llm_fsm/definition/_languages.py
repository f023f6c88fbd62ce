"""Several languages in one definition: which it declares, and a text written once per language.

A team serving English and German otherwise keeps two definitions that drift. A definition declares its
``languages`` and a ``default_language``; every text the definition writes for the user (a state's ``say``, a
``responses`` entry, a key's ``invalid_message`` and ``display_name``) may then be one string or a mapping
language → string, and ``pick`` chooses the one for a conversation's language. The same ``Text`` type serves any
text added later, so a new field becomes per-language by being declared as ``Text``.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field, StringConstraints, WithJsonSchema

if TYPE_CHECKING:
    from llm_fsm.definition._model import FSMDefinition

TAG_PATTERN = r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$"
"""A BCP 47 language tag as definitions use them: a primary language (``en``, ``de``), then optional subtags
(``de-CH``, ``zh-Hant``). Private-use and grandfathered tags are not accepted."""

_TAG = re.compile(TAG_PATTERN)

SHIPPED_LANGUAGES = ("en", "de")
"""The languages the library's own sentences are written in (``engine._languages.SENTENCES``)."""

LanguageTag = Annotated[str, StringConstraints(pattern=TAG_PATTERN)]

_PER_LANGUAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "propertyNames": {"pattern": TAG_PATTERN},
    "additionalProperties": {"type": "string"},
}

PerLanguage = Annotated[
    dict[LanguageTag, str],
    Field(min_length=1),
    WithJsonSchema(_PER_LANGUAGE_SCHEMA),
]
"""The text in each language: ``{en: "Hello", de: "Hallo"}``."""

Text = str | PerLanguage
"""A text the user may read: one string for every language, or one per language."""


def is_tag(value: str) -> bool:
    """Whether ``value`` is a language tag of the accepted shape."""
    return bool(_TAG.match(value))


def primary(tag: str) -> str:
    """The primary language of a tag: ``de`` for ``de-CH``."""
    return tag.split("-", 1)[0].lower()


def pick(text: Text | None, language: str | None, default: str | None = None) -> str | None:
    """The text for ``language``.

    A plain string is every language's. From a mapping: the language's own entry, else the entry of its primary
    language (``de`` for ``de-CH``, or ``de-CH`` for ``de`` when that is the only German one), else the default
    language's, else the first entry written. None only for no text at all: a reply never lacks a text because a
    translation is missing (lint reports the gap: FSM070).
    """
    if text is None or isinstance(text, str):
        return text
    for wanted in (language, default):
        if wanted is None:
            continue
        if wanted in text:
            return text[wanted]
        base = primary(wanted)
        for tag, value in text.items():
            if primary(tag) == base:
                return value
    return next(iter(text.values()), None)


def languages_of(text: Text | None) -> tuple[str, ...]:
    """The languages a text is written in (empty for a plain string: it is every language's)."""
    return tuple(text) if isinstance(text, Mapping) else ()


@dataclass(frozen=True)
class UserText:
    """One text a definition writes for the user, with where it is (a JSON path, for lint)."""

    path: tuple[str | int, ...]
    text: Text


def user_texts(definition: FSMDefinition) -> Iterator[UserText]:
    """Every text the definition writes for the user: what must exist in each declared language.

    Found by type, not by name: any field declared as ``Text`` (``say``, ``responses``, ``invalid_message``,
    ``display_name``, and whatever text a later field adds), anywhere in the definition."""
    yield from _walk(definition, ())


def _walk(node: BaseModel, path: tuple[str | int, ...]) -> Iterator[UserText]:
    for name, field in type(node).model_fields.items():
        value = getattr(node, name)
        if value is not None:
            yield from _within(value, field.annotation, (*path, field.alias or name))


def _within(value: Any, annotation: Any, path: tuple[str | int, ...]) -> Iterator[UserText]:
    """The texts in ``value``, read as its declared type says (a ``responses`` table is a mapping of texts, a
    per-language text a mapping of languages: only the declaration tells them apart)."""
    if isinstance(value, BaseModel):
        yield from _walk(value, path)
        return
    arms = _arms(annotation)
    if isinstance(value, (str, dict)) and any(arm == PerLanguage for arm in arms):
        yield UserText(path, value)
        return
    for arm in arms:
        origin, args = typing.get_origin(arm), typing.get_args(arm)
        if origin is dict and isinstance(value, dict) and len(args) == 2:
            for key, item in value.items():
                yield from _within(item, args[1], (*path, key))
            return
        if origin is list and isinstance(value, list) and args:
            for index, item in enumerate(value):
                yield from _within(item, args[0], (*path, index))
            return


def _arms(annotation: Any) -> tuple[Any, ...]:
    """The alternatives of a union type (the type itself when it is no union)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(arm for inner in typing.get_args(annotation) for arm in _arms(inner))
    return (annotation,)


__all__ = [
    "LanguageTag",
    "PerLanguage",
    "SHIPPED_LANGUAGES",
    "TAG_PATTERN",
    "Text",
    "UserText",
    "is_tag",
    "languages_of",
    "pick",
    "primary",
    "user_texts",
]
