"""The four properties, judged on the explored configurations.

- ``progress``: a reachable state (of the root flow) that no explored reply leaves, other than by cancelling.
- ``no_trap``: a reachable configuration from which no path (cancels aside) ends the conversation or gives it to a
  person, in a state that can be left (a state nothing leaves is ``progress``, not also ``no_trap``).
- ``flows_return``: a sub-flow call from which the caller is never resumed, resumed without the declared outputs,
  or calls that stack a flow on itself.
- ``no_model_gate``: a guarded transition into a state that matters whose guard reads only keys the model writes,
  ungrounded, that no state asks the user for; confirmed by running the turn in which the model alone writes
  them while the user says "ok".

A failure is evidence: a path of real turns. It is reported as failed only when the claim it rests on ("no reply
leaves", "nothing ahead ends") was checked over every cell, exactly; otherwise it is ``unknown``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from llm_fsm.definition._model import FSMDefinition, State, Transition
from llm_fsm.lint.proof._cells import Abstraction, guard_keys
from llm_fsm.lint.proof._drive import Driver, Move
from llm_fsm.lint.proof._explore import CANCELS, Exploration, Node
from llm_fsm.lint.proof._moves import assignments, gate_move

Place = tuple[tuple[str, ...], str, str]


@dataclass
class Claim:
    """A would-be finding: the property, where, why, the node whose path shows it, and the extra last turn."""

    property: str
    state: str
    message: str
    node: int
    exact: bool
    flow: str | None = None
    called: str | None = None
    transition: str | None = None
    last: tuple[Move, dict[str, dict[str, object]], str, tuple[str, ...]] | None = None
    expect: dict[str, object] = field(default_factory=dict)


def _place(node: Node) -> Place:
    return (node.stack, node.fsm_id, node.state)


def _goal(node: Node) -> bool:
    return node.instance.status == "ended" or node.instance.mode == "human"


def _depth(node: Node) -> int:
    return len(node.instance.flow_stack)


class Judge:
    def __init__(self, driver: Driver, found: Exploration) -> None:
        self.driver = driver
        self.found = found
        self.nodes = found.nodes
        self.forward: dict[int, list[int]] = {}
        self.backward: dict[int, list[int]] = {}
        self.returning: dict[int, list[int]] = {}
        """Backward edges less a paused flow resumed (the user going back to the caller is no return)."""
        for source, edges in found.edges.items():
            for edge in edges:
                if edge.verdict in CANCELS:
                    continue
                self.forward.setdefault(source, []).append(edge.target)
                self.backward.setdefault(edge.target, []).append(source)
                if edge.verdict != "flow_resumed":
                    self.returning.setdefault(edge.target, []).append(source)

    # --- helpers -------------------------------------------------------------------------------------------

    def _reach_back(self, targets: Iterable[int], graph: dict[int, list[int]] | None = None) -> set[int]:
        edges = self.backward if graph is None else graph
        seen = set(targets)
        queue = deque(seen)
        while queue:
            for source in edges.get(queue.popleft(), ()):
                if source not in seen:
                    seen.add(source)
                    queue.append(source)
        return seen

    def _closure(self, start: int) -> set[int]:
        seen = {start}
        queue = deque([start])
        while queue:
            for target in self.forward.get(queue.popleft(), ()):
                if target not in seen:
                    seen.add(target)
                    queue.append(target)
        return seen

    def _exact(self, nodes: Iterable[int]) -> bool:
        """Whether every reply of these configurations was explored over exact cells (no combination left out,
        no exit whose guard the cells cannot decide)."""
        for index in nodes:
            node = self.nodes[index]
            if node.approximate:
                return False
            abstraction = self.driver.abstraction(node.fsm_id)
            definition = self.driver.definition(node.fsm_id)
            state = definition.states.get(node.state)
            if state is not None and _inexact_exit(definition, state, abstraction):
                return False
        return self.found.complete

    # --- the properties ------------------------------------------------------------------------------------

    def claims(self) -> list[Claim]:
        claims: list[Claim] = []
        stuck = self._progress(claims)
        self._traps(claims, stuck)
        self._returns(claims)
        self._gates(claims)
        return claims

    def _progress(self, claims: list[Claim]) -> set[Place]:
        places: dict[Place, list[int]] = {}
        for node in self.nodes:
            if not node.settled and not node.truncated:
                places.setdefault(_place(node), []).append(node.index)
        stuck: set[Place] = set()
        for place, members in places.items():
            definition = self.driver.definition(place[1])
            state = definition.states.get(place[2])
            if state is None or state.is_terminal:
                continue
            # a sub-flow called from here comes back here: calling one is no way out of the state
            leaves = any(
                self.nodes[t].settled
                or (_place(self.nodes[t]) != place and _depth(self.nodes[t]) <= _depth(self.nodes[i]))
                for i in members
                for t in self.forward.get(i, ())
            )
            if leaves:
                continue
            stuck.add(place)
            if place[0]:
                continue  # inside a sub-flow: the call is what fails (flows_return)
            exits = ", ".join(dict.fromkeys(t.target_state for t in definition.transitions_from(state.id)))
            claims.append(
                Claim(
                    "progress",
                    state.id,
                    f"no answer leaves {state.id!r}: every exit ({exits}) needs a condition that cannot hold, or a "
                    "key nothing reachable collects or writes",
                    members[0],
                    self._exact(members),
                    expect={"state": state.id, "ended": False},
                )
            )
        return stuck

    def _leaves(self, source: int, target: int, place: Place) -> bool:
        after = self.nodes[target]
        return after.settled or (_place(after) != place and _depth(after) <= _depth(self.nodes[source]))

    def _traps(self, claims: list[Claim], stuck: set[Place]) -> None:
        # a configuration that can reach a state nothing leaves is that state's progress finding, not a trap of its own
        finishing = self._reach_back(n.index for n in self.nodes if _goal(n) or n.truncated or _place(n) in stuck)
        covered: set[int] = set()
        for node in self.nodes:
            if node.settled or node.index in finishing or node.stack or _place(node) in stuck:
                continue
            if node.index in covered:
                continue  # one finding per trap: the first configuration (shortest path) that enters it
            closure = self._closure(node.index)
            covered |= closure
            claims.append(
                Claim(
                    "no_trap",
                    node.state,
                    f"from {node.state!r} with {_shown(self.driver, node)} no path ends the conversation: every "
                    f"way on comes back to {_states(self.nodes, closure)}",
                    node.index,
                    self._exact(closure),
                    expect={"state": node.state, "ended": False},
                )
            )

    def _returns(self, claims: list[Claim]) -> None:
        seen: set[tuple[str, str, str]] = set()
        deepest = max((_depth(n) for n in self.nodes), default=0)
        for level in range(1, deepest + 1):
            back = self._reach_back(
                (n.index for n in self.nodes if _goal(n) or n.truncated or _depth(n) < level), self.returning
            )
            for node in self.nodes:
                if _depth(node) != level or node.settled or node.index in back:
                    continue
                caller = node.instance.flow_stack[-1]
                call = (caller.fsm_id, caller.current_state, node.instance.flow_name or "")
                if call in seen:
                    continue
                seen.add(call)
                claims.append(self._call_claim(node, f"sub-flow {call[2]!r} can never return from {node.state!r}"))
        self._outputs(claims, seen)
        for node in self.nodes:
            names = node.stack
            if len(set(names)) < len(names):
                caller = node.instance.flow_stack[-1]
                key = (caller.fsm_id, caller.current_state, names[-1])
                if key not in seen:
                    seen.add(key)
                    chain = " → ".join(names)
                    claims.append(
                        self._call_claim(
                            node,
                            f"sub-flows call themselves ({chain}): a conversation can "
                            "stack flows up to the depth limit",
                        )
                    )
        for index, move in self.found.depth_refusals:
            node = self.nodes[index]
            key = (node.fsm_id, node.state, move.flow or "")
            if key not in seen:
                seen.add(key)
                claims.append(
                    Claim(
                        "flows_return",
                        node.state,
                        f"starting {move.flow!r} here passes the flow depth limit",
                        index,
                        True,
                        flow=node.stack[-1] if node.stack else None,
                        called=move.flow,
                        expect={"state": node.state, "stack": list(node.stack)},
                    )
                )

    def _outputs(self, claims: list[Claim], seen: set[tuple[str, str, str]]) -> None:
        returns: dict[tuple[str, str, str], tuple[int, bool, list[str]]] = {}
        for source, edges in self.found.edges.items():
            node = self.nodes[source]
            if not node.instance.flow_stack:
                continue
            mapping = node.instance.flow_output_mapping
            for edge in edges:
                after = self.nodes[edge.target]
                if edge.verdict in CANCELS or edge.verdict == "flow_resumed" or _depth(after) >= _depth(node):
                    continue
                caller = node.instance.flow_stack[-1]
                call = (caller.fsm_id, caller.current_state, node.instance.flow_name or "")
                handed = set(edge.handed or ())
                missing = [key for key in mapping if key not in handed]
                best = returns.get(call)
                if best is None or (not best[1] and not missing):
                    returns[call] = (edge.target, not missing, missing)
        for call, (target, complete, missing) in returns.items():
            if complete or call in seen:
                continue
            seen.add(call)
            node = self.nodes[target]
            claims.append(
                Claim(
                    "flows_return",
                    node.state,
                    f"sub-flow {call[2]!r} returns without its declared output(s) {', '.join(missing)}",
                    target,
                    self._exact(self.nodes[i].index for i in range(len(self.nodes)) if self.nodes[i].stack),
                    flow=node.stack[-1] if node.stack else None,
                    called=call[2],
                    expect={"state": node.state, "stack": list(node.stack)},
                )
            )

    def _call_claim(self, node: Node, message: str) -> Claim:
        caller = node.instance.flow_stack[-1]
        stack = node.stack
        return Claim(
            "flows_return",
            caller.current_state,
            f"{message} (called from {caller.current_state!r})",
            node.index,
            self._exact(self._closure(node.index)),
            flow=stack[-2] if len(stack) > 1 else None,
            called=node.instance.flow_name,
            expect={"state": node.state, "stack": list(stack)},
        )

    def _gates(self, claims: list[Claim]) -> None:
        done: set[tuple[str, str, int]] = set()
        tried: dict[tuple[str, str, int], int] = {}
        for node in self.nodes:
            if node.settled:
                continue
            definition = self.driver.definition(node.fsm_id)
            abstraction = self.driver.abstraction(node.fsm_id)
            state = definition.states.get(node.state)
            if state is None:
                continue
            for index, transition in enumerate(definition.transitions_from(state.id)):
                key = (node.fsm_id, state.id, index)
                if key in done or tried.get(key, 0) >= 4:
                    continue
                keys = gate_keys(definition, abstraction, transition)
                if keys is None or not matters(definition, state, transition):
                    continue
                tried[key] = tried.get(key, 0) + 1
                opened = self._open_gate(node, transition.target_state, keys, abstraction)
                if opened is None:
                    continue
                done.add(key)
                move, outcome_stubs, after_state, after_stack = opened
                claims.append(
                    Claim(
                        "no_model_gate",
                        state.id,
                        f"the model alone can open {state.id!r} → {transition.target_state!r}: its condition reads "
                        f"only {', '.join(keys)}, which the model writes, no one grounds and no state asks the user "
                        "for (declare them writable_by: application, grounded, or collect them in a state)",
                        node.index,
                        True,
                        flow=node.stack[-1] if node.stack else None,
                        transition=transition.target_state,
                        last=(move, outcome_stubs, after_state, after_stack),
                        expect={"state": after_state, "context": {k: v for k, v in move.update}},
                    )
                )

    def _open_gate(
        self, node: Node, target: str, keys: list[str], abstraction: Abstraction
    ) -> tuple[Move, dict[str, dict[str, object]], str, tuple[str, ...]] | None:
        for assignment in assignments(abstraction, keys):
            move = gate_move(target, assignment)
            outcome = self.driver.step(node.instance, move)
            if outcome.error is None and target in outcome.moved_to:
                stubs: dict[str, dict[str, object]] = dict(outcome.stubs)
                return move, stubs, outcome.instance.current_state, tuple(outcome.instance.stack)
        return None


def gate_keys(definition: FSMDefinition, abstraction: Abstraction, transition: Transition) -> list[str] | None:
    """The keys a guarded transition's conditions read, when the model alone can write all of them: writable by
    it, not grounded, asked for by no state. None otherwise (not a gate the model can open by itself)."""
    if not transition.is_guarded:
        return None
    keys: list[str] = []
    for condition in transition.conditions or ():
        keys += condition.requires_context_keys or ()
        keys += sorted(guard_keys(condition.logic))
    keys = list(dict.fromkeys(keys))
    if not keys:
        return None
    collected = {
        key
        for state in definition.states.values()
        for key in [
            *(state.required_context_keys or ()),
            *((state.confirmation.keys or []) if state.confirmation else []),
        ]
    }
    for key in keys:
        if key in collected or not abstraction.model_writes(key):
            return None
        declaration = abstraction.declaration(key)
        if declaration is not None and declaration.is_grounded:
            return None
        if not abstraction.values.get(key):
            return None
    return keys


def matters(definition: FSMDefinition, state: State, transition: Transition) -> bool:
    """A terminal, a handoff, a state with actions, or one no other way reaches."""
    target = definition.states.get(transition.target_state)
    if target is None:
        return False
    if target.is_terminal or target.handoff or target.actions:
        return True
    seen = {definition.initial_state}
    frontier = [definition.initial_state]
    while frontier:
        current = definition.states.get(frontier.pop())
        if current is None:
            continue
        for other in definition.transitions_from(current.id):
            if other is transition:
                continue
            if other.target_state not in seen:
                seen.add(other.target_state)
                frontier.append(other.target_state)
    return target.id not in seen


def _inexact_exit(definition: FSMDefinition, state: State, abstraction: Abstraction) -> bool:
    return any(
        not abstraction.exact(condition.logic)
        for transition in definition.transitions_from(state.id)
        for condition in transition.conditions or ()
        if condition.logic is not None
    )


def _shown(driver: Driver, node: Node) -> str:
    shown = driver.abstraction(node.fsm_id).shown(node.instance.context.data)
    return ", ".join(f"{k}={v!r}" for k, v in shown.items()) or "no data"


def _states(nodes: list[Node], indexes: set[int]) -> str:
    names = sorted({nodes[i].state for i in indexes})
    return ", ".join(repr(n) for n in names[:6]) + (" …" if len(names) > 6 else "")


__all__ = ["Claim", "Judge", "gate_keys", "matters"]
