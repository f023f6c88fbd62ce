"""Checks of approved wording (``say`` and ``responses``): FSM053–FSM057.

A text that cannot be filled is not said (the reply falls back to the model's message), so every reason it could
not be is found here, before a conversation meets it: a malformed text or format spec, an unknown response id, a
placeholder naming an undeclared key, a sensitive key not revealed, and a key nothing ever sets.

"Set whenever the text is said" is checked only cheaply: some state collects the key, or the application or an
action provides it. Whether it is set on every path into the state is not checked (the prover does not check it yet).
"""

from __future__ import annotations

from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.definition._wording import Say, parse, spec_error
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import KeyCover


def wording(run: LintRun) -> None:
    """FSM053–FSM057 for every state's ``say``."""
    definition = run.definition
    if definition is None or run.partial:
        return
    set_somewhere = KeyCover(_set_keys(definition))
    for state_id, state in definition.states.items():
        say = state.say if state.say is None or isinstance(state.say, Say) else Say(text=state.say)
        if say is None:
            continue
        where = ("states", state_id, "say")
        text = say.text
        if text is None:
            text = (definition.responses or {}).get(say.response or "")
            if text is None:
                known = ", ".join(sorted(definition.responses or {})) or "none"
                run.add(
                    "say-unknown-response",
                    where,
                    f"state {state_id!r} says response {say.response!r}, which the responses table does not have",
                    f"add it to responses (known ids: {known})",
                )
                continue
        for one in text.values() if isinstance(text, dict) else (text,):  # every language's text is said somewhere
            _check_text(run, definition, state_id, state, say, one, set_somewhere)


def _check_text(
    run: LintRun, definition: FSMDefinition, state_id: str, state: State, say: Say, text: str, set_somewhere: KeyCover
) -> None:
    where = ("states", state_id, "say")
    try:
        parsed = parse(text)
    except ValueError as error:
        run.add("say-invalid-placeholder", where, f"state {state_id!r}: {error}", "write {{ and }} for literal braces")
        return
    declared = bool(definition.context_keys)
    reveal = set(say.reveal or ())
    for field in parsed.fields:
        problem = spec_error(field.spec) if field.spec else None
        if problem is not None:
            run.add("say-invalid-placeholder", where, f"state {state_id!r}: {{{field.path}}}: {problem}", None)
        found = definition.declaration_for(field.path)
        if declared and not definition.is_declared_path(field.path):
            run.add(
                "say-undeclared-key",
                where,
                f"state {state_id!r} says {{{field.path}}}, which is not a declared key: the text is never said",
                "declare it in context_keys, or fix the placeholder's name",
            )
        elif found is not None and found[1].sensitive and not ({field.path, found[0]} & reveal):
            run.add(
                "say-sensitive-key",
                where,
                f"state {state_id!r} says {{{field.path}}}, a sensitive key: the engine never fills it in",
                f"list it in the say's reveal ([{found[0]}]) if this text may show it",
            )
        if not set_somewhere.covers(field.path):
            run.add(
                "say-key-never-set",
                where,
                f"state {state_id!r} says {{{field.path}}}, which no state collects and neither the application nor "
                "an action provides (whether it is set on every path into the state is not checked yet)",
                "collect it in a state's required_context_keys, or list it in application_context_keys",
            )


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
