"""The finite abstraction of a flow's data: which keys matter, the cells their values fall into, and one value
(with the words a user says it in) standing for each cell.

A guard is a boolean skeleton over *atoms*; an atom that compares one key with constants (``{">": [{"var":
"age"}, 17]}``, ``{"in": [{"var": "drink"}, [...]]}``, ``{"<=": [0, {"var": "age"}, 130]}``) is decided by the
value's cell: the tuple of every such atom's answer. Two values with the same tuple satisfy the same guards, so
one representative per tuple is enough, and the checker explores representatives only. Atoms that compare keys
with each other or compute with them (``origin != destination``, ``debts / income``) are not decided by cells:
a key read by one is *inexact*, and its cell is the representative itself (a small set of values chosen to make
such atoms both true and false). A claim that rests on an inexact key is reported as ``unknown``, never proved.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.engine._context import get_path, has_value
from llm_fsm.engine._values import check, normalise
from llm_fsm.errors import LogicError
from llm_fsm.lint.proof._examples import pattern_examples
from llm_fsm.logic import evaluate_logic, truthy

#: the most representatives tried for one key (enum values, numbers around constants, strings)
MAX_VALUES = 12
#: values of a key compared with another key: three give "equal" and "different" with room to change one
MAX_RELATED = 3
#: values tried for a key a condition computes with (its cells are its values: each one multiplies the space)
MAX_INEXACT = 2
_ABSENT = "∅"


@dataclass(frozen=True, slots=True)
class Value:
    """One representative: what is written, and a user message that says it (what grounds it)."""

    value: Any
    said: str


def _var_name(node: Any) -> str | None:
    if isinstance(node, dict) and len(node) == 1 and "var" in node:
        target = node["var"]
        if isinstance(target, list) and target:
            target = target[0]
        return target if isinstance(target, str) and target else None
    return None


def _constant(node: Any) -> bool:
    if isinstance(node, dict):
        return False
    if isinstance(node, list):
        return all(_constant(item) for item in node)
    return True


_CONNECTIVES = ("and", "or", "!", "!!")
_RELATIONS = ("==", "!=", "===", "!==", "in")


def _atoms(logic: Any) -> Iterator[tuple[tuple[str, ...], Any]]:
    """The leaves under a guard's boolean skeleton, each with the keys it reads: one key (decided by that key's
    cell, however it computes: ``{">": [{"/": [{"var": "x"}, 2]}, 1]}``, ``{"some": [{"var": "xs"}, ...]}``), two
    keys related (``==``, ``!=``, ``in`` between two keys), or more. Siblings of one ``and``/``or`` that read the
    same single key are one leaf ("the description mentions a bill, a payment or a charge"), so values that agree
    on the whole group share a cell."""
    reads = _reads(logic)
    if len(reads) == 1:
        yield tuple(reads), logic
        return
    if isinstance(logic, dict) and len(logic) == 1:
        ((operator, args),) = logic.items()
        if operator in _CONNECTIVES:
            items = args if isinstance(args, list) else [args]
            groups: dict[str, list[Any]] = {}
            for arg in items:
                single = _reads(arg)
                if len(single) == 1 and operator in ("and", "or"):
                    groups.setdefault(next(iter(single)), []).append(arg)
                else:
                    yield from _atoms(arg)
            for key, members in groups.items():
                yield (key,), members[0] if len(members) == 1 else {operator: members}
            return
    if reads:
        yield tuple(sorted(reads)), logic


def _reads(logic: Any) -> set[str]:
    found: set[str] = set()

    def walk(node: Any) -> None:
        name = _var_name(node)
        if name is not None:
            found.add(name)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(logic)
    return found


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
        for transition in definition.transitions_from(current):
            if first or transition.is_guarded:
                frontier.append(transition.target_state)
        first = False
    return list(seen.values())


def used_by(state: State, definition: FSMDefinition | None = None) -> list[str]:
    """The keys a state's own decisions read: what it collects and confirms, its conditions (with ``definition``:
    those of the global transitions that apply to it too), its actions' inputs."""
    keys = list(state.required_context_keys or ())
    if state.confirmation is not None:
        keys += state.confirmation.keys or ()
    for transition in definition.transitions_from(state.id) if definition is not None else state.transitions:
        for condition in transition.conditions or ():
            keys += condition.requires_context_keys or ()
            keys += sorted(guard_keys(condition.logic))
    for action in state.actions or ():
        keys += action.input_paths
    return keys


def guard_keys(logic: Any) -> set[str]:
    """The keys a condition's logic reads (none for a condition without logic)."""
    return _reads(logic) if logic is not None else set()


def nested(path: str, value: Any) -> dict[str, Any]:
    data: dict[str, Any] = {}
    current = data
    parts = path.split(".")
    for part in parts[:-1]:
        current[part] = {}
        current = current[part]
    current[parts[-1]] = value
    return data


def _holds(atom: Any, path: str, value: Any) -> Any:
    try:
        return truthy(evaluate_logic(atom, nested(path, value)))
    except (LogicError, ValueError, TypeError, RecursionError):
        return "error"


class Abstraction:
    """The keys of one definition that decide anything, their atoms, and their representatives."""

    def __init__(self, definition: FSMDefinition, extra: tuple[str, ...] = ()) -> None:
        """``extra``: keys that matter from outside, such as the keys a caller's ``outputs`` read of a sub-flow."""
        self.definition = definition
        self.extra = extra
        self.atoms: dict[str, list[Any]] = {}
        self.inexact: set[str] = set()
        """Keys read by an atom cells do not decide (compared with another key, computed with)."""
        self.related: dict[str, set[str]] = {}
        """Keys compared with each other (``origin != destination``): each takes its values from a shared pool,
        so both "equal" and "different" are explored, and its cell is its value."""
        relevant: set[str] = set()
        for logic in self._logics():
            for keys, atom in _atoms(logic):
                relevant.update(keys)
                if len(keys) == 1:
                    self.atoms.setdefault(keys[0], []).append(atom)
                elif len(keys) == 2 and _relation(atom):
                    self.related.setdefault(keys[0], set()).add(keys[1])
                    self.related.setdefault(keys[1], set()).add(keys[0])
                else:
                    self.inexact.update(keys)
        for state in definition.states.values():
            relevant.update(state.required_context_keys or ())
            if state.confirmation is not None:
                relevant.update(state.confirmation.keys or ())
            for transition in definition.transitions_from(state.id):
                for condition in transition.conditions or ():
                    relevant.update(condition.requires_context_keys or ())
            for action in state.actions or ():
                relevant.update(action.input_paths)
                relevant.update(action.output_paths)
        for declaration in [*(definition.flows or []), *(f for s in definition.states.values() for f in s.flows or [])]:
            relevant.update((declaration.inputs or {}).values())
            relevant.update(declaration.outputs or {})
        relevant.update(extra)
        relevant = {key for key in relevant if key and not key.startswith("_")}
        self.keys: tuple[str, ...] = tuple(sorted(relevant))
        self._cells: dict[tuple[str, str], Any] = {}
        self._live: dict[str, tuple[str, ...]] = {}
        self._relevant: dict[str, tuple[str, ...]] = {}
        self.values: dict[str, tuple[Value, ...]] = {key: self._representatives(key) for key in self.keys}

    def _logics(self) -> Iterator[Any]:
        definition = self.definition
        for state in definition.states.values():
            for transition in definition.transitions_from(state.id):
                for condition in transition.conditions or ():
                    if condition.logic is not None:
                        yield condition.logic
        for declaration in [*(definition.flows or []), *(f for s in definition.states.values() for f in s.flows or [])]:
            for condition in declaration.conditions or ():
                if condition.logic is not None:
                    yield condition.logic

    def exact(self, logic: Any) -> bool:
        """Whether cells decide this condition: every atom reads one key, or relates two (``a != b``)."""
        return all(len(keys) == 1 or (len(keys) == 2 and _relation(atom)) for keys, atom in _atoms(logic))

    def declaration(self, key: str) -> KeyDeclaration | None:
        found = self.definition.declaration_for(key)
        return found[1] if found is not None else None

    # --- cells ---------------------------------------------------------------------------------------------

    def cell(self, key: str, data: Mapping[str, Any]) -> Any:
        """The cell of ``key``'s value in ``data``: absent, the atoms' answers, or (inexact keys) the value."""
        if not has_value(data, key):
            return _ABSENT
        value = get_path(data, key)
        text = json.dumps(value, sort_keys=True, default=str)
        if key in self.inexact or key in self.related:
            return text
        found = self._cells.get((key, text))
        if found is None:
            found = self._exact_cell(key, value)
            if len(self._cells) < 65536:
                self._cells[(key, text)] = found
        return found

    def signature(self, data: Mapping[str, Any], state_id: str) -> tuple[Any, ...]:
        """The cells of the keys that can change what happens next in ``state_id`` (``relevant``)."""
        return tuple((key, self.cell(key, data)) for key in self.relevant(state_id))

    def relevant(self, state_id: str) -> tuple[str, ...]:
        """The live keys this state's next turn can read (its own, its targets', those of the states guarded steps
        chain to), and every live key the model cannot write (an action's output, the application's).

        A key the model may write that no state of this turn's reach reads is left out: the model can write it
        again, to any value, in the turn that reads it, so the configurations that differ only there reach the
        same configurations wherever it matters (docs/prove.md, "The abstraction")."""
        found = self._relevant.get(state_id)
        if found is None:
            near = {key for state in turn_reach(self.definition, state_id) for key in used_by(state, self.definition)}
            found = tuple(
                key for key in self.live(state_id) if key in near or key in self.extra or not self.model_writes(key)
            )
            self._relevant[state_id] = found
        return found

    def model_writes(self, key: str) -> bool:
        """Whether the model may write ``key`` (the engine drops the rest of its writes)."""
        if key in self.definition.application_only_keys:
            return False
        declaration = self.declaration(key)
        if declaration is None:
            return self.definition.additional_keys
        return declaration.writable_by == "model"

    def live(self, state_id: str) -> tuple[str, ...]:
        found = self._live.get(state_id)
        if found is None:
            states = self.definition.states
            seen: set[str] = set()
            frontier = [state_id]
            keys: set[str] = set(self.extra)
            while frontier:
                current = frontier.pop()
                state = states.get(current)
                if state is None or current in seen:
                    continue
                seen.add(current)
                keys.update(used_by(state, self.definition))
                for declaration in [*(state.flows or []), *(self.definition.flows or [])]:
                    keys.update((declaration.inputs or {}).values())
                    keys.update(declaration.outputs or {})
                frontier += [t.target_state for t in self.definition.transitions_from(state.id)]
            found = self._live[state_id] = tuple(key for key in self.keys if key in keys)
        return found

    def shown(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The relevant keys' values, for people (a finding's configuration)."""
        return {key: get_path(data, key) for key in self.keys if has_value(data, key)}

    # --- representatives ----------------------------------------------------------------------------------

    def _representatives(self, key: str) -> tuple[Value, ...]:
        declaration = self.declaration(key)
        chosen: dict[Any, Value] = {}
        covered: set[Any] = set()
        for raw in self._candidates(key, declaration):
            value = raw
            if declaration is not None:
                try:
                    value = normalise(declaration, raw)
                    if check(declaration, value) is not None:
                        continue
                except (ValueError, TypeError):
                    continue
            cell = self.cell(key, nested(key, value))
            if cell == _ABSENT or cell in chosen:
                continue
            exact = self._exact_cell(key, value)
            if key in self.inexact and exact not in covered:
                covered.add(exact)  # every cell of the key's own atoms first: its single-key conditions stay exact
            elif len(chosen) >= self._most(key):
                continue
            chosen[cell] = Value(value, said(value))
        return tuple(chosen.values())

    def _exact_cell(self, key: str, value: Any) -> Any:
        return (isinstance(value, bool), *(_holds(atom, key, value) for atom in self.atoms.get(key, ())))

    def _most(self, key: str) -> int:
        declaration = self.declaration(key)
        if declaration is not None and declaration.enum is not None:
            return MAX_VALUES
        if key in self.inexact:
            return MAX_INEXACT
        return MAX_RELATED if key in self.related else MAX_VALUES

    def _candidates(self, key: str, declaration: KeyDeclaration | None) -> Iterator[Any]:
        yield from self._own_candidates(key, declaration)
        for partner in sorted(self.related.get(key, ())):
            yield from self._own_candidates(partner, self.declaration(partner))

    def _own_candidates(self, key: str, declaration: KeyDeclaration | None) -> Iterator[Any]:
        constants = [c for atom in self.atoms.get(key, ()) for c in _constants_of(atom)]
        if declaration is not None and declaration.enum is not None:
            yield from declaration.enum
            if declaration.dontcare:
                yield "dontcare"
            return
        kind = declaration.type if declaration is not None else None
        if declaration is not None and declaration.examples:
            yield from declaration.examples
        if kind == "boolean" or (kind is None and any(isinstance(c, bool) for c in constants)):
            yield from (True, False)
            if kind == "boolean":
                return
        numbers = sorted({c for c in constants if isinstance(c, (int, float)) and not isinstance(c, bool)})
        if kind in ("integer", "number") or (kind is None and numbers):
            yield from _numbers(numbers, declaration)
            if kind is not None:
                return
        if kind == "array":
            yield from _arrays(declaration, constants)
            return
        if kind == "object":
            yield {"value": "x"}
            return
        if declaration is not None and declaration.pattern:
            yield from pattern_examples(declaration.pattern)
        formatted = _formatted(declaration)
        if formatted is not None:
            yield from formatted
            return
        for constant in constants:
            if isinstance(constant, str) and constant:
                yield constant
            elif isinstance(constant, list):
                yield from (item for item in constant if isinstance(item, str) and item)
        yield from ("alpha example", "bravo example", "charlie example")
        for constant in constants:  # substrings looked for: a text that contains each
            if isinstance(constant, str) and constant:
                yield f"about {constant} here"


def _relation(atom: Any) -> bool:
    if not isinstance(atom, dict) or len(atom) != 1:
        return False
    ((operator, args),) = atom.items()
    return operator in _RELATIONS and isinstance(args, list) and all(_var_name(a) is not None for a in args)


def _constants_of(atom: Any) -> Iterator[Any]:
    """Every constant in an atom (the numbers, strings and lists it compares with)."""
    if isinstance(atom, dict):
        if _var_name(atom) is not None or "var" in atom:
            return
        for value in atom.values():
            yield from _constants_of(value)
    elif isinstance(atom, list):
        if atom and all(not isinstance(item, (dict, list)) for item in atom):
            yield atom
        for item in atom:
            yield from _constants_of(item)
    else:
        yield atom


def _numbers(constants: list[Any], declaration: KeyDeclaration | None) -> Iterator[Any]:
    integer = declaration is not None and declaration.type == "integer"
    low = declaration.minimum if declaration is not None else None
    high = declaration.maximum if declaration is not None else None
    points: list[float] = []
    for c in constants:
        points += [c, c - 1, c + 1, c - 0.5, c + 0.5]
    points += [1, 0, 2, 5, 10, 100, 5000, 100000, -1]
    for pair in itertools.pairwise(constants):
        points.append((pair[0] + pair[1]) / 2)
    for bound in (low, high):
        if bound is not None:
            points += [bound, bound + 1, bound - 1]
    for point in points:
        if integer:
            if point != int(point):
                continue
            point = int(point)
        elif isinstance(point, float) and point == int(point):
            point = int(point)
        if (low is not None and point < low) or (high is not None and point > high):
            continue
        yield point


def _arrays(declaration: KeyDeclaration | None, constants: list[Any]) -> Iterator[Any]:
    items = declaration.items if declaration is not None else None
    options: list[Any] = []
    if items is not None and items.enum is not None:
        options = list(items.enum)
    elif items is not None and items.pattern:
        options = list(pattern_examples(items.pattern))
    else:
        options = [c for c in constants if isinstance(c, str)] or ["alpha", "bravo"]
    for option in options:
        yield [option]
    yield from ([a, b] for a, b in itertools.combinations(options, 2))


_DAY = dt.date(2027, 3, 12)


def _formatted(declaration: KeyDeclaration | None) -> list[Any] | None:
    if declaration is None or declaration.format is None:
        return None
    return {
        "date": [_DAY.isoformat(), (_DAY + dt.timedelta(days=30)).isoformat()],
        "date-time": ["2027-03-12T14:30:00"],
        "time": ["14:30", "09:15"],
        "email": ["ada@example.com", "grace@example.org"],
        "phone": ["+442079460958", "+14155550123"],
        "uri": ["https://example.com/a"],
        "uuid": ["123e4567-e89b-42d3-a456-426614174000"],
    }.get(declaration.format, ["alpha example"])


def said(value: Any) -> str:
    """Words a user would use for ``value``: what grounds it when its key is grounded."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(said(item) for item in value)
    if isinstance(value, str):
        return value.replace("_", " ") if "_" in value else value
    return json.dumps(value) if isinstance(value, dict) else str(value)


__all__ = ["MAX_VALUES", "Abstraction", "Value", "guard_keys", "nested", "said", "turn_reach", "used_by"]
