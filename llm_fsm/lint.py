"""fsm-lint's checks: diagnostics over a parsed definition document. No I/O.

Input is what ``documents`` produces — raw data, a path→line map, a file name —
not a validated model: lint must say everything that is wrong with a file in
one run, including files the model refuses, and it must never raise, whatever
the input (a property test feeds it arbitrary JSON).

Every check is linear in states + transitions; graph questions go through the
iterative walks in ``graph``. Each finding is a ``Diagnostic`` with a stable
code from ``RULES`` (documented in docs/lint.md).

Context keys and dot paths: a key is *provided* when a state collects it
(``required_context_keys``), the application declares it
(``application_context_keys`` / ``protected_context_keys``) or, for keys a
condition reads, some condition requires it (``requires_context_keys``).
Provision works both ways along a dot path: collecting ``customer`` provides
``customer.tier`` (the model may fill in an object), and collecting
``customer.tier`` provides reading ``customer`` (the object exists once one of
its fields does).
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from pydantic import ValidationError

from .definitions import (
    SUPPORTED_VERSIONS,
    Confirmation,
    FlowDeclaration,
    FSMDefinition,
    State,
    Transition,
    TransitionCondition,
)
from .documents import ParsedDocument, Path, format_path
from .errors import LogicError
from .graph import Graph, can_reach, graph_from_document, reachable_from, terminal_states
from .logic import check_logic, compile_logic

logger = logging.getLogger(__name__)


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Rule:
    """One entry of the code table. ``blocks_loading``: the engine refuses such a file."""

    code: str
    name: str
    severity: Severity
    summary: str
    blocks_loading: bool = False


_E, _W = Severity.ERROR, Severity.WARNING

#: The registry of codes. Codes are stable: never renumber, only add.
RULES: dict[str, Rule] = {
    rule.name: rule
    for rule in (
        Rule("FSM000", "unreadable-input", _E, "The file cannot be read or parsed (missing, not UTF-8, not JSON/YAML, too large, too deep)."),
        Rule("FSM001", "schema-violation", _E, "The document does not match the definition schema.", True),
        Rule("FSM002", "unsupported-version", _E, "`version` is not a format version this engine supports.", True),
        Rule("FSM003", "unknown-field", _W, "A field the format does not define; the engine ignores it."),
        Rule("FSM004", "state-id-mismatch", _E, "A state's `id` differs from its key in `states`.", True),
        Rule("FSM005", "initial-state-missing", _E, "`initial_state` names no declared state.", True),
        Rule("FSM006", "unknown-target-state", _E, "A transition targets a state that is not declared.", True),
        Rule("FSM007", "unreachable-state", _E, "No path leads from the initial state to this state."),
        Rule("FSM008", "no-terminal-state", _W, "No state is terminal, so no conversation can ever end."),
        Rule("FSM009", "trap-state", _W, "No terminal state can be reached from this state."),
        Rule("FSM010", "duplicate-transition", _W, "Two transitions of a state have the same target and conditions."),
        Rule("FSM011", "ambiguous-priority", _W, "Guarded transitions of one state to different targets share a priority."),
        Rule("FSM012", "invalid-logic", _E, "A JsonLogic rule uses an unknown operator, the wrong arity or a bad shape.", True),
        Rule("FSM013", "condition-reads-key-without-default", _W, "A condition would hold under reference JsonLogic when a key is missing, but not in this engine."),
        Rule("FSM014", "condition-key-never-provided", _W, "A condition reads a key no state collects, no condition requires and the application does not provide."),
        Rule("FSM015", "required-key-never-collected", _W, "`requires_context_keys` names a key no state collects and the application does not provide."),
        Rule("FSM016", "duplicate-key", _W, "A key appears twice in one object; parsers silently keep the last."),
        Rule("FSM017", "condition-always-true", _W, "A condition has neither `logic` nor `requires_context_keys`, so it always holds."),
        Rule("FSM018", "confirmation-target-undeclared", _E, "A confirmation's `on_yes`/`on_no` names no declared transition of its state."),
        Rule("FSM019", "flow-definition-not-found", _W, "A sub-flow's `definition` names no file next to this one or on the search path (checked by the CLI, which may read files)."),
        Rule("FSM020", "flow-definition-invalid", _E, "A sub-flow's definition file exists but does not load (the engine would refuse to start it)."),
        Rule("FSM021", "called-flow-never-returns", _E, "A called sub-flow cannot reach a terminal state from its initial state, so the flow that called it never resumes."),
        Rule("FSM022", "flow-input-never-provided", _W, "A sub-flow's `inputs` hands over a key this flow never collects, requires or is given."),
        Rule("FSM023", "flow-input-unused", _W, "A sub-flow's `inputs` fills a key the sub-flow never collects, reads or passes on."),
        Rule("FSM024", "flow-output-never-provided", _W, "A sub-flow's `outputs` copies back a key the sub-flow never collects or is given, so it is always empty."),
        Rule("FSM025", "recursive-flow", _W, "Sub-flow calls form a cycle, so a definition can call itself without bound (stopped only by the run-time depth limit)."),
        Rule("FSM026", "call-outputs-lost-by-link", _W, "A called sub-flow can link onward; the call's `outputs` are then never copied back (the linked flow's own `outputs` apply)."),
        Rule("FSM099", "internal-error", _E, "A check failed unexpectedly (a bug in fsm-lint; please report it)."),
    )
}
RULES_BY_CODE: dict[str, Rule] = {rule.code: rule for rule in RULES.values()}


@dataclass(frozen=True)
class Diagnostic:
    """One finding: stable code and name, severity, where, what, and how to fix it."""

    code: str
    name: str
    severity: Severity
    message: str
    hint: str | None = None
    file: str | None = None
    path: str = "$"
    line: int | None = None

    @property
    def blocks_loading(self) -> bool:
        return RULES_BY_CODE[self.code].blocks_loading

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["severity"] = self.severity.value
        return data


def make_diagnostic(
    name: str,
    message: str,
    *,
    hint: str | None = None,
    file: str | None = None,
    path: str = "$",
    line: int | None = None,
) -> Diagnostic:
    """A diagnostic for rule ``name`` (used by the CLI for FSM000 as well)."""
    rule = RULES[name]
    return Diagnostic(rule.code, rule.name, rule.severity, message, hint, file, path, line)


@dataclass(frozen=True)
class LintResult:
    """The diagnostics, and the validated model when the document passed the schema."""

    diagnostics: tuple[Diagnostic, ...]
    definition: FSMDefinition | None

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity is Severity.ERROR)


# --- helpers ---------------------------------------------------------------------------


_KNOWN_FIELDS: dict[str, frozenset[str]] = {
    "definition": frozenset(FSMDefinition.model_fields),
    "state": frozenset(State.model_fields),
    "transition": frozenset(Transition.model_fields),
    "condition": frozenset(TransitionCondition.model_fields),
    "flow": frozenset(FlowDeclaration.model_fields),
    "confirmation": frozenset(Confirmation.model_fields),
}

#: fields the original LLM-FSM accepted and ignored; worth a specific hint
_LEGACY_FIELDS = {"function_handlers": "the original LLM-FSM ignored it too; hooks are registered in code here"}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _did_you_mean(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f"did you mean {close[0]!r}?" if close else ""


def _prefixes(key: str) -> Iterator[str]:
    """``a.b.c`` → ``a``, ``a.b`` (proper ancestors)."""
    parts = key.split(".")
    for end in range(1, len(parts)):
        yield ".".join(parts[:end])


class KeyCover:
    """Answers "is this dot path provided?" with the two-way prefix rule, in O(len(key))."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = {k for k in keys if k}
        self.ancestors = {p for k in self.keys for p in _prefixes(k)}

    def covers(self, key: str) -> bool:
        if key in self.keys or key in self.ancestors:
            return True
        return any(p in self.keys for p in _prefixes(key))

    def guarantees(self, key: str) -> bool:
        """Requiring ``key`` or a field below it guarantees ``key`` is present (an ancestor does not)."""
        return key in self.keys or key in self.ancestors


def validation_problems(exc: ValidationError) -> list[tuple[Path, str, LogicError | None]]:
    """Pydantic errors as (path, message, logic error) without pydantic's wording leaking types."""
    problems: list[tuple[Path, str, LogicError | None]] = []
    for error in exc.errors(include_url=False):
        loc = tuple(error.get("loc", ()))
        message = str(error.get("msg", "invalid"))
        if loc and loc[-1] == "[key]":
            loc = loc[:-1]
            message = "keys must be strings"
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, LogicError):
            problems.append((loc, cause.message, cause))
            continue
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if error.get("type", "").endswith("_type") or error.get("type") in ("model_type", "dict_type", "list_type"):
            message = f"{message} (got {_json_type(error.get('input'))})"
        problems.append((loc, message, None))
    return problems


def _logic_subpath(condition_path: Path, logic_path: str) -> str:
    """Join a condition's path with a LogicError/LogicIssue path such as ``$.and[0]``."""
    base = format_path((*condition_path, "logic"))
    if logic_path.startswith("$"):
        return base + logic_path[1:]
    return base + ("." + logic_path if logic_path else "")


# --- FSM013: keys read without a default where reference JsonLogic would say true --------


_NUMBER = (int, float)


def _var_without_default(value: Any) -> str | None:
    """``{"var": "age"}`` / ``{"var": ["age"]}`` → ``age``; None when it has a default or is not a var."""
    if not isinstance(value, Mapping) or len(value) != 1 or "var" not in value:
        return None
    arg = value["var"]
    if isinstance(arg, list):
        if len(arg) != 1:
            return None
        arg = arg[0]
    if isinstance(arg, bool) or not isinstance(arg, (str, int)) or arg == "":
        return None
    return str(arg)


def _as_js_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, _NUMBER):
        return float(value)
    if value is None:
        return 0.0
    if isinstance(value, str):
        try:
            return float(value) if value.strip() else 0.0
        except ValueError:
            return None
    return None


def _compare_chain(op: str, numbers: list[float]) -> bool:
    compare: dict[str, Callable[[float, float], bool]] = {
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }
    return all(compare[op](a, b) for a, b in zip(numbers, numbers[1:]))


def risky_missing_reads(rule: Any) -> Iterator[tuple[str, str]]:
    """(key, why) for each var without default whose missing value makes its operator true
    under reference JsonLogic (missing → null): ``!``, ``!=``/``!==`` against a non-null,
    ``==``/``===`` against null, and numeric comparisons true with null read as 0
    (``<``/``<=`` against non-literal operands are flagged too). Iterative walk."""
    stack = [rule]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, Mapping) or len(node) != 1:
            continue
        (op, args), = node.items()
        args = args if isinstance(args, list) else [args]
        stack.extend(args)
        if op in ("!", "!=", "!==", "==", "===", "<", "<=", ">", ">="):
            for position, arg in enumerate(args):
                key = _var_without_default(arg)
                if key is None:
                    continue
                others = args[:position] + args[position + 1 :]
                why = _risk(op, position, args, others)
                if why:
                    yield key, why


def _risk(op: str, position: int, args: list[Any], others: list[Any]) -> str | None:
    if op == "!":
        return "`!` of a missing (null) value is true"
    if op in ("!=", "!=="):
        if others and all(o is not None for o in others):
            return f"`{op}` of a missing (null) value and a non-null value is true"
        return None
    if op in ("==", "==="):
        if any(o is None for o in others):
            return f"`{op}` of a missing value and null is true"
        return None
    # numeric comparison: reference JsonLogic reads null as 0
    literal = [a for a in others if not isinstance(a, (Mapping, list))]
    if len(literal) == len(others):
        numbers = []
        for index, arg in enumerate(args):
            number = 0.0 if index == position else _as_js_number(arg)
            if number is None:
                return None
            numbers.append(number)
        if _compare_chain(op, numbers):
            return f"`{op}` with a missing value read as 0 is true"
        return None
    if op in ("<", "<="):
        return f"`{op}` with a missing value read as 0 may be true"
    return None


# --- the linter -----------------------------------------------------------------------


class _Linter:
    def __init__(self, doc: ParsedDocument) -> None:
        self.doc = doc
        self.data: Any = doc.data
        self.out: list[Diagnostic] = []
        self.definition: FSMDefinition | None = None
        self.graph: Graph | None = None
        self.model_logic_errors: list[tuple[Path, LogicError]] = []
        self.logic_reported: set[Path] = set()

    def add(
        self,
        name: str,
        parts: Path,
        message: str,
        hint: str | None = None,
        *,
        path: str | None = None,
        line: int | None = None,
    ) -> None:
        """Record a finding at ``parts`` (``path`` overrides the spelling, e.g. inside a rule)."""
        self.out.append(
            make_diagnostic(
                name,
                message,
                hint=hint,
                file=self.doc.file,
                path=path or format_path(parts),
                line=line or self.doc.line_for(parts),
            )
        )

    # document shape, tolerant accessors

    def states(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        states = self.data.get("states")
        if isinstance(states, Mapping):
            for key, state in states.items():
                if isinstance(state, Mapping):
                    yield str(key), state

    def transitions(self) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
        for key, state in self.states():
            transitions = state.get("transitions")
            if isinstance(transitions, list):
                for index, transition in enumerate(transitions):
                    if isinstance(transition, Mapping):
                        yield key, index, transition

    def flows(self) -> Iterator[tuple[Path, Mapping[str, Any]]]:
        """Sub-flow declarations: definition-wide, then per state."""
        owners: list[tuple[Path, Any]] = [((), self.data)]
        owners.extend((("states", key), state) for key, state in self.states())
        for parts, owner in owners:
            flows = owner.get("flows")
            if isinstance(flows, list):
                for index, flow in enumerate(flows):
                    if isinstance(flow, Mapping):
                        yield (*parts, "flows", index), flow

    def conditions(self) -> Iterator[tuple[Path, Mapping[str, Any]]]:
        """Every condition: of transitions, and of sub-flow declarations."""
        holders: list[tuple[Path, Mapping[str, Any]]] = [
            (("states", key, "transitions", index), transition) for key, index, transition in self.transitions()
        ]
        holders.extend(self.flows())
        for parts, holder in holders:
            conditions = holder.get("conditions")
            if isinstance(conditions, list):
                for cindex, condition in enumerate(conditions):
                    if isinstance(condition, Mapping):
                        yield (*parts, "conditions", cindex), condition

    # checks

    def run(self) -> None:
        if not isinstance(self.data, Mapping):
            self.add(
                "schema-violation",
                (),
                f"the top level must be an object (got {_json_type(self.data)})",
                "a definition is one object with name, description, initial_state and states",
            )
            return
        for check in (
            self.check_duplicate_keys,
            self.check_schema,
            self.check_version,
            self.check_unknown_fields,
            self.check_state_ids,
            self.check_targets,
            self.check_graph,
            self.check_transitions,
            self.check_logic,
            self.check_context_keys,
            self.check_confirmations,
        ):
            try:
                check()
            except Exception as exc:  # a bug in one check must not hide the others' findings
                logger.exception("lint check %s failed", check.__name__)
                self.add("internal-error", (), f"{check.__name__} failed: {type(exc).__name__}: {exc}")
        for parts, error in self.model_logic_errors:
            if parts not in self.logic_reported:
                self.add("invalid-logic", (*parts, "logic"), error.message, path=_logic_subpath(parts, error.path))

    def check_duplicate_keys(self) -> None:
        for parts, line, first_line in self.doc.duplicate_keys:
            self.add(
                "duplicate-key",
                parts,
                f"key {parts[-1]!r} appears more than once in this object (first on line {first_line}); "
                "only the last one counts",
                "remove or rename one of them",
                line=line,
            )

    def check_schema(self) -> None:
        try:
            self.definition = FSMDefinition.model_validate(self.data)
            return
        except ValidationError as exc:
            problems = validation_problems(exc)
        except RecursionError:
            self.add("schema-violation", (), "the document is nested too deeply to validate")
            return
        for parts, message, logic_error in problems:
            if logic_error is None:
                self.add("schema-violation", parts, message, _schema_hint(parts, message))
            else:  # reported by check_logic with every issue of the rule; kept in case it cannot
                self.model_logic_errors.append((parts, logic_error))

    def check_version(self) -> None:
        version = self.data.get("version", "3.0")
        # a number (YAML `version: 3.0`) is a schema violation already, with a hint to quote it
        if isinstance(version, str) and version not in SUPPORTED_VERSIONS:
            self.add(
                "unsupported-version",
                ("version",),
                f"version {version!r} is not supported (supported: {', '.join(SUPPORTED_VERSIONS)})",
                'use "3.0"',
            )

    def check_unknown_fields(self) -> None:
        def report(parts: Path, obj: Mapping[str, Any], kind: str) -> None:
            known = _KNOWN_FIELDS[kind]
            for field_name in obj:
                if field_name in known:
                    continue
                name = str(field_name)
                hint = _LEGACY_FIELDS.get(name) or _did_you_mean(name, known) or "remove it, or check its spelling"
                self.add("unknown-field", (*parts, name), f"unknown {kind} field {name!r}; it is ignored", hint)

        report((), self.data, "definition")
        for key, state in self.states():
            report(("states", key), state, "state")
        for key, index, transition in self.transitions():
            report(("states", key, "transitions", index), transition, "transition")
        for parts, condition in self.conditions():
            report(parts, condition, "condition")
        for parts, flow in self.flows():
            report(parts, flow, "flow")
        for key, state in self.states():
            if isinstance(state.get("confirmation"), Mapping):
                report(("states", key, "confirmation"), state["confirmation"], "confirmation")

    def check_confirmations(self) -> None:
        for key, state in self.states():
            confirmation = state.get("confirmation")
            if not isinstance(confirmation, Mapping):
                continue
            transitions = state.get("transitions")
            targets = [
                t.get("target_state") for t in transitions if isinstance(t, Mapping)
            ] if isinstance(transitions, list) else []
            for field_name in ("on_yes", "on_no"):
                target = confirmation.get(field_name)
                if not isinstance(target, str) or (field_name == "on_no" and target == "cancel"):
                    continue
                if target not in targets:
                    self.add(
                        "confirmation-target-undeclared",
                        ("states", key, "confirmation", field_name),
                        f"{field_name} {target!r} is not the target of a transition declared in state {key!r}",
                        f"declare a transition from {key!r} to {target!r}"
                        + (', or use "cancel" or null' if field_name == "on_no" else ""),
                    )

    def check_state_ids(self) -> None:
        for key, state in self.states():
            state_id = state.get("id")
            if isinstance(state_id, str) and state_id != key:
                self.add(
                    "state-id-mismatch",
                    ("states", key, "id"),
                    f"state key {key!r} and its id {state_id!r} differ",
                    f"set id to {key!r} (transitions and initial_state refer to the key)",
                )

    def check_targets(self) -> None:
        states = self.data.get("states")
        declared = [str(k) for k in states] if isinstance(states, Mapping) else []
        declared_set = set(declared)
        initial = self.data.get("initial_state")
        if isinstance(initial, str) and isinstance(states, Mapping) and initial not in declared_set:
            self.add(
                "initial-state-missing",
                ("initial_state",),
                f"initial_state {initial!r} is not a declared state",
                _did_you_mean(initial, declared) or "declare it under states, or name an existing state",
            )
        if not isinstance(states, Mapping):
            return
        for key, index, transition in self.transitions():
            target = transition.get("target_state")
            if isinstance(target, str) and target not in declared_set:
                self.add(
                    "unknown-target-state",
                    ("states", key, "transitions", index, "target_state"),
                    f"transition from {key!r} targets {target!r}, which is not a declared state",
                    _did_you_mean(target, declared) or "declare the state or fix the target",
                )

    def check_graph(self) -> None:
        if not isinstance(self.data.get("states"), Mapping):
            return
        graph = self.graph = graph_from_document(self.data)
        declared = [n.id for n in graph.nodes.values() if n.declared]
        if not declared:
            return
        reachable: set[str] | None = None
        initial = graph.initial
        if initial is not None and initial in graph.nodes and graph.nodes[initial].declared:
            reachable = set(reachable_from(graph, initial))
            for node_id in declared:
                if node_id not in reachable:
                    self.add(
                        "unreachable-state",
                        ("states", node_id),
                        f"state {node_id!r} cannot be reached from the initial state {initial!r}",
                        "add a transition into it, or remove it",
                    )
        terminals = list(terminal_states(graph))
        if not terminals:
            self.add(
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
            self.add(
                "trap-state",
                ("states", node_id),
                f"no terminal state can be reached from state {node_id!r}; a conversation that enters it never ends",
                "add a transition that leads towards a terminal state (a self-loop does not end a conversation)",
            )

    def check_transitions(self) -> None:
        for key, state in self.states():
            transitions = state.get("transitions")
            if not isinstance(transitions, list):
                continue
            seen: dict[tuple[str, str], int] = {}
            by_priority: dict[int, list[tuple[int, str]]] = {}
            for index, transition in enumerate(transitions):
                if not isinstance(transition, Mapping) or not isinstance(transition.get("target_state"), str):
                    continue
                target = transition["target_state"]
                conditions = transition.get("conditions") or None
                try:
                    signature = json.dumps(conditions, sort_keys=True, default=str)
                except (TypeError, ValueError, RecursionError):
                    signature = repr(conditions)
                first = seen.setdefault((target, signature), index)
                if first != index:
                    self.add(
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
                        self.add(
                            "ambiguous-priority",
                            ("states", key, "transitions", index, "priority"),
                            f"guarded transitions[{first_index}] (to {first_target!r}) and transitions[{index}] "
                            f"(to {target!r}) share priority {priority}; when both hold, declaration order decides",
                            "give them distinct priorities so the order is explicit",
                        )

    def check_logic(self) -> None:
        self.reads: list[tuple[Path, str]] = []
        for parts, condition in self.conditions():
            requires = _strings(condition.get("requires_context_keys"))
            rule = condition.get("logic")
            if rule is None:
                if not requires:
                    self.add(
                        "condition-always-true",
                        parts,
                        "this condition has neither logic nor requires_context_keys, so it always holds "
                        "and makes the transition fire on its own",
                        "add requires_context_keys or logic, or drop the condition to leave the choice to the model",
                    )
                continue
            issues = check_logic(rule)
            if issues:
                self.logic_reported.add(parts)
            for issue in issues:
                self.add(
                    "invalid-logic",
                    (*parts, "logic"),
                    issue.message,
                    getattr(issue, "hint", "") or "see docs/jsonlogic.md for the supported operators",
                    path=_logic_subpath(parts, issue.path),
                )
            if issues:
                continue
            reads = self._model_reads(parts)
            if reads is None:
                try:
                    reads = compile_logic(rule).reads
                except LogicError as exc:  # check_logic and compile_logic disagree: still report it
                    self.logic_reported.add(parts)
                    self.add("invalid-logic", (*parts, "logic"), exc.message, path=_logic_subpath(parts, exc.path))
                    continue
            for key in sorted(reads):
                if key:
                    self.reads.append((parts, key))
            required = KeyCover(requires)
            reported: set[str] = set()
            for key, why in risky_missing_reads(rule):
                if key in reported or required.guarantees(key):
                    continue
                reported.add(key)
                self.add(
                    "condition-reads-key-without-default",
                    (*parts, "logic"),
                    f"reads {key!r} without a default: {why} under reference JsonLogic, but in this engine a "
                    f"condition reading a missing key does not hold",
                    f'add requires_context_keys: ["{key}"] to the condition, or give the var a default '
                    f'({{"var": ["{key}", <default>]}})',
                )

    def _model_reads(self, parts: Path) -> frozenset[str] | None:
        """The keys a condition reads, from the rule the model compiled at validation (compiling
        is most of lint's cost, so it is done once); None when there is no validated model."""
        node: Any = self.definition
        if node is None:
            return None
        try:
            for part in parts:
                node = node[part] if isinstance(node, (dict, list)) else getattr(node, str(part))
        except (KeyError, IndexError, AttributeError, TypeError):
            return None
        compiled = getattr(node, "compiled", None)
        reads = getattr(compiled, "reads", None)
        return reads if isinstance(reads, frozenset) else None

    def check_context_keys(self) -> None:
        collected = [k for _, state in self.states() for k in _strings(state.get("required_context_keys"))]
        provided = _strings(self.data.get("application_context_keys")) + _strings(
            self.data.get("protected_context_keys")
        )
        requires: list[tuple[Path, int, str]] = []
        for parts, condition in self.conditions():
            values = condition.get("requires_context_keys")
            if isinstance(values, list):
                requires.extend((parts, i, v) for i, v in enumerate(values) if isinstance(v, str))
        supply = KeyCover([*collected, *provided])
        for parts, index, key in requires:
            if not supply.covers(key):
                self.add(
                    "required-key-never-collected",
                    (*parts, "requires_context_keys", index),
                    f"requires {key!r}, but no state collects it and the application does not provide it",
                    f"add {key!r} to a state's required_context_keys, or to application_context_keys",
                )
        readable = KeyCover([*collected, *provided, *(k for _, _, k in requires)])
        for parts, key in getattr(self, "reads", ()):
            if not readable.covers(key):
                self.add(
                    "condition-key-never-provided",
                    (*parts, "logic"),
                    f"reads {key!r}, which no state collects, no condition requires and the application does not provide",
                    f"add {key!r} to a state's required_context_keys, or to application_context_keys",
                )


def _schema_hint(parts: Path, message: str) -> str | None:
    if parts == ("version",):
        return 'quote it: version: "3.0"'
    if message.startswith("Field required"):
        return f"add {parts[-1]!r}" if parts else None
    return None


def _sort_key(d: Diagnostic) -> tuple[Any, ...]:
    return (d.line is None, d.line or 0, d.code, d.path)


def lint_document(doc: ParsedDocument) -> LintResult:
    """Every diagnostic for one parsed document, sorted by line. Never raises."""
    linter = _Linter(doc)
    linter.run()
    return LintResult(diagnostics=tuple(sorted(linter.out, key=_sort_key)), definition=linter.definition)


def lint_data(data: Any, *, file: str | None = None) -> LintResult:
    """Lint a document that exists only as data (no line numbers)."""
    return lint_document(ParsedDocument(data=data, file=file))


def lint_definition(definition: FSMDefinition, *, file: str | None = None) -> list[Diagnostic]:
    """Lint an already-loaded definition (its unknown fields included)."""
    return list(lint_data(definition.model_dump(mode="json", by_alias=True, exclude_unset=True), file=file).diagnostics)


__all__ = [
    "Diagnostic",
    "KeyCover",
    "LintResult",
    "RULES",
    "RULES_BY_CODE",
    "Rule",
    "Severity",
    "lint_data",
    "lint_definition",
    "lint_document",
    "make_diagnostic",
    "risky_missing_reads",
    "validation_problems",
]
