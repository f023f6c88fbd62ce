"""Checks of approved wording (``say``, ``refusal`` and ``responses``): FSM053–FSM057 and FSM067–FSM069.

A text that cannot be filled is not said (the reply falls back to the model's message), so every reason it could
not be is found here, before a conversation meets it: a malformed text or format spec, an unknown response id, a
placeholder naming an undeclared key, a sensitive key not revealed, a key nothing ever sets (FSM057), and a key not
set on every way to where the text is said (FSM067, from ``_always_set``). Texts are said by states, by transitions
(when the turn arrives by one) and by refusals (when the move along one is refused); a refusal no move can meet
(FSM068) and a transition's text chaining may pass by (FSM069) are reported too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from llm_fsm.definition._documents import Path
from llm_fsm.definition._model import FSMDefinition, GlobalTransition, State, Transition
from llm_fsm.definition._wording import Say, parse, spec_error
from llm_fsm.engine._wording import long_form, template_of
from llm_fsm.lint._always_set import always_set, required_by
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import KeyCover


@dataclass(frozen=True)
class _Text:
    """One ``say`` of the definition: where it is, who says it (for messages), and the keys set whenever it is said
    (None: its state is not reachable, nothing to judge)."""

    where: Path
    speaker: str
    say: Say
    set_then: KeyCover | None


def wording(run: LintRun) -> None:
    """FSM053–FSM057 and FSM067 for every text, FSM068–FSM069 for transitions."""
    definition = run.definition
    if definition is None or run.partial:
        return
    set_somewhere = KeyCover(_set_keys(definition))
    for text in _texts(definition):
        templates = _templates(definition, text.say)  # the engine's own pick: what is checked is what is said
        if None in templates:
            known = ", ".join(sorted(definition.responses or {})) or "none"
            run.add(
                "say-unknown-response",
                text.where,
                f"{text.speaker} says response {text.say.response!r}, which the responses table does not have",
                f"add it to responses (known ids: {known})",
            )
            continue
        for template in templates:  # every language's text is said in some conversation
            if template is not None:
                _check_text(run, definition, text, template, set_somewhere)
    for state_id, state in definition.states.items():
        for index, transition in enumerate(state.transitions):
            _check_transition(run, definition, state_id, state, index, transition)
    for position, global_transition in enumerate(definition.global_transitions or ()):
        _check_global(run, definition, position, global_transition)


def _templates(definition: FSMDefinition, say: Say) -> list[str | None]:
    """The text ``say`` gives in each language a conversation can be in (the declared ones and any it is written
    in), as the engine picks it; None for an unknown response id."""
    raw = say.text if say.text is not None else (definition.responses or {}).get(say.response or "")
    languages = [*(definition.languages or ()), *(raw if isinstance(raw, dict) else ())] or [None]
    return list(dict.fromkeys(template_of(definition, say, language) for language in languages))


def _texts(definition: FSMDefinition) -> Iterator[_Text]:
    """Every text, with the keys set whenever it is said: a state's, those set in the state; a transition's, those
    and the ones its conditions require; a refusal's, those of the state only (its conditions did not hold)."""
    keys = always_set(definition)
    for state_id, state in definition.states.items():
        here = keys.get(state_id)
        if (say := long_form(state.say)) is not None:
            yield _Text(("states", state_id, "say"), f"state {state_id!r}", say, _cover(here))
        for index, transition in enumerate(state.transitions):
            name = f"{state_id} -> {transition.target_state}"
            where = ("states", state_id, "transitions", index)
            if (say := long_form(transition.say)) is not None:
                extra = required_by(transition)
                yield _Text((*where, "say"), f"transition {name!r}", say, _cover(here, extra))
            if (say := long_form(transition.refusal)) is not None:
                yield _Text((*where, "refusal"), f"the refusal of {name!r}", say, _cover(here))
    for position, global_transition in enumerate(definition.global_transitions or ()):
        # said when taken (or refused) from any state it applies in: what is set in all of them
        reached = [keys[s] for s in definition.states if definition.applies_in(global_transition, s) and s in keys]
        here = frozenset.intersection(*reached) if reached else None
        name = f"global -> {global_transition.target_state}"
        declared_at: Path = ("global_transitions", position)
        if (say := long_form(global_transition.say)) is not None:
            extra = required_by(global_transition)
            yield _Text((*declared_at, "say"), f"global transition {name!r}", say, _cover(here, extra))
        if (say := long_form(global_transition.refusal)) is not None:
            yield _Text((*declared_at, "refusal"), f"the refusal of {name!r}", say, _cover(here))


def _cover(keys: frozenset[str] | None, extra: frozenset[str] = frozenset()) -> KeyCover | None:
    return None if keys is None else KeyCover(keys | extra)


def _check_text(run: LintRun, definition: FSMDefinition, text: _Text, template: str, set_somewhere: KeyCover) -> None:
    where, speaker = text.where, text.speaker
    try:
        parsed = parse(template)
    except ValueError as error:
        run.add("say-invalid-placeholder", where, f"{speaker}: {error}", "write {{ and }} for literal braces")
        return
    declared = bool(definition.context_keys)
    reveal = set(text.say.reveal or ())
    for field in parsed.fields:
        problem = spec_error(field.spec) if field.spec else None
        if problem is not None:
            run.add("say-invalid-placeholder", where, f"{speaker}: {{{field.path}}}: {problem}", None)
        found = definition.declaration_for(field.path)
        if declared and not definition.is_declared_path(field.path):
            run.add(
                "say-undeclared-key",
                where,
                f"{speaker} says {{{field.path}}}, which is not a declared key: the text is never said",
                "declare it in context_keys, or fix the placeholder's name",
            )
        elif found is not None and found[1].sensitive and not ({field.path, found[0]} & reveal):
            run.add(
                "say-sensitive-key",
                where,
                f"{speaker} says {{{field.path}}}, a sensitive key: the engine never fills it in",
                f"list it in the say's reveal ([{found[0]}]) if this text may show it",
            )
        if not set_somewhere.covers(field.path):
            run.add(
                "say-key-never-set",
                where,
                f"{speaker} says {{{field.path}}}, which no state collects and neither the application nor "
                "an action provides",
                "collect it in a state's required_context_keys, or list it in application_context_keys",
            )
        elif text.set_then is not None and not text.set_then.guarantees(field.path):
            run.add(
                "say-key-not-always-set",
                where,
                f"{speaker} says {{{field.path}}}, which is not set on every way to where it is said: there the "
                "text is not said and the model's reply stands",
                "require the key in a condition on the way (requires_context_keys), or have the application provide it",
            )


def _check_transition(
    run: LintRun, definition: FSMDefinition, state_id: str, state: State, index: int, transition: Transition
) -> None:
    """FSM068: a refusal no refused move can meet. FSM069: a transition's text chaining may carry the turn past."""
    name = f"{state_id} -> {transition.target_state}"
    _check_taken(run, definition, ("states", state_id, "transitions", index), name, [state], transition)


def _check_global(run: LintRun, definition: FSMDefinition, position: int, transition: GlobalTransition) -> None:
    """FSM068 and FSM069 for a global transition, judged over the states it applies in, reported once."""
    sources = [s for s in definition.states.values() if definition.applies_in(transition, s.id)]
    name = f"global -> {transition.target_state}"
    _check_taken(run, definition, ("global_transitions", position), name, sources, transition)


def _check_taken(
    run: LintRun, definition: FSMDefinition, where: Path, name: str, sources: list[State], transition: Transition
) -> None:
    def refusable(state: State) -> bool:
        confirmation = state.confirmation
        confirmed = confirmation is not None and transition.target_state in (confirmation.on_yes, confirmation.on_no)
        return transition.target_state != state.id and (transition.is_guarded or confirmed)

    if transition.refusal is not None and sources and not any(refusable(s) for s in sources):
        why = (
            "a proposal of the current state means staying, never a refused move"
            if all(transition.target_state == s.id for s in sources)
            else "a transition without conditions is never refused"
        )
        run.add(
            "refusal-never-said",
            (*where, "refusal"),
            f"the refusal of {name!r} is never said: {why}",
            "give the transition the conditions it waits for, or drop the refusal",
        )
    target = definition.states.get(transition.target_state)
    leaves = any(transition.target_state != s.id for s in sources)
    if transition.say is not None and target is not None and leaves and _chains_on(definition, target):
        run.add(
            "transition-say-passed-by",
            (*where, "say"),
            f"transition {name!r} says a text, but {transition.target_state!r} chains on in the same turn when "
            "one of its guarded transitions already holds: then the last step's text (or the state's) is said",
            "stop the chain there (auto_advance: false, or a confirmation), or give the text to the later step",
        )


def _chains_on(definition: FSMDefinition, state: State) -> bool:
    """Whether chaining can leave ``state`` in the turn that reached it (engine._moves._chain's stops)."""
    if state.is_terminal or state.confirmation is not None or not state.auto_advance or state.handoff:
        return False
    return any(t.is_guarded and t.target_state != state.id for t in definition.transitions_from(state.id))


def _set_keys(definition: FSMDefinition) -> list[str]:
    """Keys some part of the definition sets: a state collects it, the application, an action or a sub-flow does."""
    keys = list(definition.provided_context_keys)
    for state in definition.states.values():
        keys += state.required_context_keys or ()
        for action in state.actions or ():
            keys += action.output_paths
        for flow in state.flows or ():
            keys += (flow.outputs or {}).keys()
    for flow in definition.flows or ():
        keys += (flow.outputs or {}).keys()
    return keys
