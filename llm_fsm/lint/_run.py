"""One lint run over one parsed document: the findings so far, what earlier checks learned (the validated
model, the graph), and tolerant walks over states, transitions, flows and conditions that every check shares.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from llm_fsm.definition._documents import ParsedDocument, Path, format_path
from llm_fsm.definition._graph import (
    Graph,
)
from llm_fsm.definition._model import (
    FSMDefinition,
)
from llm_fsm.errors import LogicError
from llm_fsm.lint._rules import Diagnostic, make_diagnostic


class LintRun:
    """State shared by the checks of one document; checks are plain functions of it (see ``_linter.CHECKS``)."""

    def __init__(self, doc: ParsedDocument) -> None:
        self.doc = doc
        self.data: Any = doc.data
        self.out: list[Diagnostic] = []
        self.definition: FSMDefinition | None = None
        self.graph: Graph | None = None
        self.model_logic_errors: list[tuple[Path, LogicError]] = []
        self.logic_reported: set[Path] = set()
        self.reads: list[tuple[Path, str]] = []  # (condition, key) pairs, filled by the logic check

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
