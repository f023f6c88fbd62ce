"""What running a script found, turn by turn: the outcome and failures of each turn, and the route the
conversation took (``PathStep``), which record/replay compares."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._records import TurnRecord
from llm_fsm.scripting._scripts import (
    ScriptConversation,
    ScriptTurn,
)


@dataclass
class TurnResult:
    turn: ScriptTurn
    record: TurnRecord | None = None
    reply: str | None = None
    state: str | None = None
    failures: list[str] = field(default_factory=list)
    error: str | None = None
    skipped: bool = False
    definition_before: str | None = None
    """Loader id of the active flow's definition before the turn (``ROOT_ID`` for the script's own)."""
    definition_after: str | None = None
    flow_before: str | None = None
    """Name of the active flow before the turn (the root flow is named after its definition)."""
    flow_after: str | None = None
    fired: list[TurnRecord] = field(default_factory=list)
    """The records of the timers a ``wait:`` step fired, in order (``record`` is the last)."""

    @property
    def passed(self) -> bool:
        return not self.failures and not self.skipped


@dataclass
class PathStep:
    """Where one turn took the conversation; the unit record/replay compares."""

    turn: int
    state_before: str | None
    state_after: str | None
    transition_index: int | None
    verdict: str | None
    error: str | None = None
    flow_before: str | None = None
    flow_after: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "flow_before": self.flow_before,
            "state_before": self.state_before,
            "transition_index": self.transition_index,
            "flow_after": self.flow_after,
            "state_after": self.state_after,
            "verdict": self.verdict,
            **({"error": self.error} if self.error else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PathStep:
        return cls(
            turn=int(data["turn"]),
            state_before=data.get("state_before"),
            state_after=data.get("state_after"),
            transition_index=data.get("transition_index"),
            verdict=data.get("verdict"),
            error=data.get("error"),
            flow_before=data.get("flow_before"),
            flow_after=data.get("flow_after"),
        )

    def _key(self) -> tuple[Any, ...]:
        return (
            self.flow_before,
            self.state_before,
            self.transition_index,
            self.verdict,
            self.flow_after,
            self.state_after,
            self.error is None,
        )

    def same_route(self, other: PathStep) -> bool:
        return self._key() == other._key()


@dataclass
class ConversationResult:
    conversation: ScriptConversation
    definition: FSMDefinition | None = None
    opening: str | None = None
    turns: list[TurnResult] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """Failures of the conversation as a whole: it could not start, replay diverged, ..."""
    notes: list[str] = field(default_factory=list)
    """Things worth knowing that are not failures (the definition changed since a recording, ...)."""
    initial_state: str | None = None
    final_state: str | None = None
    ended: bool = False
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failures and all(t.passed for t in self.turns)

    @property
    def records(self) -> list[TurnRecord]:
        return [record for t in self.turns for record in (t.fired or ([t.record] if t.record is not None else []))]

    @property
    def path(self) -> list[PathStep]:
        steps: list[PathStep] = []
        for t in self.turns:
            if t.skipped:
                continue
            if t.record is not None:
                r = t.record
                steps.append(
                    PathStep(
                        t.turn.index,
                        r.state_before,
                        r.state_after,
                        r.verdict.transition_index,
                        r.verdict.kind,
                        flow_before=t.flow_before,
                        flow_after=t.flow_after,
                    )
                )
            elif t.turn.spec.kind != "user" and t.error is None:
                steps.append(
                    PathStep(t.turn.index, t.state, t.state, None, step_verdict(t.turn), flow_after=t.flow_after)
                )
            else:
                steps.append(
                    PathStep(
                        t.turn.index,
                        t.state,
                        t.state,
                        None,
                        None,
                        error=t.error or "failed",
                        flow_before=t.flow_before,
                        flow_after=t.flow_after,
                    )
                )
        return steps


def step_verdict(turn: ScriptTurn) -> str:
    """What a step that is no user turn did, where a turn's verdict stands: ``operator:resume``,
    ``application:context``."""
    spec = turn.spec
    if spec.operator is not None:
        return f"operator:{spec.operator.action}"
    if spec.wait is not None:
        return "wait"
    return "application:context"


__all__ = [
    "ConversationResult",
    "PathStep",
    "TurnResult",
    "step_verdict",
]
