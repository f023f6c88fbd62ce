"""One lint run over one parsed document: the findings so far, what earlier checks learned (the validated
model, the graph), and tolerant walks over states, transitions, flows and conditions that every check shares.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from llm_fsm.definition._documents import ParsedDocument, Path, format_path
from llm_fsm.definition._graph import (
    Graph,
)
from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.definition._model import (
    FSMDefinition,
)
from llm_fsm.errors import LogicError
from llm_fsm.lint._rules import Diagnostic, make_diagnostic

#: findings of one code kept per file; the rest are counted, and one more finding says how many
MAX_FINDINGS_PER_RULE = 200

Hint = str | Callable[[], str | None] | None
"""A hint, or a function that makes one (called only for a finding that is kept: did-you-mean is costly)."""


class LintRun:
    """State shared by the checks of one document; checks are plain functions of it (see ``_linter.CHECKS``)."""

    def __init__(
        self,
        doc: ParsedDocument,
        *,
        registry: Mapping[str, Callable[..., Any]] | None = None,
        retrievers: Collection[str] | None = None,
        mcp_tools: Mapping[str, Mapping[str, Mapping[str, Any]] | str] | None = None,
    ) -> None:
        self.doc = doc
        #: each MCP server's tools' input schemas by name, or why it could not be asked (``fsm-lint --mcp``); None:
        #: MCP tool calls are not checked
        self.mcp_tools = mcp_tools
        #: the application's functions by action name (``fsm-lint --actions``); None: registration is not checked
        self.registry = registry
        #: the names the application registered retrievers under; None: registration is not checked
        self.retrievers = frozenset(retrievers) if retrievers is not None else None
        self._data: Any = doc.data
        self.out: list[Diagnostic] = []
        #: findings made per rule name, kept or not
        self.counts: dict[str, int] = {}
        #: validation stopped before the end: checks that need the whole document are skipped
        self.partial = False
        self.definition: FSMDefinition | None = None
        self.graph: Graph | None = None
        self.model_logic_errors: list[tuple[Path, LogicError]] = []
        self.logic_reported: set[Path] = set()
        self.reads: list[tuple[Path, str]] = []  # (condition, key) pairs, filled by the logic check
        self._states: list[tuple[str, Mapping[str, Any]]] | None = None
        self._transitions: list[tuple[str, int, Mapping[str, Any]]] | None = None
        self._flows: list[tuple[Path, Mapping[str, Any]]] | None = None
        self._actions: list[tuple[Path, str, Mapping[str, Any]]] | None = None
        self._conditions: list[tuple[Path, Mapping[str, Any]]] | None = None
        self._declarations: dict[str, KeyDeclaration] | None = None

    def add(
        self,
        name: str,
        parts: Path,
        message: str,
        hint: Hint = None,
        *,
        path: str | None = None,
        line: int | None = None,
        capped: bool = True,
    ) -> None:
        """Record a finding at ``parts`` (``path`` overrides the spelling, e.g. inside a rule).

        Past ``MAX_FINDINGS_PER_RULE`` findings of one rule (unless ``capped`` is false) a finding is only
        counted: its path, line and hint are never worked out.
        """
        if capped:
            count = self.counts[name] = self.counts.get(name, 0) + 1
            if count > MAX_FINDINGS_PER_RULE:
                return
        self.out.append(
            make_diagnostic(
                name,
                message,
                hint=hint() if callable(hint) else hint,
                file=self.doc.file,
                path=path or format_path(parts),
                line=line or self.doc.line_for(parts),
            )
        )

    def full(self, name: str) -> bool:
        """Whether further findings of ``name`` would only be counted (so a check may count them cheaply)."""
        return self.counts.get(name, 0) >= MAX_FINDINGS_PER_RULE

    def count_more(self, name: str, number: int) -> None:
        """Count findings of ``name`` that were not made one by one."""
        self.counts[name] = self.counts.get(name, 0) + number

    def not_shown(self) -> list[Diagnostic]:
        """One finding per rule that made more than it kept, saying how many more there are (listed last)."""
        return [
            make_diagnostic(
                name,
                f"{count - MAX_FINDINGS_PER_RULE:,} more {name} findings in this file are not shown "
                f"(at most {MAX_FINDINGS_PER_RULE} of one code are listed per file)",
                hint="fix the ones shown and lint again",
                file=self.doc.file,
            )
            for name, count in self.counts.items()
            if count > MAX_FINDINGS_PER_RULE
        ]

    @property
    def data(self) -> Any:
        return self._data

    @data.setter
    def data(self, data: Any) -> None:
        self._data = data
        self._states = self._transitions = self._flows = self._conditions = None
        self._actions = None
        self._declarations = None

    # The walks are shared by most checks, so each is done once per run (unless the data is replaced).

    def states(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        if self._states is None:
            states = self.data.get("states")
            self._states = (
                [(str(key), state) for key, state in states.items() if _is_mapping(state)]
                if isinstance(states, Mapping)
                else []
            )
        return iter(self._states)

    def transitions(self) -> Iterator[tuple[str, int, Mapping[str, Any]]]:
        if self._transitions is None:
            self._transitions = [
                (key, index, transition)
                for key, state in self.states()
                if isinstance(transitions := state.get("transitions"), list)
                for index, transition in enumerate(transitions)
                if _is_mapping(transition)
            ]
        return iter(self._transitions)

    def global_transitions(self) -> Iterator[tuple[Path, Mapping[str, Any]]]:
        """(path, declaration) of every definition-level global transition."""
        declared = self.data.get("global_transitions")
        return iter(
            [(("global_transitions", index), t) for index, t in enumerate(declared) if _is_mapping(t)]
            if isinstance(declared, list)
            else []
        )

    def flows(self) -> Iterator[tuple[Path, Mapping[str, Any]]]:
        """Sub-flow declarations: definition-wide, then per state."""
        if self._flows is None:
            owners: list[tuple[Path, Any]] = [((), self.data)]
            owners.extend((("states", key), state) for key, state in self.states())
            self._flows = [
                ((*parts, "flows", index), flow)
                for parts, owner in owners
                if isinstance(flows := owner.get("flows"), list)
                for index, flow in enumerate(flows)
                if _is_mapping(flow)
            ]
        return iter(self._flows)

    def actions(self) -> Iterator[tuple[Path, str, Mapping[str, Any]]]:
        """(path, state key, declaration) for every action a state declares."""
        if self._actions is None:
            self._actions = [
                (("states", key, "actions", index), key, action)
                for key, state in self.states()
                if isinstance(actions := state.get("actions"), list)
                for index, action in enumerate(actions)
                if _is_mapping(action)
            ]
        return iter(self._actions)

    def action_mapping(self, field_name: str) -> Iterator[tuple[Path, str, str]]:
        """(path of the entry, context path, the other side) for each action's ``inputs`` or ``outputs``.

        Both directions are normalised to the context path: ``inputs`` maps argument ← path, ``outputs`` path ←
        result field, so for ``inputs`` the context path is the value and for ``outputs`` it is the key."""
        for parts, _, action in self.actions():
            mapping = action.get(field_name)
            if not isinstance(mapping, Mapping):
                continue
            for name, value in mapping.items():
                if isinstance(name, str) and isinstance(value, str):
                    context_path, other = (value, name) if field_name == "inputs" else (name, value)
                    yield (*parts, field_name, name), context_path, other

    def conditions(self) -> Iterator[tuple[Path, Mapping[str, Any]]]:
        """Every condition: of transitions, and of sub-flow declarations."""
        if self._conditions is None:
            holders: list[tuple[Path, Mapping[str, Any]]] = [
                (("states", key, "transitions", index), transition) for key, index, transition in self.transitions()
            ]
            holders.extend(self.global_transitions())
            holders.extend(self.flows())
            self._conditions = [
                ((*parts, "conditions", cindex), condition)
                for parts, holder in holders
                if isinstance(conditions := holder.get("conditions"), list)
                for cindex, condition in enumerate(conditions)
                if _is_mapping(condition)
            ]
        return iter(self._conditions)

    def declarations(self) -> dict[str, KeyDeclaration]:
        """The declared context keys that validate (a broken declaration is FSM001's finding, and judging
        conditions against it would only add noise); the validated model's when there is one."""
        if self._declarations is None:
            if self.definition is not None:
                self._declarations = dict(self.definition.context_keys or {})
            else:
                self._declarations = {}
                raw = self.data.get("context_keys")
                for key, value in raw.items() if isinstance(raw, Mapping) else ():
                    if isinstance(key, str) and _is_mapping(value):
                        try:
                            self._declarations[key] = KeyDeclaration.model_validate(value)
                        except ValueError:  # pydantic's ValidationError is a ValueError
                            continue
        return self._declarations

    def declared_names(self) -> list[str]:
        """Every key ``context_keys`` names, its declaration valid or not: a broken declaration is FSM001's
        finding, and its key is no less declared for the checks that ask only whether it is."""
        raw = self.data.get("context_keys")
        return [key for key in raw if isinstance(key, str)] if isinstance(raw, Mapping) else []

    def application_declared(self) -> list[str]:
        """Keys declared ``writable_by: application`` (read as written, so a declaration broken elsewhere counts)."""
        raw = self.data.get("context_keys")
        if not isinstance(raw, Mapping):
            return []
        return [
            key
            for key, value in raw.items()
            if isinstance(key, str) and _is_mapping(value) and value.get("writable_by") == "application"
        ]


def _is_mapping(value: Any) -> bool:
    kind = type(value)  # parsed data holds dicts and lists: skip the ABC check for those
    return kind is dict or (kind is not list and isinstance(value, Mapping))
