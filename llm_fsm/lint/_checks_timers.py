"""Checks of a state's timers (``after:``): FSM062–FSM066.

A timer is the one part of a conversation nobody watches happen: it fires while the user is away, so a timer that
can never fire, or fires into a move the engine must refuse, is found here rather than in production.
"""

from __future__ import annotations

from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.definition._timers import TimerEntry
from llm_fsm.definition._wording import parse
from llm_fsm.engine._wording import long_form, template_of
from llm_fsm.lint._run import LintRun


def declared_targets(definition: FSMDefinition, state_id: str, state: State) -> set[str]:
    """Where ``state`` may move: its own transitions' targets and the global transitions that apply in it."""
    return {transition.target_state for transition in definition.transitions_from(state_id)}


def timers(run: LintRun) -> None:
    """FSM062–FSM066 for every state's ``after`` entries."""
    definition = run.definition
    if definition is None or run.partial:
        return
    for state_id, state in definition.states.items():
        entries = state.after or []
        if entries and (state.is_terminal or state.handoff):
            run.add(
                "timer-never-armed",
                ("states", state_id, "after"),
                f"state {state_id!r} is {'terminal' if state.is_terminal else 'a handoff state'}: a conversation "
                "there has ended or is with a person, so its timers are never armed",
                "move the timers to the state before it, or remove them",
            )
            continue
        targets = declared_targets(definition, state_id, state)
        for index, entry in enumerate(entries):
            where = ("states", state_id, "after", index)
            if entry.seconds <= 0:
                run.add(
                    "timer-duration-not-positive",
                    (*where, "in"),
                    f"state {state_id!r}: timer {index} is due after {entry.in_!r}, which is not a positive duration",
                    "write a duration such as '15m' or a number of seconds above 0",
                )
            if entry.go is not None and entry.go not in targets:
                run.add(
                    "timer-go-undeclared",
                    (*where, "go"),
                    f"state {state_id!r}: timer {index} moves to {entry.go!r}, which is not a declared transition of "
                    "the state: the engine refuses the move every time",
                    f"declare a transition from {state_id!r} to {entry.go!r}, or go to one of: "
                    + (", ".join(sorted(targets)) or "(none)"),
                )
            elif entry.go is not None and state.confirmation is not None and entry.go == state.confirmation.on_yes:
                run.add(
                    "timer-go-undeclared",
                    (*where, "go"),
                    f"state {state_id!r}: timer {index} moves to {entry.go!r}, the confirmation's on_yes: only the "
                    "user's yes leads there, so the engine refuses the move every time (silence is no yes)",
                    "move to another state when the time runs out (e.g. one that releases the hold)",
                )
            if entry.say is not None:
                _check_say(run, definition, state_id, index, entry)
        _shadowed(run, state_id, entries)


def _check_say(run: LintRun, definition: FSMDefinition, state_id: str, index: int, entry: TimerEntry) -> None:
    """The entry's text in every language a conversation can be in, as the engine picks it (``template_of``)."""
    say = long_form(entry.say)
    assert say is not None
    where = ("states", state_id, "after", index, "say")
    for language in dict.fromkeys([*(definition.languages or ()), None]):
        text = template_of(definition, say, language)
        if text is None:
            run.add(
                "timer-say-invalid",
                where,
                f"state {state_id!r}: timer {index} says response {say.response!r}, which the responses table lacks",
                "add it to responses",
            )
            return
        try:
            parse(text)
        except ValueError as error:
            run.add(
                "timer-say-invalid", where, f"state {state_id!r}: timer {index}: {error}", "write {{ and }} for braces"
            )
            return


def _shadowed(run: LintRun, state_id: str, entries: list[TimerEntry]) -> None:
    """An entry timed from entering the state, due no earlier than a move timed the same way, fires only when that
    move is refused (its guards do not hold): usually a mistake in the order of the durations."""
    moves = [entry.seconds for entry in entries if entry.go is not None and entry.since == "entered"]
    if not moves:
        return
    first_move = min(moves)
    for index, entry in enumerate(entries):
        if entry.since == "entered" and entry.go is None and entry.seconds >= first_move:
            run.add(
                "timer-after-move",
                ("states", state_id, "after", index),
                f"state {state_id!r}: timer {index} is due after a timer that moves the conversation out of the state "
                "(at the same time or earlier): it fires only if that move is refused",
                "make it due before the move, or remove it",
            )
