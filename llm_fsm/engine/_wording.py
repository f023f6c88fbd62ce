"""Approved wording at run time: which text a turn says (a refusal, the transition it arrived by, or its state's),
with its placeholders filled from the context.

One text per turn, the most specific first: a move the engine refused says that transition's ``refusal``; a move
says the ``say`` of the transition that led into the state the turn ends in (after chaining, the last step: the
earlier steps' texts speak of states the user is already past); otherwise the state's own ``say``.

A value is inserted as text, once: a value holding ``{x}`` is never formatted again. A text that cannot be filled
(an unset key, a sensitive key not revealed, a value its format spec refuses) is not said at all: the reply falls
back to the model's own message, and the trace says why. Never "None" or a bare ``{total}`` in a reply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, Literal

from llm_fsm.definition._languages import Text, pick
from llm_fsm.definition._model import FSMDefinition, State, Transition
from llm_fsm.definition._wording import Say, parse
from llm_fsm.engine._context import _MISSING, get_path, is_empty
from llm_fsm.engine._records import Verdict

_TAKEN = frozenset({"proposal_accepted", "guarded_override", "guarded_fallback", "chained"})
"""Verdicts that took a declared transition (an action's ``on_error`` move is not one)."""


@dataclass(frozen=True)
class Wording:
    """The approved text of the state reached: filled (``text``), or why it could not be (``reason``)."""

    mode: Literal["strict", "guided"]
    text: str | None
    reason: str | None = None
    origin: dict[str, str] = dataclass_field(default_factory=dict)
    """Who says it when it is not the state: ``{"transition": "a -> b"}`` or ``{"refusal": "a -> b"}`` (for the
    trace)."""

    @property
    def own(self) -> bool:
        """The state's own text (its guided prompt already tells the model the text)."""
        return not self.origin


def long_form(say: Text | Say | None) -> Say | None:
    """A ``say`` (a state's, a transition's or a refusal) in its long form (a text per language is its ``text``)."""
    return say if say is None or isinstance(say, Say) else Say(text=say)


def say_of(state: State) -> Say | None:
    """The state's ``say`` in its long form."""
    return long_form(state.say)


def template_of(definition: FSMDefinition, say: Say, language: str | None = None) -> str | None:
    """The text a ``say`` names, in ``language``: its own, or its ``responses`` entry (None: an unknown id). Every
    text the engine says (a state's, a transition's, a refusal) is picked here, and only here; fsm-lint checks what
    it picks."""
    text = say.text if say.text is not None else (definition.responses or {}).get(say.response or "")
    return pick(text, language, definition.language)


def approved(
    definition: FSMDefinition, state: State, data: Mapping[str, Any], language: str | None = None
) -> Wording | None:
    """The filled approved text of ``state`` in ``language`` (None when it has none)."""
    return worded(definition, state.say, data, language=language)


def worded(
    definition: FSMDefinition,
    given: Text | Say | None,
    data: Mapping[str, Any],
    origin: dict[str, str] | None = None,
    *,
    language: str | None = None,
) -> Wording | None:
    """A ``say`` filled from ``data`` in ``language`` (None when there is none)."""
    say = long_form(given)
    if say is None:
        return None
    template = template_of(definition, say, language)
    if template is None:
        return Wording(say.mode, None, f"unknown response id {say.response!r}", origin or {})
    text, reason = fill(definition, template, data, set(say.reveal or ()))
    return Wording(say.mode, text, reason, origin or {})


def turn_wording(
    definition: FSMDefinition,
    state: State,
    data: Mapping[str, Any],
    *,
    before: State | None,
    steps: Sequence[Verdict],
    refused_target: str | None,
    language: str | None = None,
) -> Wording | None:
    """The approved text of a turn that ends in ``state``: the refusal of the move refused, else the say of the
    transition the turn arrived by, else the state's own.

    ``before``: the state the turn started in, when the turn ended in the same flow (None: only the state's text
    can apply; a sub-flow started or finished is not a transition of ``before``). ``steps``: the turn's verdict
    then its chained steps. ``refused_target``: the state the refused move aimed at."""
    if before is not None and steps:
        last = steps[-1]
        if last.kind == "stay_rejected" and state.id == before.id and refused_target:
            refused = refusal_for(definition, before.id, refused_target)
            if refused is not None:
                origin = {"refusal": f"{before.id} -> {refused.target_state}"}
                return worded(definition, refused.refusal, data, origin, language=language)
        arrival = arrived_by(definition, before.id, steps)
        if arrival is not None and arrival.say is not None and arrival.target_state == state.id:
            source = steps[-2].target_state if len(steps) > 1 else before.id
            return worded(definition, arrival.say, data, {"transition": f"{source} -> {state.id}"}, language=language)
    return approved(definition, state, data, language)


def refused_target(state: State, route: str, proposal: str | None) -> str | None:
    """The state a refused move aimed at: at a confirmation step a yes aims at ``on_yes`` and a no at ``on_no``
    (the model's own target is not read there); a flow operation aims at no state."""
    confirmation = state.confirmation
    if confirmation is not None and route == "confirm":
        return confirmation.on_yes
    if confirmation is not None and route == "deny":
        return confirmation.on_no if confirmation.on_no != "cancel" else None
    if route in ("start_flow", "resume_flow"):
        return None
    return proposal


def refusal_for(definition: FSMDefinition, state_id: str, target: str) -> Transition | None:
    """The transition of ``state_id`` to ``target`` whose refusal is said: the first with one, best priority first
    (ties: declared first), as the engine would have chosen among them."""
    to_target = (t for t in _transitions(definition, state_id) if t.target_state == target)
    return next((t for t in sorted(to_target, key=lambda t: t.priority) if t.refusal is not None), None)


def arrived_by(definition: FSMDefinition, state_before: str, steps: Sequence[Verdict]) -> Transition | None:
    """The declared transition the last step took (the turn's move, or its last chained step); None when the last
    step was no declared transition (an action's ``on_error``, a stay)."""
    last = steps[-1]
    if last.kind not in _TAKEN or last.transition_index is None:
        return None
    source = steps[-2].target_state if len(steps) > 1 else state_before
    transitions = _transitions(definition, source)
    index = last.transition_index
    return transitions[index] if 0 <= index < len(transitions) else None


def _transitions(definition: FSMDefinition, state_id: str) -> list[Transition]:
    """The transitions a verdict's ``transition_index`` counts in: the state's own, then the global ones that apply
    (``FSMDefinition.transitions_from``), so a global transition says its text and its refusal like a state's own."""
    return definition.transitions_from(state_id) if state_id in definition.states else []


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
