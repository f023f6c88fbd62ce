"""Checks of the state graph: state ids, targets, reachability and dead ends, transitions, confirmation steps."""

from __future__ import annotations

import functools
import json
from collections import Counter, deque
from collections.abc import Mapping

from llm_fsm.definition._graph import (
    Graph,
    can_reach,
    graph_from_document,
    terminal_states,
)
from llm_fsm.lint._checks_retrieval import retrieval_error_moves
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import (
    _did_you_mean,
)


def state_ids(run: LintRun) -> None:
    for key, state in run.states():
        state_id = state.get("id")
        if isinstance(state_id, str) and state_id != key:
            run.add(
                "state-id-mismatch",
                ("states", key, "id"),
                f"state key {key!r} and its id {state_id!r} differ",
                f"set id to {key!r} (transitions and initial_state refer to the key)",
            )


def targets(run: LintRun) -> None:
    if run.partial:  # targets in the part not validated are unknown
        return
    states = run.data.get("states")
    declared = [str(k) for k in states] if isinstance(states, Mapping) else []
    declared_set = set(declared)
    initial = run.data.get("initial_state")
    if isinstance(initial, str) and isinstance(states, Mapping) and initial not in declared_set:
        run.add(
            "initial-state-missing",
            ("initial_state",),
            f"initial_state {initial!r} is not a declared state",
            lambda: _did_you_mean(initial, declared) or "declare it under states, or name an existing state",
        )
    if not isinstance(states, Mapping):
        return
    for key, index, transition in run.transitions():
        target = transition.get("target_state")
        if isinstance(target, str) and target not in declared_set:
            run.add(
                "unknown-target-state",
                ("states", key, "transitions", index, "target_state"),
                f"transition from {key!r} targets {target!r}, which is not a declared state",
                functools.partial(_target_hint, target, declared),
            )


def _target_hint(target: str, declared: list[str]) -> str:
    return _did_you_mean(target, declared) or "declare the state or fix the target"


def graph(run: LintRun) -> None:
    if run.partial or not isinstance(run.data.get("states"), Mapping):
        return
    graph = run.graph = graph_from_document(run.data)
    declared = [n.id for n in graph.nodes.values() if n.declared]
    if not declared:
        return
    reachable: set[str] | None = None
    initial = graph.initial
    if initial is not None and initial in graph.nodes and graph.nodes[initial].declared:
        reachable = _reachable(run, graph, initial)
        for node_id in declared:
            if node_id not in reachable:
                run.add(
                    "unreachable-state",
                    ("states", node_id),
                    f"state {node_id!r} cannot be reached from the initial state {initial!r}",
                    "add a transition into it, or remove it",
                )
    terminals = list(terminal_states(graph))
    if not terminals:
        run.add(
            "no-terminal-state",
            ("states",),
            "no state is terminal (has no transitions), so a conversation can never end",
            "add a final state with an empty transitions list",
        )
        return
    ending = set(can_reach(graph, terminals))
    for node_id in declared:
        if node_id in ending or (reachable is not None and node_id not in reachable):
            continue
        run.add(
            "trap-state",
            ("states", node_id),
            f"no terminal state can be reached from state {node_id!r}; a conversation that enters it never ends",
            "add a transition that leads towards a terminal state (a run-loop does not end a conversation)",
        )


def _reachable(run: LintRun, graph: Graph, initial: str) -> set[str]:
    """States reachable from ``initial`` by transitions or by a failed action's or retrieval's ``on_error``: a state
    only a backend failure leads to (a support hand-over) is reachable all the same. One breadth-first walk."""
    on_error: dict[str, list[str]] = {}
    for _, state_key, action in run.actions():
        target = action.get("on_error")
        if isinstance(target, str) and target in graph.nodes:
            on_error.setdefault(state_key, []).append(target)
    for state_key, target in retrieval_error_moves(run):
        if target in graph.nodes:
            on_error.setdefault(state_key, []).append(target)
    seen = {initial}
    queue = deque(seen)
    while queue:
        node = queue.popleft()
        for target in (*graph.successors.get(node, ()), *on_error.get(node, ())):
            if target not in seen:
                seen.add(target)
                queue.append(target)
    return seen


def transitions(run: LintRun) -> None:
    for key, state in run.states():
        transitions = state.get("transitions")
        if not isinstance(transitions, list):
            continue
        seen: dict[tuple[str, str], int] = {}
        by_priority: dict[int, list[tuple[int, str]]] = {}
        targets = Counter(
            target for t in transitions if isinstance(t, Mapping) and isinstance(target := t.get("target_state"), str)
        )
        for index, transition in enumerate(transitions):
            if not isinstance(transition, Mapping) or not isinstance(transition.get("target_state"), str):
                continue
            target = transition["target_state"]
            conditions = transition.get("conditions") or None
            first = index
            if targets[target] > 1:  # only transitions to the same target can be duplicates
                try:
                    signature = json.dumps(conditions, sort_keys=True, default=str)
                except (TypeError, ValueError, RecursionError):
                    signature = repr(conditions)
                first = seen.setdefault((target, signature), index)
            if first != index:
                run.add(
                    "duplicate-transition",
                    ("states", key, "transitions", index),
                    f"same target {target!r} and conditions as transitions[{first}]",
                    "remove one of them",
                )
            priority = transition.get("priority", 100)
            if isinstance(conditions, list) and isinstance(priority, int) and not isinstance(priority, bool):
                by_priority.setdefault(priority, []).append((index, target))
        for priority, members in by_priority.items():
            first_index, first_target = members[0]
            for index, target in members[1:]:
                if target != first_target:
                    run.add(
                        "ambiguous-priority",
                        ("states", key, "transitions", index, "priority"),
                        f"guarded transitions[{first_index}] (to {first_target!r}) and transitions[{index}] "
                        f"(to {target!r}) share priority {priority}; when both hold, declaration order decides",
                        "give them distinct priorities so the order is explicit",
                    )


def confirmations(run: LintRun) -> None:
    for key, state in run.states():
        confirmation = state.get("confirmation")
        if not isinstance(confirmation, Mapping):
            continue
        transitions = state.get("transitions")
        targets = (
            [t.get("target_state") for t in transitions if isinstance(t, Mapping)]
            if isinstance(transitions, list)
            else []
        )
        if run.graph is not None:  # the global transitions that apply here are declared transitions of it too
            targets += [edge.target for edge in run.graph.global_edges if key in edge.sources]
        for field_name in ("on_yes", "on_no"):
            target = confirmation.get(field_name)
            if not isinstance(target, str) or (field_name == "on_no" and target == "cancel"):
                continue
            if target not in targets:
                run.add(
                    "confirmation-target-undeclared",
                    ("states", key, "confirmation", field_name),
                    f"{field_name} {target!r} is not the target of a transition declared in state {key!r}",
                    f"declare a transition from {key!r} to {target!r}"
                    + (', or use "cancel" or null' if field_name == "on_no" else ""),
                )
