"""The state graph of a definition, as neutral data, and the walks over it.

One graph model feeds both the linter (reachability, traps) and every diagram
renderer (Mermaid, DOT, text), so a diagram can never disagree with what lint
says about the same file.

The graph is built from the *raw* document, tolerantly: a definition with a
typo in one transition still has a graph for the rest, which is what lets lint
report every problem of a file at once and lets ``llm-fsm graph`` draw a file
that does not validate yet. Walks are small iterative generators (a queue, not
recursion): a 100,000-state chain costs time, never the recursion limit.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PRIORITY = 100


@dataclass(frozen=True)
class Node:
    """A state: its id, what it is, and whether a conversation ends there."""

    id: str
    description: str = ""
    terminal: bool = False
    initial: bool = False
    declared: bool = True  # False for a target that no state declares


@dataclass(frozen=True)
class Edge:
    """A declared transition. ``conditions`` are one-line summaries for labels."""

    source: str
    target: str
    index: int
    description: str = ""
    priority: int = DEFAULT_PRIORITY
    conditions: tuple[str, ...] = ()

    @property
    def guarded(self) -> bool:
        return bool(self.conditions)


@dataclass(frozen=True)
class GlobalEdge:
    """A global transition, drawn once: where it leads, and the states it applies in (``global_applies``).

    ``index`` is its position in ``global_transitions``; ``scope`` says in words where it applies, for labels.
    """

    target: str
    index: int
    sources: tuple[str, ...]
    scope: str = "from any state"
    description: str = ""
    priority: int = DEFAULT_PRIORITY
    conditions: tuple[str, ...] = ()

    @property
    def guarded(self) -> bool:
        return bool(self.conditions)


@dataclass
class Graph:
    """Nodes in declaration order, edges in declaration order, adjacency built once.

    ``edges`` are the states' own transitions; ``global_edges`` the global ones, once each. The adjacency
    (``successors``, ``predecessors``) has both, a global edge once per state it applies in, so every walk
    (reachability, traps) sees what a conversation can do; diagrams draw ``global_edges`` once.
    """

    name: str
    initial: str | None
    nodes: dict[str, Node]
    edges: list[Edge]
    global_edges: list[GlobalEdge] = field(default_factory=list)
    successors: dict[str, list[str]] = field(init=False, repr=False)
    predecessors: dict[str, list[str]] = field(init=False, repr=False)
    out_edges: dict[str, list[Edge]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.successors = {node: [] for node in self.nodes}
        self.predecessors = {node: [] for node in self.nodes}
        self.out_edges = {node: [] for node in self.nodes}
        for edge in self.edges:
            self.out_edges.setdefault(edge.source, []).append(edge)
            self.successors.setdefault(edge.source, []).append(edge.target)
            self.predecessors.setdefault(edge.target, []).append(edge.source)
        for global_edge in self.global_edges:
            for source in global_edge.sources:
                self.successors.setdefault(source, []).append(global_edge.target)
                self.predecessors.setdefault(global_edge.target, []).append(source)

    def edges_from(self, source: str) -> list[Edge]:
        return self.out_edges.get(source, [])


def global_applies(
    state_id: str,
    *,
    terminal: bool,
    target: str,
    from_states: Collection[str] | None,
    from_groups: Collection[str] | None,
    except_states: Collection[str] | None,
    groups: Mapping[str, Collection[str]],
) -> bool:
    """Whether a global transition is a candidate in ``state_id``: THE rule, for the model
    (``FSMDefinition.transitions_from``) and for raw documents (this graph, so lint and diagrams) alike.

    Never from a terminal state (terminal means no transitions of its own, and stays so), never a self-loop to
    the state it is in, never from ``except_states``; otherwise in every state, or in the union of
    ``from_states`` and the states of ``from_groups`` when either is given (a group not declared has no states).
    """
    if terminal or state_id == target or state_id in (except_states or ()):
        return False
    if from_states is None and from_groups is None:
        return True
    return state_id in (from_states or ()) or any(state_id in groups.get(name, ()) for name in from_groups or ())


# --- walks ---------------------------------------------------------------------------


def reachable_from(graph: Graph, start: str) -> Iterator[str]:
    """Every node reachable from ``start`` (itself included), breadth first."""
    if start not in graph.successors:
        return
    seen = {start}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        yield node
        for nxt in graph.successors.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)


def can_reach(graph: Graph, targets: Iterable[str]) -> Iterator[str]:
    """Every node from which one of ``targets`` can be reached (reverse BFS)."""
    seen = {t for t in targets if t in graph.predecessors}
    queue = deque(seen)
    while queue:
        node = queue.popleft()
        yield node
        for prev in graph.predecessors.get(node, ()):
            if prev not in seen:
                seen.add(prev)
                queue.append(prev)


def terminal_states(graph: Graph) -> Iterator[str]:
    """Declared states without outgoing transitions (a self-loop is not terminal)."""
    return (node.id for node in graph.nodes.values() if node.terminal and node.declared)


# --- building ------------------------------------------------------------------------


def summarize_condition(condition: Any) -> str:
    """A one-line summary of a condition: its description, else its logic, else its keys."""
    if not isinstance(condition, Mapping):
        return _compact(condition)
    description = condition.get("description")
    if isinstance(description, str) and description.strip():
        return " ".join(description.split())
    if condition.get("logic") is not None:
        return _compact(condition.get("logic"))
    keys = condition.get("requires_context_keys")
    if isinstance(keys, list) and keys:
        return "has " + ", ".join(str(k) for k in keys)
    return "always"


def _compact(value: Any, limit: int = 80) -> str:
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        text = "…"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def graph_from_document(data: Any) -> Graph:
    """Build the graph from a raw document, skipping whatever is malformed.

    A transition whose target is not a string is skipped; a target that names
    no state becomes an undeclared node so diagrams can show the dangling edge.
    """
    data = data if isinstance(data, Mapping) else {}
    states = data.get("states")
    states = states if isinstance(states, Mapping) else {}
    initial = data.get("initial_state")
    initial = initial if isinstance(initial, str) else None
    name = data.get("name")
    nodes: dict[str, Node] = {}
    edges: list[Edge] = []
    for key, state in states.items():
        key = str(key)
        state = state if isinstance(state, Mapping) else {}
        transitions = state.get("transitions")
        terminal = transitions is None or transitions == []
        description = state.get("description")
        nodes[key] = Node(
            id=key,
            description=description if isinstance(description, str) else "",
            terminal=terminal,
            initial=key == initial,
        )
        if not isinstance(transitions, list):
            continue
        for index, transition in enumerate(transitions):
            if not isinstance(transition, Mapping) or not isinstance(transition.get("target_state"), str):
                continue
            priority = transition.get("priority", DEFAULT_PRIORITY)
            if not isinstance(priority, int) or isinstance(priority, bool):
                priority = DEFAULT_PRIORITY
            conditions = transition.get("conditions")
            conditions = conditions if isinstance(conditions, list) else []
            tdesc = transition.get("description")
            edges.append(
                Edge(
                    source=key,
                    target=transition["target_state"],
                    index=index,
                    description=tdesc if isinstance(tdesc, str) else "",
                    priority=priority,
                    conditions=tuple(summarize_condition(c) for c in conditions),
                )
            )
    global_edges = _global_edges(data, nodes)
    for target in [edge.target for edge in edges] + [edge.target for edge in global_edges]:
        if target not in nodes:
            nodes[target] = Node(id=target, declared=False)
    return Graph(
        name=name if isinstance(name, str) else "",
        initial=initial,
        nodes=nodes,
        edges=edges,
        global_edges=global_edges,
    )


def _names(value: Any) -> list[str] | None:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else None


def _global_edges(data: Mapping[str, Any], nodes: Mapping[str, Node]) -> list[GlobalEdge]:
    """The global transitions of a raw document, each with the declared states it applies in."""
    declared = data.get("global_transitions")
    raw_groups = data.get("state_groups")
    groups = {
        str(name): _names(group.get("states")) or []
        for name, group in (raw_groups.items() if isinstance(raw_groups, Mapping) else ())
        if isinstance(group, Mapping)
    }
    out: list[GlobalEdge] = []
    for index, transition in enumerate(declared if isinstance(declared, list) else ()):
        if not isinstance(transition, Mapping) or not isinstance(target := transition.get("target_state"), str):
            continue
        from_states, from_groups = _names(transition.get("from_states")), _names(transition.get("from_groups"))
        except_states = _names(transition.get("except_states"))
        sources = tuple(
            node.id
            for node in nodes.values()
            if global_applies(
                node.id,
                terminal=node.terminal,
                target=target,
                from_states=from_states,
                from_groups=from_groups,
                except_states=except_states,
                groups=groups,
            )
        )
        priority = transition.get("priority", DEFAULT_PRIORITY)
        conditions = transition.get("conditions")
        description = transition.get("description")
        out.append(
            GlobalEdge(
                target=target,
                index=index,
                sources=sources,
                scope=_scope_words(from_states, from_groups, except_states),
                description=description if isinstance(description, str) else "",
                priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else DEFAULT_PRIORITY,
                conditions=tuple(summarize_condition(c) for c in conditions) if isinstance(conditions, list) else (),
            )
        )
    return out


def _scope_words(from_states: list[str] | None, from_groups: list[str] | None, except_states: list[str] | None) -> str:
    if from_states is None and from_groups is None:
        words = "from any state"
    else:
        named = [*(from_states or ()), *(f"group {g}" for g in from_groups or ())]
        words = "from " + (", ".join(named) if named else "no state")
    return words + (f" except {', '.join(except_states)}" if except_states else "")


def graph_from_definition(definition: Any) -> Graph:
    """The graph of a loaded ``FSMDefinition``."""
    return graph_from_document(definition.model_dump(mode="json", by_alias=True))


__all__ = [
    "Edge",
    "GlobalEdge",
    "Graph",
    "Node",
    "can_reach",
    "global_applies",
    "graph_from_definition",
    "graph_from_document",
    "reachable_from",
    "summarize_condition",
    "terminal_states",
]
