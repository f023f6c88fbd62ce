"""The replies the checker gives the engine in one configuration: every target, intent and flow the state's reply
schema allows, with the context updates that can change what the engine decides.

Which updates: the keys of the state's *turn reach* (the state, the targets it offers and the states guarded chains
lead on to in the same turn) are the only ones whose values this turn's decision reads; any other key written now
could be written in the turn that reads it. Over those keys the checker writes every combination of their cells
when there are at most ``MAX_UPDATES``; past that, every cell of each key alone plus every combination of the keys
one condition reads (what makes each guard hold or fail), and the configuration is marked *approximate*: a claim
that needs every combination is then ``unknown``, never proved.
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


def updates(
    definition: FSMDefinition, abstraction: Abstraction, state: State, data: Mapping[str, Any]
) -> tuple[list[list[tuple[str, Value]]], bool]:
    """The context updates worth writing in ``state``, and whether they are fewer than every combination.

    A key's value written again is no change to decide on, so each key offers the cells it is not in (every
    present key written again at once is one more update: a write the engine counts even when it changes nothing).
    """
    reach = turn_reach(definition, state.id)
    keys = [
        key
        for key in dict.fromkeys(k for s in reach for k in used_by(s))
        if key in abstraction.values and abstraction.values[key] and writable(definition, abstraction, key)
    ]

    def fresh(key: str) -> list[Value]:
        here = abstraction.cell(key, data)
        return [v for v in abstraction.values[key] if abstraction.cell(key, nested(key, v.value)) != here]

    choices: list[list[Value | None]] = [[None, *fresh(key)] for key in keys]
    size = 1
    for choice in choices:
        size *= len(choice)
    if size <= MAX_UPDATES:
        combos = []
        for picked in itertools.product(*choices):
            combos.append([(key, value) for key, value in zip(keys, picked, strict=True) if value is not None])
        again = [(key, Value(get_path(data, key), said(get_path(data, key)))) for key in keys if has_value(data, key)]
        if again:
            combos.append(again)
        return combos, False
    found: list[list[tuple[str, Value]]] = [[]]
    for key in keys:
        found += [[(key, value)] for value in abstraction.values[key]]
    for s in reach:
        for transition in s.transitions:
            for condition in transition.conditions or ():
                group = [
                    k
                    for k in dict.fromkeys([*(condition.requires_context_keys or ()), *guard_keys(condition.logic)])
                    if k in keys
                ]
                if len(group) < 2:
                    continue
                for picked in itertools.islice(itertools.product(*(abstraction.values[k] for k in group)), MAX_UPDATES):
                    found.append(list(zip(group, picked, strict=True)))
    required = [k for k in (state.required_context_keys or ()) if k in keys]
    width = max((len(abstraction.values[k]) for k in required), default=0)
    for index in range(width):
        found.append([(k, abstraction.values[k][index % len(abstraction.values[k])]) for k in required])
    unique: dict[tuple[tuple[str, Any], ...], list[tuple[str, Value]]] = {}
    for combo in found:
        unique.setdefault(tuple((k, repr(v.value)) for k, v in combo), combo)
    return list(unique.values()), True


def moves(definition: FSMDefinition, abstraction: Abstraction, builder: PromptBuilder, instance: FSMInstance) -> Moves:
    """Every reply explored in this configuration (actions' results are branched on by the explorer)."""
    state = definition.get_state(instance.current_state)
    intents = builder.intents_for(definition, instance, state)
    flows = builder.flow_names_for(definition, instance, state)
    combos, approximate = updates(definition, abstraction, state, instance.context.data)
    targets = ["", *dict.fromkeys(t.target_state for t in state.transitions)]
    found: list[Move] = []
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
    return Moves(tuple(found), approximate)


def gate_move(target: str, assignment: dict[str, Any]) -> Move:
    """The model alone opening a gate: the user says nothing of it ("ok"); the model writes the keys and proposes."""
    return Move(user=NEUTRAL, target=target, update=tuple(assignment.items()))


def assignments(abstraction: Abstraction, keys: list[str]) -> Iterator[dict[str, Any]]:
    """Every combination of the keys' representatives (for a gate's keys: a handful)."""
    pools = [[(key, v.value) for v in abstraction.values.get(key, ())] for key in keys]
    for picked in itertools.islice(itertools.product(*pools), MAX_UPDATES):
        yield dict(picked)


__all__ = ["MAX_UPDATES", "Moves", "assignments", "gate_move", "moves", "turn_reach", "updates", "writable"]
