"""The single-document linter: every check of one definition file, in order, with positions."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import ValidationError

from llm_fsm.definition._documents import ParsedDocument, Path, format_path
from llm_fsm.definition._graph import (
    Graph,
    can_reach,
    graph_from_document,
    reachable_from,
    terminal_states,
)
from llm_fsm.definition._model import (
    SUPPORTED_VERSIONS,
    FSMDefinition,
)
from llm_fsm.errors import LogicError
from llm_fsm.lint._missing_reads import risky_missing_reads
from llm_fsm.lint._rules import Diagnostic, LintResult, logger, make_diagnostic
from llm_fsm.lint._support import (
    _KNOWN_FIELDS,
    _LEGACY_FIELDS,
    KeyCover,
    _did_you_mean,
    _json_type,
    _logic_subpath,
    _strings,
    validation_problems,
)
from llm_fsm.logic._checks import check_logic
from llm_fsm.logic._rules import compile_logic

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
            targets = (
                [t.get("target_state") for t in transitions if isinstance(t, Mapping)]
                if isinstance(transitions, list)
                else []
            )
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
                container: Any = node  # a str index on a list raises TypeError: no such path
                node = container[part] if isinstance(node, (dict, list)) else getattr(node, str(part))
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
                    f"reads {key!r}, which no state collects, no condition requires"
                    " and the application does not provide",
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
