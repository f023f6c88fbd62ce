"""The replies the checker gives the engine in one configuration: every target, intent and flow the state's reply
schema allows, with the context updates that can change what the engine decides.

Which updates: the keys the state's own decision reads (what it collects and confirms, its conditions, its actions'
inputs) are written in every combination of their cells, each with every target. A key the turn may read further
on (a target's, or a state guarded steps chain to in the same turn) is written alone, while staying: the model may
write any subset of keys in one turn, but a turn's decision reads only the state's own keys, so a subset written at
once reaches the same configuration as its keys written one turn each and the state's own keys last. A key read
only by states further away is written when the conversation is there: writing it earlier changes nothing until
then (docs/prove.md, "The moves"). Past ``MAX_UPDATES`` combinations
of the state's own keys the checker writes each key alone plus every combination of the keys one condition reads,
and marks the configuration *approximate*: a claim that needs every combination is then ``unknown``, never proved.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.engine._context import get_path, has_value
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.lint.proof._cells import Abstraction, Value, guard_keys, nested, said, used_by
from llm_fsm.lint.proof._drive import NEUTRAL, Move

#: the most update combinations written in one configuration before the checker falls back to guard combinations
MAX_UPDATES = 192


@dataclass(frozen=True, slots=True)
class Moves:
    moves: tuple[Move, ...]
    approximate: bool


def turn_reach(definition: FSMDefinition, state_id: str) -> list[State]:
    """The state, the targets it offers, and the states guarded transitions lead on to from those (chaining)."""
    seen: dict[str, State] = {}
    frontier = [state_id]
    first = True
    while frontier:
        current = frontier.pop()
        state = definition.states.get(current)
        if state is None or current in seen:
            continue
        seen[current] = state
        for transition in state.transitions:
            if first or transition.is_guarded:
                frontier.append(transition.target_state)
        first = False
    return list(seen.values())


def writable(definition: FSMDefinition, abstraction: Abstraction, key: str) -> bool:
    """Whether the model may write ``key`` at all (the engine drops the rest, so writing them explores nothing)."""
    if key in definition.application_only_keys:
        return False
    declaration = abstraction.declaration(key)
    if declaration is None:
        return definition.additional_keys
    return declaration.writable_by == "model"


def _said(values: list[tuple[str, Value]]) -> str:
    return " ; ".join(value.said for _, value in values) or NEUTRAL


@dataclass(frozen=True, slots=True)
class Updates:
    own: list[list[tuple[str, Value]]]
    """Combinations of the keys the state itself reads, each written with every target."""
    extra: list[list[tuple[str, Value]]]
    """One other live key at a time, written while staying."""
    approximate: bool


def updates(definition: FSMDefinition, abstraction: Abstraction, state: State, data: Mapping[str, Any]) -> Updates:
    """The context updates worth writing in ``state``.

    A key's value written again is no change to decide on, so each key offers the cells it is not in (every
    present key of the state written again at once is one more update: a write the engine counts even when it
    changes nothing, so a move after it chains).
    """

    def usable(key: str) -> bool:
        return bool(abstraction.values.get(key)) and writable(definition, abstraction, key)

    own = [key for key in dict.fromkeys(used_by(state)) if usable(key)]
    ahead = {key for other in turn_reach(definition, state.id) for key in used_by(other)}
    extra_keys = [key for key in abstraction.live(state.id) if key in ahead and key not in own and usable(key)]

    def fresh(key: str) -> list[Value]:
        here = abstraction.cell(key, data)
        return [v for v in abstraction.values[key] if abstraction.cell(key, nested(key, v.value)) != here]

    extra = [[(key, value)] for key in extra_keys for value in fresh(key)]
    choices: list[list[Value | None]] = [[None, *fresh(key)] for key in own]
    size = 1
    for choice in choices:
        size *= len(choice)
    if size <= MAX_UPDATES:
        combos = []
        for picked in itertools.product(*choices):
            combos.append([(key, value) for key, value in zip(own, picked, strict=True) if value is not None])
        again = [(key, Value(get_path(data, key), said(get_path(data, key)))) for key in own if has_value(data, key)]
        if again:
            combos.append(again)
        return Updates(combos, extra, False)
    found: list[list[tuple[str, Value]]] = [[]]
    for key in own:
        found += [[(key, value)] for value in abstraction.values[key]]
    for transition in state.transitions:
        for condition in transition.conditions or ():
            group = [
                k
                for k in dict.fromkeys([*(condition.requires_context_keys or ()), *guard_keys(condition.logic)])
                if k in own
            ]
            if len(group) < 2:
                continue
            for picked in itertools.islice(itertools.product(*(abstraction.values[k] for k in group)), MAX_UPDATES):
                found.append(list(zip(group, picked, strict=True)))
    width = max((len(abstraction.values[k]) for k in own), default=0)
    for index in range(width):
        found.append([(k, abstraction.values[k][index % len(abstraction.values[k])]) for k in own])
    unique: dict[tuple[tuple[str, Any], ...], list[tuple[str, Value]]] = {}
    for combo in found:
        unique.setdefault(tuple((k, repr(v.value)) for k, v in combo), combo)
    return Updates(list(unique.values()), extra, True)


def moves(definition: FSMDefinition, abstraction: Abstraction, builder: PromptBuilder, instance: FSMInstance) -> Moves:
    """Every reply explored in this configuration (actions' results are branched on by the explorer)."""
    state = definition.get_state(instance.current_state)
    if instance.pending_cancel:
        # "do you want to cancel?": a confirm or cancel ends it; any other answer is taken as it would be without
        # the question (the engine clears it first), so one side question stands for them all
        return Moves((Move(intent="confirm"), Move(intent="digression")), False)
    intents = builder.intents_for(definition, instance, state)
    flows = builder.flow_names_for(definition, instance, state)
    explored = updates(definition, abstraction, state, instance.context.data)
    combos = explored.own
    targets = ["", *dict.fromkeys(t.target_state for t in state.transitions)]
    found: list[Move] = []
    for combo in explored.extra:
        found.append(Move(user=_said(combo), update=tuple((key, value.value) for key, value in combo)))
    for combo in combos:
        update = tuple((key, value.value) for key, value in combo)
        said = _said(combo)
        for target in targets:
            found.append(Move(user=said, target=target, update=update))
        if "deny" in intents and len(combo) <= 1:
            found.append(Move(user=said, intent="deny", update=update))
    for intent in intents:
        if intent in ("digression", "cancel", "confirm") or (intent == "deny" and not combos):
            found.append(Move(intent=intent))
        elif intent in ("start_flow", "resume_flow"):
            found += [Move(intent=intent, flow=flow) for flow in flows]
    return Moves(tuple(found), explored.approximate)


def gate_move(target: str, assignment: dict[str, Any]) -> Move:
    """The model alone opening a gate: the user says nothing of it ("ok"); the model writes the keys and proposes."""
    return Move(user=NEUTRAL, target=target, update=tuple(assignment.items()))


def assignments(abstraction: Abstraction, keys: list[str]) -> Iterator[dict[str, Any]]:
    """Every combination of the keys' representatives (for a gate's keys: a handful)."""
    pools = [[(key, v.value) for v in abstraction.values.get(key, ())] for key in keys]
    for picked in itertools.islice(itertools.product(*pools), MAX_UPDATES):
        yield dict(picked)


__all__ = ["MAX_UPDATES", "Moves", "assignments", "gate_move", "moves", "turn_reach", "updates", "writable"]
