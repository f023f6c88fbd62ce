"""Approved wording at run time: the text a state says, with its placeholders filled from the context.

A value is inserted as text, once: a value holding ``{x}`` is never formatted again. A text that cannot be filled
(an unset key, a sensitive key not revealed, a value its format spec refuses) is not said at all: the reply falls
back to the model's own message, and the trace says why. Never "None" or a bare ``{total}`` in a reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from llm_fsm.definition._languages import pick
from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.definition._wording import Say, parse
from llm_fsm.engine._context import _MISSING, get_path, is_empty


@dataclass(frozen=True)
class Wording:
    """The approved text of the state reached: filled (``text``), or why it could not be (``reason``)."""

    mode: Literal["strict", "guided"]
    text: str | None
    reason: str | None = None


def say_of(state: State) -> Say | None:
    """The state's ``say`` in its long form."""
    say = state.say
    return say if say is None or isinstance(say, Say) else Say(text=say)


def template_of(definition: FSMDefinition, say: Say, language: str | None = None) -> str | None:
    """The text a ``say`` names, in ``language``: its own, or its ``responses`` entry (None: an unknown id)."""
    text = say.text if say.text is not None else (definition.responses or {}).get(say.response or "")
    return pick(text, language, definition.language)


def approved(
    definition: FSMDefinition, state: State, data: Mapping[str, Any], language: str | None = None
) -> Wording | None:
    """The filled approved text of ``state`` in ``language`` (None when it has none)."""
    say = say_of(state)
    if say is None:
        return None
    template = template_of(definition, say, language)
    if template is None:
        return Wording(say.mode, None, f"unknown response id {say.response!r}")
    text, reason = fill(definition, template, data, set(say.reveal or ()))
    return Wording(say.mode, text, reason)


def fill(
    definition: FSMDefinition, template: str, data: Mapping[str, Any], reveal: set[str]
) -> tuple[str | None, str | None]:
    """``template`` with its placeholders filled, or (None, why not)."""
    try:
        parsed = parse(template)
    except ValueError as error:
        return None, str(error)
    out = [parsed.pieces[0]]
    for field, after in zip(parsed.fields, parsed.pieces[1:], strict=True):
        found = definition.declaration_for(field.path)
        if found is not None and found[1].sensitive and not ({field.path, found[0]} & reveal):
            return None, f"{field.path!r} is sensitive and not revealed"
        value = get_path(data, field.path)
        if value is _MISSING or is_empty(value):
            return None, f"{field.path!r} is not set"
        try:
            out.append(format(value, field.spec) if field.spec else str(value))
        except (ValueError, TypeError) as error:
            return None, f"{field.path!r} does not format with {field.spec!r}: {error}"
        out.append(after)
    return "".join(out), None
