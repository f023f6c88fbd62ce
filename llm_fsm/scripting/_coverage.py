"""Transition coverage: which declared transitions and states the scripts exercised.

A transition counts as exercised when a turn's verdict took it: the verdict
names the transition by its index in the state's ``transitions`` list, so two
transitions to the same target (say, one guarded and one judgment) are counted
apart. A state counts as visited when a conversation started in it or a turn
ended in it. Whatever was never exercised is reported with its JSON path and
line, so the gap can be found in the file.

A global transition is one site (``$.global_transitions[0]``, state ``(global)``): it is covered when taken
from any of the states it applies in, since it is declared, and reviewed, once.

Note: a declared self-loop that is not guarded can never be taken (the model
proposing the current state means "stay"), so it stays uncovered by design.

Pure: the caller reads files and hands over a ``ParsedDocument`` for the lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from llm_fsm.definition._documents import ParsedDocument, format_path
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._records import TurnRecord

#: the state named by the site of a global transition (it has no single source state)
GLOBAL = "(global)"


@dataclass
class TransitionSite:
    state: str
    index: int
    target: str
    path: str
    line: int | None
    hits: int = 0


@dataclass
class StateSite:
    state: str
    path: str
    line: int | None
    visits: int = 0


@dataclass
class ActionSite:
    """One action a state declares; called when a turn ran it (a skipped one does not count)."""

    state: str
    index: int
    call: str
    path: str
    line: int | None
    calls: int = 0


def _percent(hit: int, total: int) -> float:
    return 100.0 if total == 0 else 100.0 * hit / total


@dataclass
class DefinitionCoverage:
    """Coverage of one definition, summed over every conversation run against it."""

    file: str
    name: str
    initial_state: str
    transitions: list[TransitionSite] = field(default_factory=list)
    states: list[StateSite] = field(default_factory=list)
    actions: list[ActionSite] = field(default_factory=list)
    conversations: int = 0
    #: (state, index in its transitions_from) → position in global_transitions, for the global ones
    global_positions: dict[tuple[str, int], int] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, definition: FSMDefinition, *, file: str, document: ParsedDocument | None = None) -> DefinitionCoverage:
        def line(parts: tuple[str | int, ...]) -> int | None:
            return document.line_for(parts) if document is not None else None

        coverage = cls(file=file, name=definition.name, initial_state=definition.initial_state)
        for state_id, state in definition.states.items():
            coverage.states.append(StateSite(state_id, format_path(("states", state_id)), line(("states", state_id))))
            for index, transition in enumerate(state.transitions):
                parts = ("states", state_id, "transitions", index)
                coverage.transitions.append(
                    TransitionSite(state_id, index, transition.target_state, format_path(parts), line(parts))
                )
            for index in range(len(state.transitions), len(definition.transitions_from(state_id))):
                position = definition.global_index(state_id, index)
                if position is not None:
                    coverage.global_positions[(state_id, index)] = position
            for index, action in enumerate(state.actions or ()):
                parts = ("states", state_id, "actions", index)
                coverage.actions.append(ActionSite(state_id, index, action.call, format_path(parts), line(parts)))
            for index, entry in enumerate(state.after or ()):  # a timer's action: covered when a wait fires it
                timed = entry.action_declaration
                if timed is not None:
                    where = ("states", state_id, "after", index, "action")
                    coverage.actions.append(ActionSite(state_id, index, timed.call, format_path(where), line(where)))
        for index, transition in enumerate(definition.global_transitions or ()):
            declared_at: tuple[str | int, ...] = ("global_transitions", index)
            coverage.transitions.append(
                TransitionSite(GLOBAL, index, transition.target_state, format_path(declared_at), line(declared_at))
            )
        return coverage

    def call(self, records: Iterable[TurnRecord]) -> None:
        """Count the actions the turns ran (by state and name: a state calling one name twice counts both)."""
        for record in records:
            for action in record.actions:
                if action.outcome == "skipped":
                    continue
                for site in self.actions:
                    if site.state == action.state and site.call == action.call:
                        site.calls += 1

    def visit(self, state: str) -> None:
        for site in self.states:
            if site.state == state:
                site.visits += 1

    def take(self, state: str, index: int) -> None:
        """Count the transition at ``index`` of ``transitions_from(state)`` as taken (a global one: its one site)."""
        position = self.global_positions.get((state, index))
        if position is not None:
            state, index = GLOBAL, position
        for site in self.transitions:
            if site.state == state and site.index == index:
                site.hits += 1

    def add(self, records: Iterable[TurnRecord], *, initial_state: str | None = None) -> None:
        """Count one conversation that stayed in this definition (no sub-flows): its start and every verdict."""
        self.conversations += 1
        self.visit(initial_state or self.initial_state)
        for record in records:
            index = record.verdict.transition_index
            if index is not None and record.verdict.moved:
                self.take(record.state_before, index)
                source = record.verdict.target_state
                for step in record.chained:  # transitions followed in the same turn count as taken
                    self.visit(source)
                    if step.transition_index is not None:
                        self.take(source, step.transition_index)
                    source = step.target_state
            if record.state_after != record.state_before:
                self.visit(record.state_after)
        self.call(records)

    @property
    def transitions_hit(self) -> int:
        return sum(1 for t in self.transitions if t.hits)

    @property
    def states_visited(self) -> int:
        return sum(1 for s in self.states if s.visits)

    @property
    def transition_percent(self) -> float:
        return _percent(self.transitions_hit, len(self.transitions))

    @property
    def state_percent(self) -> float:
        return _percent(self.states_visited, len(self.states))

    @property
    def actions_called(self) -> int:
        return sum(1 for a in self.actions if a.calls)

    @property
    def missed_actions(self) -> list[ActionSite]:
        return [a for a in self.actions if not a.calls]

    @property
    def missed_transitions(self) -> list[TransitionSite]:
        return [t for t in self.transitions if not t.hits]

    @property
    def missed_states(self) -> list[StateSite]:
        return [s for s in self.states if not s.visits]


@dataclass
class CoverageReport:
    """Coverage per definition file, in the order the definitions were first seen."""

    definitions: dict[str, DefinitionCoverage] = field(default_factory=dict)

    def track(
        self, key: str, definition: FSMDefinition, *, file: str, document: ParsedDocument | None = None
    ) -> DefinitionCoverage:
        if key not in self.definitions:
            self.definitions[key] = DefinitionCoverage.of(definition, file=file, document=document)
        return self.definitions[key]

    def add(self, key: str, records: Iterable[TurnRecord], *, initial_state: str | None = None) -> None:
        self.definitions[key].add(records, initial_state=initial_state)

    def below(self, threshold: float) -> list[DefinitionCoverage]:
        """Definitions whose transition coverage is under ``threshold`` percent."""
        return [c for c in self.definitions.values() if c.transition_percent + 1e-9 < threshold]

    @property
    def total_transition_percent(self) -> float:
        return _percent(
            sum(c.transitions_hit for c in self.definitions.values()),
            sum(len(c.transitions) for c in self.definitions.values()),
        )

    def table(self) -> str:
        """The coverage table, then every transition and state never exercised, with its location."""
        if not self.definitions:
            return "coverage: no definitions"

        every = list(self.definitions.values())
        with_actions = any(c.actions for c in every)

        def cells(name: str, conversations: int, *counts: tuple[int, int]) -> tuple[str, ...]:
            shown = counts if with_actions else counts[:2]
            return (name, str(conversations), *(f"{hit}/{total} {_percent(hit, total):4.0f}%" for hit, total in shown))

        header = ("definition", "conversations", "transitions", "states", "actions")
        rows: list[tuple[str, ...]] = [header if with_actions else header[:4]]
        for c in every:
            rows.append(
                cells(
                    c.file,
                    c.conversations,
                    (c.transitions_hit, len(c.transitions)),
                    (c.states_visited, len(c.states)),
                    (c.actions_called, len(c.actions)),
                )
            )
        rows.append(
            cells(
                "total",
                sum(c.conversations for c in every),
                (sum(c.transitions_hit for c in every), sum(len(c.transitions) for c in every)),
                (sum(c.states_visited for c in every), sum(len(c.states) for c in every)),
                (sum(c.actions_called for c in every), sum(len(c.actions) for c in every)),
            )
        )
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = []
        for number, row in enumerate(rows):
            line = "  ".join(cell.rjust(widths[i]) if i else cell.ljust(widths[i]) for i, cell in enumerate(row))
            lines.append(line.rstrip())
            if number == 0 or number == len(rows) - 2:
                lines.append("  ".join("-" * w for w in widths))
        missed: list[str] = []
        for c in self.definitions.values():
            for t in c.missed_transitions:
                where = f"{c.file}:{t.line}" if t.line else c.file
                missed.append(f"  {where}  {t.path}  {t.state} → {t.target}  (transition never taken)")
            for s in c.missed_states:
                where = f"{c.file}:{s.line}" if s.line else c.file
                missed.append(f"  {where}  {s.path}  (state never visited)")
            for a in c.missed_actions:
                where = f"{c.file}:{a.line}" if a.line else c.file
                missed.append(f"  {where}  {a.path}  {a.state}: {a.call}  (action never called)")
        if missed:
            lines.append("never exercised:")
            lines.extend(missed)
        return "\n".join(lines)


__all__ = ["GLOBAL", "ActionSite", "CoverageReport", "DefinitionCoverage", "StateSite", "TransitionSite"]
