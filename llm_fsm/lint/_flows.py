"""fsm-lint's sub-flow checks: the call graph between definitions. No I/O of its own.

``lint`` looks at one document; a sub-flow is a second file, so these checks
need someone to load it. The caller supplies ``resolve(declaration, parent)``
(the CLI's loads files exactly where the engine looks; an application may pass
its own loader) and this module walks every definition reachable from the root
through ``flows`` declarations, iteratively, resolving each reference once.

What can go wrong only *between* definitions:

- the referenced definition is missing (FSM019) or does not load (FSM020);
- a called sub-flow can never finish, so its caller never resumes (FSM021);
- ``inputs``/``outputs`` name keys one side never has (FSM022-FSM024), by the
  same two-way dot-path rule as FSM014 (``lint.KeyCover``);
- calls form a cycle, so a definition can stack itself without bound (FSM025);
- a called sub-flow links onward, which silently drops the call's ``outputs``
  (FSM026: ``link`` archives the flow it leaves, outputs uncomputed).

A key a definition *has*: one a state collects, the application provides
(``application_context_keys``/``protected_context_keys``), a condition
requires, an action writes, or an ``outputs`` mapping of one of its own calls copies back. Keys a
sub-flow receives through a caller's ``inputs`` arrive as application data, so
a sub-flow that relies on one should list it in ``application_context_keys``;
that keeps every finding here a property of the declaring file alone, the
same whichever root the walk started from.

Never raises: a resolver failure is a diagnostic, and a bug here is FSM099.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field

from llm_fsm.definition._documents import Path, format_path
from llm_fsm.definition._graph import graph_from_definition, reachable_from
from llm_fsm.definition._model import (
    FlowDeclaration,
    FSMDefinition,
    TransitionCondition,
)
from llm_fsm.engine._data import DEFAULT_MAX_FLOW_DEPTH
from llm_fsm.errors import DefinitionError, DefinitionNotFoundError
from llm_fsm.lint._rules import Diagnostic, make_diagnostic
from llm_fsm.lint._support import KeyCover

logger = logging.getLogger(__name__)

#: a cycle longer than this is shown by its first steps (the whole chain is rarely the point)
_MAX_CYCLE_STEPS = 8

#: ``resolve(declaration, parent) -> child``; may raise (DefinitionNotFoundError → FSM019, anything else → FSM020)
Resolver = Callable[[FlowDeclaration, FSMDefinition], FSMDefinition]
#: ``line_for(definition, json_path_parts) -> line`` for diagnostics; None when unknown
LineFinder = Callable[[FSMDefinition, Path], "int | None"]


def declarations(definition: FSMDefinition) -> Iterator[tuple[Path, FlowDeclaration]]:
    """Every sub-flow declaration with its JSON path: definition-wide first, then per state."""
    for index, declaration in enumerate(definition.flows or []):
        yield ("flows", index), declaration
    for state_id, state in definition.states.items():
        for index, declaration in enumerate(state.flows or []):
            yield ("states", state_id, "flows", index), declaration


def _conditions(definition: FSMDefinition) -> Iterator[TransitionCondition]:
    for state in definition.states.values():
        for transition in state.transitions:
            yield from transition.conditions or []
    for global_transition in definition.global_transitions or ():
        yield from global_transition.conditions or []
    for _, declaration in declarations(definition):
        yield from declaration.conditions or []


def keys_had(definition: FSMDefinition) -> set[str]:
    """Keys the flow can hold: collected, application-provided, required, written by an action, or copied back
    by its calls."""
    keys = set(definition.provided_context_keys)
    for state in definition.states.values():
        keys.update(state.required_context_keys or ())
    for condition in _conditions(definition):
        keys.update(condition.requires_context_keys or ())
    for _, declaration in declarations(definition):
        if declaration.mode == "call":
            keys.update((declaration.outputs or {}).keys())
    for state in definition.states.values():
        for action in state.actions or ():
            keys.update(action.output_paths)
    return keys


def keys_used(definition: FSMDefinition) -> set[str]:
    """Keys the flow mentions anywhere: what it has, what conditions read, what it confirms or passes on."""
    keys = keys_had(definition)
    for condition in _conditions(definition):
        compiled = condition.compiled
        keys.update(compiled.reads if compiled is not None else ())
    for state in definition.states.values():
        if state.confirmation is not None:
            keys.update(state.confirmation.keys or ())
    for _, declaration in declarations(definition):
        keys.update((declaration.inputs or {}).values())
    for state in definition.states.values():
        for action in state.actions or ():
            keys.update(action.input_paths)
    return keys


@dataclass
class _Edge:
    """One declaration in one definition, and what it resolved to."""

    parent: Hashable
    parts: Path
    declaration: FlowDeclaration
    child: Hashable | None = None


@dataclass
class _Node:
    definition: FSMDefinition
    order: int
    edges: list[_Edge] = field(default_factory=list)


def _node_key(definition: FSMDefinition) -> Hashable:
    # The file when known (a resolver that does not cache still yields one node per file,
    # so a cycle terminates); the content otherwise.
    return ("file", definition.source) if definition.source else ("hash", definition.content_hash)


def _label(definition: FSMDefinition) -> str:
    return os.path.basename(definition.source) if definition.source else definition.name


class _FlowLinter:
    def __init__(self, root: FSMDefinition, resolve: Resolver, line_for: LineFinder | None) -> None:
        self.resolve = resolve
        self.line_for = line_for
        self.root_key = _node_key(root)
        self.nodes: dict[Hashable, _Node] = {self.root_key: _Node(root, 0)}
        self.out: list[Diagnostic] = []
        self._had: dict[Hashable, KeyCover] = {}

    def add(self, name: str, node: Hashable, parts: Path, message: str, hint: str) -> None:
        definition = self.nodes[node].definition
        line: int | None = None
        if self.line_for is not None:
            try:
                line = self.line_for(definition, parts)
            except Exception:  # a line is a nicety; never lose the finding over it
                logger.debug("no line for %s %s", definition.source, parts, exc_info=True)
        self.out.append(
            make_diagnostic(name, message, hint=hint, file=definition.source, path=format_path(parts), line=line)
        )

    # --- the walk -------------------------------------------------------------------

    def walk(self) -> None:
        """Breadth first from the root; each (definition, reference) that resolves is resolved once."""
        resolved: dict[tuple[Hashable, str], Hashable] = {}
        queue = deque([self.root_key])
        while queue:
            key = queue.popleft()
            node = self.nodes[key]
            for parts, declaration in declarations(node.definition):
                memo = (key, declaration.definition)
                child_key = resolved.get(memo)
                if child_key is None:  # a broken reference is reported at every declaration naming it
                    child = self._resolve(key, parts, declaration)
                    if child is not None:
                        child_key = resolved[memo] = _node_key(child)
                        if child_key not in self.nodes:
                            self.nodes[child_key] = _Node(child, len(self.nodes))
                            queue.append(child_key)
                node.edges.append(_Edge(key, parts, declaration, child_key))

    def _resolve(self, key: Hashable, parts: Path, declaration: FlowDeclaration) -> FSMDefinition | None:
        parent = self.nodes[key].definition
        where = (*parts, "definition")
        reference = declaration.definition
        try:
            child = self.resolve(declaration, parent)
        except DefinitionNotFoundError as exc:
            self.add(
                "flow-definition-not-found",
                key,
                where,
                f"sub-flow {declaration.name!r}: definition {reference!r} not found: {exc.message}",
                "fix the path (a relative path starts from this file's folder), or make sure the "
                "application's loader can resolve it",
            )
            return None
        except DefinitionError as exc:
            first = str(exc).splitlines()[0] if str(exc) else exc.message
            more = len(exc.problems) - 1
            self.add(
                "flow-definition-invalid",
                key,
                where,
                f"sub-flow {declaration.name!r}: definition {reference!r} does not load: {first}"
                + (f" (and {more} more problem(s))" if more > 0 else ""),
                f"run fsm-lint on {exc.file or reference} and fix its errors",
            )
            return None
        except Exception as exc:  # a custom resolver's own failure is still a finding, not a crash
            self.add(
                "flow-definition-invalid",
                key,
                where,
                f"sub-flow {declaration.name!r}: definition {reference!r} does not load: {type(exc).__name__}: {exc}",
                "check the loader the application uses for sub-flows",
            )
            return None
        if not isinstance(child, FSMDefinition):
            self.add(
                "flow-definition-invalid",
                key,
                where,
                f"sub-flow {declaration.name!r}: the loader returned a {type(child).__name__}, not a definition",
                "the loader must return an FSMDefinition",
            )
            return None
        return child

    # --- FSM021 / FSM026: does a called flow finish, does it link away ---------------

    def finishing(self) -> tuple[set[Hashable], set[Hashable]]:
        """(definitions that can finish, definitions that can link onward).

        A flow finishes when a terminal state is reachable from its initial state, or
        when a reachable state may link to a flow that finishes (``link`` replaces the
        flow, and the linked one returns to the caller in its place). Solved backwards
        over link edges, iteratively.
        """
        finishes: set[Hashable] = set()
        links_onward: set[Hashable] = set()
        linked_from: dict[Hashable, list[Hashable]] = {}
        # Only flows that declare sub-flows or are started as one are asked about: a definition
        # without either (most files) is not turned into a graph again (the model dump is costly).
        asked = {key for key, node in self.nodes.items() if node.edges}
        asked.update(edge.child for node in self.nodes.values() for edge in node.edges if edge.child is not None)
        for key, node in self.nodes.items():
            if key not in asked:
                continue
            definition = node.definition
            graph = graph_from_definition(definition)
            reachable = set(reachable_from(graph, definition.initial_state))
            if any(graph.nodes[s].terminal and graph.nodes[s].declared for s in reachable):
                finishes.add(key)
            for edge in node.edges:
                if edge.declaration.mode != "link":
                    continue
                startable = edge.parts[0] == "flows" or edge.parts[1] in reachable
                if startable and reachable:
                    links_onward.add(key)
                    if edge.child is not None:
                        linked_from.setdefault(edge.child, []).append(key)
        queue = deque(finishes)
        while queue:
            key = queue.popleft()
            for linker in linked_from.get(key, ()):
                if linker not in finishes:
                    finishes.add(linker)
                    queue.append(linker)
        return finishes, links_onward

    def check_returns(self) -> None:
        finishes, links_onward = self.finishing()
        for key, node in self.nodes.items():
            for edge in node.edges:
                declaration = edge.declaration
                if declaration.mode != "call" or edge.child is None:
                    continue
                child = self.nodes[edge.child].definition
                if edge.child not in finishes:
                    escape = " (only cancelling it would)" if child.cancellable else ""
                    self.add(
                        "called-flow-never-returns",
                        key,
                        edge.parts,
                        f"sub-flow {declaration.name!r} calls {_label(child)!r}, which cannot reach a terminal state "
                        f"from its initial state {child.initial_state!r}; this flow would never resume{escape}",
                        f"give {_label(child)!r} a terminal state (transitions: []) reachable from "
                        f"{child.initial_state!r}, or start it with mode: link if it is not meant to return",
                    )
                if declaration.outputs and edge.child in links_onward:
                    self.add(
                        "call-outputs-lost-by-link",
                        key,
                        (*edge.parts, "outputs"),
                        f"sub-flow {declaration.name!r} calls {_label(child)!r}, which can link to another flow; "
                        f"when it does, these outputs are never copied back (the linked flow's own outputs apply)",
                        f"declare these outputs on the link declarations of {_label(child)!r} as well, or have "
                        "it call instead of link",
                    )

    # --- FSM022-FSM024: the key mappings ---------------------------------------------

    def _had_cover(self, key: Hashable) -> KeyCover:
        cover = self._had.get(key)
        if cover is None:
            cover = self._had[key] = KeyCover(keys_had(self.nodes[key].definition))
        return cover

    def check_mappings(self) -> None:
        used: dict[Hashable, set[str]] = {}
        for key, node in self.nodes.items():
            parent_has = self._had_cover(key)
            for edge in node.edges:
                declaration = edge.declaration
                inputs, outputs = declaration.inputs or {}, declaration.outputs or {}
                for child_key, parent_key in inputs.items():
                    if not parent_has.covers(parent_key):
                        self.add(
                            "flow-input-never-provided",
                            key,
                            (*edge.parts, "inputs", child_key),
                            f"sub-flow {declaration.name!r} is handed {parent_key!r}, which this flow never "
                            f"collects, requires or is given, so {child_key!r} always starts empty",
                            f"collect {parent_key!r} in a state's required_context_keys, or list it in "
                            "application_context_keys",
                        )
                if edge.child is None:
                    continue
                child = self.nodes[edge.child].definition
                if edge.child not in used:
                    used[edge.child] = keys_used(child)
                child_uses = KeyCover([*used[edge.child], *outputs.values()])
                for child_key in inputs:
                    if not child_uses.covers(child_key):
                        self.add(
                            "flow-input-unused",
                            key,
                            (*edge.parts, "inputs", child_key),
                            f"sub-flow {declaration.name!r} is given {child_key!r}, which {_label(child)!r} never "
                            "collects, reads or passes on",
                            f"check the spelling against the keys of {_label(child)!r}, or list it in its "
                            "application_context_keys if its prompt relies on it",
                        )
                child_has = KeyCover([*self._had_cover(edge.child).keys, *inputs.keys()])
                for parent_key, child_key in outputs.items():
                    if not child_has.covers(child_key):
                        self.add(
                            "flow-output-never-provided",
                            key,
                            (*edge.parts, "outputs", parent_key),
                            f"sub-flow {declaration.name!r} copies back {child_key!r}, which {_label(child)!r} "
                            f"never collects or is given, so {parent_key!r} is never set",
                            f"check the spelling against the required_context_keys of {_label(child)!r}",
                        )

    # --- FSM025: recursion ------------------------------------------------------------

    def components(self) -> dict[Hashable, int]:
        """Strongly connected components of the resolved flow graph (Tarjan's, with an explicit stack)."""
        children = {key: [e.child for e in node.edges if e.child is not None] for key, node in self.nodes.items()}
        index: dict[Hashable, int] = {}
        low: dict[Hashable, int] = {}
        component: dict[Hashable, int] = {}
        on_stack: set[Hashable] = set()
        stack: list[Hashable] = []
        counter = labels = 0
        for start in self.nodes:
            if start in index:
                continue
            work: list[tuple[Hashable, int]] = [(start, 0)]
            while work:
                node, position = work.pop()
                if position == 0:
                    index[node] = low[node] = counter
                    counter += 1
                    stack.append(node)
                    on_stack.add(node)
                else:  # back from the child we descended into
                    low[node] = min(low[node], low[children[node][position - 1]])
                descended = False
                while position < len(children[node]):
                    child = children[node][position]
                    position += 1
                    if child not in index:
                        work.append((node, position))
                        work.append((child, 0))
                        descended = True
                        break
                    if child in on_stack:
                        low[node] = min(low[node], index[child])
                if descended or low[node] != index[node]:
                    continue
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = labels
                    if member == node:
                        break
                labels += 1
        return component

    def _path(self, start: Hashable, goal: Hashable, component: dict[Hashable, int]) -> list[_Edge]:
        """The shortest chain of declarations from ``start`` to ``goal`` inside their component."""
        if start == goal:
            return []
        came: dict[Hashable, _Edge] = {}
        queue = deque([start])
        seen = {start}
        while queue:
            node = queue.popleft()
            for edge in self.nodes[node].edges:
                child = edge.child
                if child is None or child in seen or component.get(child) != component[start]:
                    continue
                seen.add(child)
                came[child] = edge
                if child == goal:
                    chain = [edge]
                    while chain[-1].parent != start:
                        chain.append(came[chain[-1].parent])
                    return chain[::-1]
                queue.append(child)
        return []  # pragma: no cover - same component means a path exists

    def _step(self, edge: _Edge) -> str:
        parent = _label(self.nodes[edge.parent].definition)
        child = _label(self.nodes[edge.child].definition) if edge.child is not None else "?"
        verb = "calls" if edge.declaration.mode == "call" else "links to"
        return f"{parent!r} {verb} {child!r} (flow {edge.declaration.name!r})"

    def check_recursion(self) -> None:
        component = self.components()
        for key, node in self.nodes.items():
            for edge in node.edges:
                if edge.declaration.mode != "call" or edge.child is None:
                    continue
                if component[edge.child] != component[key]:
                    continue
                # only cycles through a call grow the stack; link-only loops replace the flow
                cycle = [edge, *self._path(edge.child, key, component)]
                steps = [self._step(e) for e in cycle[:_MAX_CYCLE_STEPS]]
                if len(cycle) > _MAX_CYCLE_STEPS:
                    steps.append(
                        f"… ({len(cycle) - _MAX_CYCLE_STEPS} more step(s) back to {_label(node.definition)!r})"
                    )
                self.add(
                    "recursive-flow",
                    key,
                    edge.parts,
                    f"sub-flow {edge.declaration.name!r} can start this flow again: "
                    + " → ".join(steps)
                    + f"; only the run-time depth limit (EngineConfig.max_flow_depth, default "
                    f"{DEFAULT_MAX_FLOW_DEPTH}) stops it, by refusing the next sub-flow",
                    "break the cycle (return with a terminal state instead of calling back), or use mode: link "
                    "where the flow is not meant to return",
                )

    def run(self) -> list[Diagnostic]:
        for check in (self.walk, self.check_returns, self.check_mappings, self.check_recursion):
            try:
                check()
            except Exception as exc:  # a bug in one check must not hide the others' findings
                logger.exception("flow lint check %s failed", check.__name__)
                self.add(
                    "internal-error",
                    self.root_key,
                    (),
                    f"flow {check.__name__} failed: {type(exc).__name__}: {exc}",
                    "this is a bug in fsm-lint; the other checks' findings still stand. Please report it",
                )
                if check == self.walk:
                    break
        order = {key: node.order for key, node in self.nodes.items()}
        files = {node.definition.source: order[key] for key, node in self.nodes.items()}
        return sorted(self.out, key=lambda d: (files.get(d.file, 0), d.line is None, d.line or 0, d.code, d.path))


def lint_flows(root: FSMDefinition, resolve: Resolver, *, line_for: LineFinder | None = None) -> list[Diagnostic]:
    """Sub-flow diagnostics for ``root`` and every definition it can reach through ``flows``.

    Each diagnostic's ``file`` is the declaring definition's ``source`` and its
    ``path`` the declaration's JSON path; ``line_for`` (optional) supplies lines.
    Never raises.
    """
    try:
        return _FlowLinter(root, resolve, line_for).run()
    except Exception as exc:  # e.g. a root that is not a definition: still a finding, never a traceback
        logger.exception("flow lint failed")
        return [make_diagnostic("internal-error", f"flow lint failed: {type(exc).__name__}: {exc}")]


__all__ = ["LineFinder", "Resolver", "declarations", "keys_had", "keys_used", "lint_flows"]
