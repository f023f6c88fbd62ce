"""The replies the checker gives the engine in one configuration: every target, intent and flow the state's reply
schema allows, with the context updates that can change what the engine decides.

Which updates: the keys the state's own decision reads (what it collects and confirms, its conditions, its actions'
inputs) are written in every combination of their cells, each with every target. Keys of states further on matter
to this turn only through chaining (guarded steps followed in the same turn, which may branch on a key being
present or absent), so for each target and each path of guarded steps after it, the keys that make each step hold
are written together, one update per prefix of the path. Any other key is written when the conversation is where
it is read: writing it earlier changes nothing this turn decides (docs/prove.md, "The moves"). Past
``MAX_UPDATES`` combinations of the state's own keys the checker writes each key alone plus every combination of
the keys one condition reads, and marks the configuration *approximate*: a claim that needs every combination is
then ``unknown``, never proved.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from llm_fsm.definition._model import FSMDefinition, State, Transition
from llm_fsm.engine._context import _set_path, get_path, has_value
from llm_fsm.engine._data import copy_json
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._transitions import evaluate_condition
from llm_fsm.lint.proof._cells import Abstraction, Value, guard_keys, nested, said, used_by
from llm_fsm.lint.proof._drive import NEUTRAL, Move

#: the most update combinations written in one configuration before the checker falls back to guard combinations
MAX_UPDATES = 192
#: guarded steps followed after a move (EngineConfig.max_chained_transitions is 5)
MAX_CHAIN_DEPTH = 6


@dataclass(frozen=True, slots=True)
class Moves:
    moves: tuple[Move, ...]
    approximate: bool


def _said(values: list[tuple[str, Value]]) -> str:
    return " ; ".join(value.said for _, value in values) or NEUTRAL


@dataclass(frozen=True, slots=True)
class Updates:
    own: list[list[tuple[str, Value]]]
    """Combinations of the keys the state itself reads, each written with every target."""
    chains: list[tuple[str, list[tuple[str, Value]]]]
    """(target, update): the keys that let the move to ``target`` happen and then guarded steps chain on from it,
    one update per path prefix (the chain stops where the update stops)."""
    approximate: bool


#: satisfying assignments kept per guarded step of a chain, and chain updates per configuration
MAX_STEP_ASSIGNMENTS = 4
MAX_CHAINS = 64


def updates(definition: FSMDefinition, abstraction: Abstraction, state: State, data: Mapping[str, Any]) -> Updates:
    """The context updates worth writing in ``state``.

    A key's value written again is no change to decide on, so each key offers the cells it is not in (every
    present key of the state written again at once is one more update: a write the engine counts even when it
    changes nothing, so a move after it chains).
    """

    def usable(key: str) -> bool:
        return bool(abstraction.values.get(key)) and abstraction.model_writes(key)

    own = [key for key in dict.fromkeys(used_by(state, definition)) if usable(key)]

    def fresh(key: str) -> list[Value]:
        here = abstraction.cell(key, data)
        return [v for v in abstraction.values[key] if abstraction.cell(key, nested(key, v.value)) != here]

    chains = _chains(definition, abstraction, state, data, usable)
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
        return Updates(combos, chains, False)
    found: list[list[tuple[str, Value]]] = [[]]
    for key in own:
        found += [[(key, value)] for value in abstraction.values[key]]
    for transition in definition.transitions_from(state.id):
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
    return Updates(list(unique.values()), chains, True)


def _satisfying(
    abstraction: Abstraction,
    transition: Transition,
    data: Mapping[str, Any],
    usable: Callable[[str], bool],
) -> list[list[tuple[str, Value]]]:
    """Writes of the keys a guarded transition reads that make its conditions hold on ``data`` (judged by the
    engine's own condition evaluation), a few of them; none when a key it needs cannot be written."""
    keys = [
        k
        for k in dict.fromkeys(
            key
            for condition in transition.conditions or ()
            for key in [*(condition.requires_context_keys or ()), *sorted(guard_keys(condition.logic))]
        )
    ]
    writable_keys = [k for k in keys if usable(k)]
    out: list[list[tuple[str, Value]]] = []
    pools = [[None, *abstraction.values[k]] for k in writable_keys]
    for picked in itertools.islice(itertools.product(*pools), MAX_UPDATES):
        assignment = [(k, v) for k, v in zip(writable_keys, picked, strict=True) if v is not None]
        trial = _with(data, assignment)
        if all(evaluate_condition(c, trial).holds for c in transition.conditions or ()):
            out.append(assignment)
            if len(out) >= MAX_STEP_ASSIGNMENTS:
                break
    return out


def _with(data: Mapping[str, Any], assignment: list[tuple[str, Value]]) -> dict[str, Any]:
    trial: dict[str, Any] = copy_json(dict(data))
    for key, value in assignment:
        _set_path(trial, key, value.value)
    return trial


def _chains(
    definition: FSMDefinition,
    abstraction: Abstraction,
    state: State,
    data: Mapping[str, Any],
    usable: Callable[[str], bool],
) -> list[tuple[str, list[tuple[str, Value]]]]:
    """For each target, the updates that make the move and then one, two, … guarded steps after it hold.

    The model may write keys of states ahead in the same turn; what they change is how far the engine chains
    (a later step may even branch on a key being absent), so each prefix of each chain path is one update, with
    values that satisfy each step's conditions."""
    out: list[tuple[str, list[tuple[str, Value]]]] = []
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()

    def walk(target: str, here: State, update: list[tuple[str, Value]], trial: dict[str, Any], depth: int) -> None:
        if len(out) >= MAX_CHAINS or depth > MAX_CHAIN_DEPTH or not here.auto_advance or here.confirmation:
            return
        for transition in definition.transitions_from(here.id):
            if not transition.is_guarded:
                continue
            nxt = definition.states.get(transition.target_state)
            if nxt is None:
                continue
            for assignment in _satisfying(abstraction, transition, trial, usable):
                if not assignment:
                    continue
                extended = [*update, *assignment]
                key = (target, tuple(sorted((k, repr(v.value)) for k, v in extended)))
                if key in seen:
                    continue
                seen.add(key)
                out.append((target, extended))
                walk(target, nxt, extended, _with(trial, assignment), depth + 1)

    for transition in definition.transitions_from(state.id):
        target = definition.states.get(transition.target_state)
        if target is None or target.id == state.id:
            continue
        starts = _satisfying(abstraction, transition, data, usable) if transition.is_guarded else [[]]
        for start in starts:
            walk(target.id, target, list(start), _with(data, start), 1)
    return out


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
    targets = ["", *dict.fromkeys(t.target_state for t in definition.transitions_from(state.id))]
    found: list[Move] = []
    for target, combo in explored.chains:
        found.append(Move(user=_said(combo), target=target, update=tuple((key, value.value) for key, value in combo)))
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


__all__ = ["MAX_UPDATES", "Moves", "assignments", "gate_move", "moves", "updates"]
