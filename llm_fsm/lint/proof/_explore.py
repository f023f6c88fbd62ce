"""Breadth-first exploration of a definition's abstract configurations, each step a real engine turn.

A configuration is the flow stack (each frame's definition, state and the cells of its data), the conversation's
status and mode, a pending cancel, and which ``collected`` actions of the state have run. The first instance that
reaches a configuration stands for it; every explored reply is run on a copy of it through ``run_turn`` and the
instance the engine leaves is abstracted again. Breadth-first, so the path kept to each configuration is a
shortest one: counterexamples are as short as the checker can make them.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.engine._actions import _fingerprint
from llm_fsm.engine._context import _MISSING as MISSING
from llm_fsm.engine._context import get_path
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.lint.proof._cells import nested, used_by
from llm_fsm.lint.proof._drive import Driver, Move, Outcome
from llm_fsm.lint.proof._moves import moves

#: verdicts of a cancel carried out: the liveness properties ask what a user who does *not* give up can reach (a
#: cancel waiting for its confirmation is not one: the user can still say no)
CANCELS = frozenset({"conversation_cancelled", "conversation_restarted", "flow_cancelled"})
#: how many results of the actions one turn calls are combined, at most
MAX_ACTION_VARIANTS = 16

Key = tuple[Any, ...]


@dataclass
class Node:
    """One abstract configuration, the instance that stands for it, and how it was first reached."""

    index: int
    key: Key
    instance: FSMInstance
    parent: int | None = None
    move: Move | None = None
    stubs: dict[str, dict[str, Any]] = field(default_factory=dict)
    approximate: bool = False
    truncated: bool = False
    """Not explored: its flow stack repeats a flow (flows_return fails there; what lies above is not searched)."""

    @property
    def state(self) -> str:
        return self.instance.current_state

    @property
    def stack(self) -> tuple[str, ...]:
        return tuple(self.instance.stack)

    @property
    def fsm_id(self) -> str:
        return self.instance.fsm_id

    @property
    def settled(self) -> bool:
        """Ended, or with a person: nothing the model says moves it any more."""
        return self.instance.status != "active" or self.instance.mode != "bot"


@dataclass(frozen=True, slots=True)
class Edge:
    target: int
    move: Move
    verdict: str
    handed: tuple[str, ...] | None = None
    """When the turn finished a sub-flow: the keys its outputs handed back (the target stands for a whole
    configuration, reached perhaps another way, so what this very turn did is kept here)."""


@dataclass
class Exploration:
    nodes: list[Node] = field(default_factory=list)
    index: dict[Key, int] = field(default_factory=dict)
    edges: dict[int, list[Edge]] = field(default_factory=dict)
    complete: bool = True
    bound: int = 0
    opening_error: str | None = None
    turns: int = 0
    depth_refusals: list[tuple[int, Move]] = field(default_factory=list)
    truncated: bool = False

    def path(self, index: int) -> list[Node]:
        """The nodes from the opening to ``index`` (the opening's node first)."""
        out: list[Node] = []
        current: int | None = index
        while current is not None:
            node = self.nodes[current]
            out.append(node)
            current = node.parent
        return out[::-1]


def configuration(driver: Driver, instance: FSMInstance) -> Key:
    frames = tuple(
        (frame.fsm_id, frame.current_state, driver.abstraction(frame.fsm_id).signature(frame.data, frame.current_state))
        for frame in instance.flow_stack
    )
    abstraction = driver.abstraction(instance.fsm_id)
    data, state = instance.context.data, instance.current_state
    active = (instance.fsm_id, state, abstraction.signature(data, state))
    return (frames, active, instance.status, instance.mode, instance.pending_cancel, _runs(driver, instance))


def _runs(driver: Driver, instance: FSMInstance) -> tuple[tuple[str, bool], ...]:
    """The ``collected`` actions of the active state that have run, each with whether it ran on the inputs the
    context has now (the engine runs it again exactly when they change); the fingerprint itself is a value."""
    out: list[tuple[str, bool]] = []
    definition = driver.definition(instance.fsm_id)
    for key, fingerprint in instance.action_runs.items():
        flow, _, local = key.partition("/")
        if flow != instance.flow_id:
            continue
        state_id, _, rest = local.partition("#")
        index = rest.split(":", 1)[0]
        state = definition.states.get(state_id)
        actions = (state.actions or []) if state is not None else []
        current = None
        if index.isdigit() and int(index) < len(actions):
            inputs = actions[int(index)].inputs or {}
            data = instance.context.data
            arguments = {name: value for name, path in inputs.items() if (value := get_path(data, path)) is not MISSING}
            current = _fingerprint(arguments)
        out.append((local, current == fingerprint))
    return tuple(sorted(out))


def explore(driver: Driver, max_configurations: int) -> Exploration:
    found = Exploration(bound=max_configurations)
    opened = driver.open()
    if opened.error is not None:
        found.opening_error = opened.error
        return found
    _add(found, driver, opened.instance, None, None, opened.stubs)
    queue = deque([0])
    while queue:
        index = queue.popleft()
        node = found.nodes[index]
        if node.settled:
            continue
        definition = driver.definition(node.fsm_id)
        explored = moves(definition, driver.abstraction(node.fsm_id), driver.builder, node.instance)
        node.approximate = explored.approximate
        edges = found.edges.setdefault(index, [])
        for move in [*explored.moves, *_writes(driver, node)]:
            for outcome, variant in _outcomes(driver, node.instance, move):
                found.turns += 1
                if outcome.error is not None:
                    if "max_flow_depth" in outcome.error:
                        found.depth_refusals.append((index, variant))
                    continue
                key = configuration(driver, outcome.instance)
                target = found.index.get(key)
                if target is None:
                    if len(found.nodes) >= max_configurations:
                        found.complete = False
                        continue
                    target = _add(found, driver, outcome.instance, index, variant, outcome.stubs, key)
                    stack = outcome.instance.stack
                    if len(set(stack)) < len(stack):
                        found.nodes[target].truncated = found.truncated = True
                    else:
                        queue.append(target)
                edges.append(Edge(target, variant, outcome.verdict, _handed(node.instance, outcome.instance)))
    return found


def _add(
    found: Exploration,
    driver: Driver,
    instance: FSMInstance,
    parent: int | None,
    move: Move | None,
    stubs: dict[str, dict[str, Any]],
    key: Key | None = None,
) -> int:
    key = key if key is not None else configuration(driver, instance)
    index = len(found.nodes)
    found.nodes.append(Node(index, key, instance, parent, move, stubs))
    found.index[key] = index
    return index


def _handed(before: FSMInstance, after: FSMInstance) -> tuple[str, ...] | None:
    if len(after.flow_stack) >= len(before.flow_stack) or not after.completed_flows:
        return None
    return tuple(sorted(after.completed_flows[-1].outputs))


def _writes(driver: Driver, node: Node) -> list[Move]:
    """The application's writes this configuration may see: each key it provides that the state's own decision
    reads, in each other cell. (A key read only further on is written there: the same configurations.)"""
    abstraction = driver.abstraction(node.fsm_id)
    data = node.instance.context.data
    definition = driver.definition(node.fsm_id)
    state = definition.states.get(node.state)
    live = set(used_by(state, definition)) if state is not None else set()
    out: list[Move] = []
    for key in driver.application_keys(node.fsm_id):
        if key not in live:
            continue
        here = abstraction.cell(key, data)
        for value in abstraction.values.get(key, ()):
            if abstraction.cell(key, nested(key, value.value)) != here:
                out.append(Move(update=((key, value.value),), application=True))
    return out


def _outcomes(driver: Driver, instance: FSMInstance, move: Move) -> list[tuple[Outcome, Move]]:
    """The move with the actions' first results, then with every other combination of the results of the actions
    it called (an action's output is any value its declaration allows, or its error route)."""
    if move.application:
        return [(driver.write(instance, move), move)]
    first = driver.step(instance, move)
    out = [(first, move)]
    branching = {name: count for name, count in first.options.items() if count > 1}
    if not branching:
        return out
    names = sorted(branching)
    combos = itertools.islice(itertools.product(*(range(branching[n]) for n in names)), MAX_ACTION_VARIANTS + 1)
    for combo in combos:
        if not any(combo):
            continue
        variant = Move(
            move.user, move.intent, move.target, move.flow, move.update, tuple(zip(names, combo, strict=True))
        )
        out.append((driver.step(instance, variant), variant))
    return out


__all__ = ["CANCELS", "Edge", "Exploration", "Node", "configuration", "explore"]
