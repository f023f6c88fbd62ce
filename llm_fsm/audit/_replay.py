"""Shadow replay: what a changed definition would have decided on every recorded turn of production.

Each recorded turn is decided again with the candidate, from the conversation as the turn found it (moved onto the
candidate by its migrations) and with the answers the turn was given (``redecide``): no model is called, so what
differs is the engine's decision alone. The report lists the turns whose decision changes (verdict, target,
chained steps, values stored or refused, actions called), the in-flight conversations the candidate cannot hold
(a state, flow or value it no longer declares), and totals.

A turn is judged against its own recorded conversation, not against what the candidate would have made of the
turns before it: the question is "given what happened, would this decision change?", which stays answerable
however far the candidate's path would have drifted.

Memory is bounded: the replayer keeps counts and the first ``max_details`` changed turns, whatever the number of
conversations fed to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.audit._redecide import Resolve, decision_of, differences, instance_before, redecide
from llm_fsm.definition._migrations import Migrations, flow_declarations
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._effects import EngineConfig
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._migrate import MigrationProblem, migrate
from llm_fsm.engine._records import TurnRecord
from llm_fsm.errors import FSMError, NotRecomputableError

DEFAULT_MAX_DETAILS = 1000
"""Changed turns and stranded conversations a report lists one by one; beyond, it counts them."""


@dataclass(frozen=True)
class TurnChange:
    """A recorded turn whose decision the candidate changes."""

    conversation_id: str
    turn: int
    differences: tuple[str, ...]
    recorded: dict[str, Any]
    candidate: dict[str, Any] | None
    unrecorded: tuple[str, ...] = ()
    """Answers the candidate's decision rests on that production never gave (see ``Redecided.unrecorded``)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "turn": self.turn,
            "differences": list(self.differences),
            "recorded": self.recorded,
            "candidate": self.candidate,
            "unrecorded": list(self.unrecorded),
        }


@dataclass(frozen=True)
class StrandedConversation:
    """An in-flight conversation the candidate cannot hold."""

    conversation_id: str
    state: str
    stack: tuple[str, ...]
    problems: tuple[MigrationProblem, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "state": self.state,
            "stack": list(self.stack),
            "problems": [problem.to_dict() for problem in self.problems],
        }


@dataclass
class ReplayReport:
    """What replaying the recorded turns with a candidate found."""

    definition: str
    version: str
    conversations: int = 0
    in_flight: int = 0
    turns: int = 0
    """Recorded turns decided again (those with inputs, within ``since``)."""
    unchanged: int = 0
    changed_count: int = 0
    not_recorded: int = 0
    not_recomputable: int = 0
    unreadable: int = 0
    """Conversations the store could not decode (an edited or damaged record: ``llm-fsm audit verify`` says)."""
    stranded_count: int = 0
    changed: list[TurnChange] = field(default_factory=list)
    stranded: list[StrandedConversation] = field(default_factory=list)
    max_details: int = DEFAULT_MAX_DETAILS

    @property
    def changed_ratio(self) -> float:
        return self.changed_count / self.turns if self.turns else 0.0

    def fails(self, max_changed: float | None) -> list[str]:
        """Why the candidate should not ship (``llm-fsm replay`` exits 1): stranded conversations, and changed
        decisions over ``max_changed`` (a fraction; None: any number)."""
        reasons = []
        if self.stranded_count:
            reasons.append(f"{self.stranded_count} in-flight conversation(s) would be stranded")
        if max_changed is not None and self.changed_ratio > max_changed:
            reasons.append(
                f"{self.changed_ratio:.2%} of recorded decisions change ({self.changed_count} of {self.turns}), "
                f"over --max-changed {max_changed:.2%}"
            )
        return reasons

    def summary(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "version": self.version,
            "conversations": self.conversations,
            "in_flight": self.in_flight,
            "turns": self.turns,
            "unchanged": self.unchanged,
            "changed": self.changed_count,
            "changed_ratio": round(self.changed_ratio, 6),
            "not_recorded": self.not_recorded,
            "not_recomputable": self.not_recomputable,
            "unreadable": self.unreadable,
            "stranded": self.stranded_count,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary(),
            "changed": [change.as_dict() for change in self.changed],
            "stranded": [conversation.as_dict() for conversation in self.stranded],
            "listed": {"changed": len(self.changed), "stranded": len(self.stranded)},
        }


class Replayer:
    """Feeds conversations through the candidate one at a time, keeping only the report."""

    def __init__(
        self,
        candidate: FSMDefinition,
        *,
        versions: Resolve,
        migrations: Migrations | None = None,
        flows: Mapping[str, FSMDefinition] | None = None,
        config: EngineConfig | None = None,
        since: float | None = None,
        max_details: int = DEFAULT_MAX_DETAILS,
    ) -> None:
        self.candidate = candidate
        self.versions = versions
        self.migrations = migrations
        self.flows = dict(flows or {})
        self.config = config
        self.since = since
        self.report = ReplayReport(candidate.name, candidate.content_hash, max_details=max_details)

    def add(self, instance: FSMInstance) -> None:
        """Replay every recorded turn of ``instance`` (a whole conversation, log included) and judge whether the
        candidate can hold it as it stands now."""
        report = self.report
        report.conversations += 1
        for record in sorted(instance.turns, key=lambda r: r.index):
            if self.since is not None and record.started_at < self.since:
                continue
            self._turn(instance.conversation_id, record)
        if instance.ended:
            return
        report.in_flight += 1
        moved = migrate(instance, self.candidate, self.migrations, flows=self.flows)
        if moved.problems:
            report.stranded_count += 1
            if len(report.stranded) < report.max_details:
                report.stranded.append(
                    StrandedConversation(
                        instance.conversation_id, instance.current_state, tuple(instance.stack), moved.problems
                    )
                )

    def unreadable(self, summary: Any, error: Exception) -> None:
        """Count a conversation the store could not decode (the walk's ``unreadable``)."""
        self.report.unreadable += 1

    def _turn(self, conversation_id: str, record: TurnRecord) -> None:
        report = self.report
        if record.inputs is None or not record.inputs.before:
            report.not_recorded += 1
            return
        report.turns += 1
        recorded = self._renamed(decision_of(record), record)
        try:
            moved = migrate(instance_before(record), self.candidate, self.migrations, flows=self.flows)
            if moved.problems:
                found = tuple(
                    f"the candidate cannot hold the conversation as it was: {p.message}" for p in moved.problems
                )
                found = found[:5]
                self._changed(TurnChange(conversation_id, record.index, found, recorded, None))
                return
            again = redecide(
                record,
                self.candidate,
                versions=self.versions,
                config=self.config,
                instance=moved.instance,
                flows=self._flow,
                parents=lambda fsm_id: self._parent(fsm_id, _root_id(record)),
            )
        except NotRecomputableError:
            report.not_recomputable += 1
            return
        except FSMError as exc:
            self._changed(TurnChange(conversation_id, record.index, (f"{type(exc).__name__}: {exc}",), recorded, None))
            return
        if again.record is None:
            found = (f"the candidate's turn fails: {again.error}",)
            self._changed(TurnChange(conversation_id, record.index, found, recorded, None, tuple(again.unrecorded)))
            return
        candidate = decision_of(again.record)
        found = tuple(differences(recorded, candidate))
        if not found:
            report.unchanged += 1
            return
        self._changed(TurnChange(conversation_id, record.index, found, recorded, candidate, tuple(again.unrecorded)))

    def _changed(self, change: TurnChange) -> None:
        report = self.report
        report.changed_count += 1
        if len(report.changed) < report.max_details:
            report.changed.append(change)

    def _flow(self, name: str, parent: FSMDefinition) -> tuple[str, FSMDefinition]:
        found = self.flows.get(name)
        if found is None:
            raise NotRecomputableError(f"the candidate's sub-flow {name!r} was not given to the replay")
        declared = next((d for d in flow_declarations(parent) if d.name == name), None)
        return (declared.definition if declared is not None else name), found

    def _parent(self, fsm_id: str, root_id: str) -> FSMDefinition | None:
        """The candidate's definition of a flow being resumed: the candidate itself for the root; a sub-flow's
        parent keeps its recorded version (the tape's)."""
        return self.candidate if fsm_id == root_id else None

    def _renamed(self, decision: dict[str, Any], record: TurnRecord) -> dict[str, Any]:
        """The recorded decision in the candidate's names (its migrations' renamed states and keys), so a rename
        alone is not a change. Only the root flow's block applies: a sub-flow's states are its own."""
        block = self.migrations if self.migrations is not None else self.candidate.migrations
        if block is None or record.flow_before != "root":
            return decision
        states, keys = block.states, block.keys
        out = dict(decision)
        verdict = decision["verdict"]
        out["verdict"] = {**verdict, "target": states.get(verdict["target"], verdict["target"])}
        out["chained"] = [
            {**step, "target": states.get(step["target"], step["target"])} for step in decision["chained"]
        ]
        out["state_after"] = states.get(decision["state_after"], decision["state_after"])
        proposal = decision["proposal"]
        out["proposal"] = states.get(proposal, proposal) if proposal else proposal
        out["values"] = [{**value, "key": keys.get(value["key"], value["key"])} for value in decision["values"]]
        return out


def _root_id(record: TurnRecord) -> str:
    before = record.inputs.before if record.inputs is not None else {}
    stack = before.get("flow_stack") or []
    return str(stack[0]["fsm_id"] if stack else before.get("fsm_id", ""))


__all__ = ["DEFAULT_MAX_DETAILS", "ReplayReport", "Replayer", "StrandedConversation", "TurnChange"]
