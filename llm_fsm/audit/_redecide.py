"""Running a recorded turn again: the engine's own turn, answered from the record instead of the world.

The turn record's ``inputs`` hold the conversation as the turn found it and every answer the turn was given
(``engine._tape``). ``redecide`` rebuilds that conversation, runs ``run_turn`` on it with a definition (the
recorded version for an audit, a candidate for a replay) and answers each effect from the tape: no model, hook,
action or file is touched. What comes out is a new turn record, compared with the stored one by ``decision_of``.

A candidate may ask for what production never answered (a regenerated reply, an action it now calls, a hook the
recorded turn did not reach): those are answered with a neutral stand-in and listed in ``Redecided.unrecorded``, so a
replay says where its verdict rests on an answer nobody gave.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from llm_fsm import errors as _errors
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._actions import ActionMemo, ActionResult, CallAction
from llm_fsm.engine._effects import (
    AwaitMessage,
    CallHook,
    CallLLM,
    Decided,
    EngineConfig,
    LoadDefinition,
    LoadFlow,
    TurnOutcome,
)
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._operator import human_turn
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._records import LLMResponse, LLMResult, StateTransition, TurnRecord
from llm_fsm.engine._retrieval import CallRetriever, RetrievalResult
from llm_fsm.engine._tape import action_memo_key, action_result_of, retrieval_result_of
from llm_fsm.engine._timer_turn import run_timer
from llm_fsm.engine._turn import run_turn
from llm_fsm.errors import DefinitionError, FSMError, NotRecomputableError

Resolve = Callable[[str], FSMDefinition]
"""A definition by version (``audit._versions.Versions``)."""

FlowLookup = Callable[[str, FSMDefinition], tuple[str, FSMDefinition]]
"""A candidate's sub-flow by declared name, from its parent: (reference, definition)."""


@dataclass
class Redecided:
    """A recorded turn decided again."""

    record: TurnRecord | None
    """The new record; None when the turn raised (``error``)."""
    error: str | None = None
    unrecorded: list[str] = field(default_factory=list)
    """Answers the decision needed that production never gave (a candidate's new action call, ...)."""
    after: FSMInstance | None = None
    """The conversation as the turn, decided again, left it."""


def instance_before(record: TurnRecord) -> FSMInstance:
    """The conversation as the recorded turn found it."""
    if record.inputs is None or not record.inputs.before:
        raise NotRecomputableError(f"turn {record.index} has no recorded inputs (written before turns recorded them)")
    return FSMInstance.model_validate(record.inputs.before)


def redecide(
    record: TurnRecord,
    definition: FSMDefinition,
    *,
    versions: Resolve,
    config: EngineConfig | None = None,
    instance: FSMInstance | None = None,
    flows: FlowLookup | None = None,
    parents: Callable[[str], FSMDefinition | None] | None = None,
) -> Redecided:
    """Run the recorded turn again on ``definition`` (its own version for an audit, a candidate for a replay).

    ``instance``: the conversation to run it on (default: the recorded one; a replay passes it migrated).
    ``flows``: how a candidate finds its sub-flows (default: the recorded versions); ``parents``: a candidate's
    definition of a flow being resumed, by its id (None: the recorded version).
    """
    if record.inputs is None:
        raise NotRecomputableError(f"turn {record.index} has no recorded inputs (written before turns recorded them)")
    before = instance if instance is not None else instance_before(record)
    started = dt.datetime.fromtimestamp(record.started_at, dt.UTC)
    clock_text = record.inputs.clock
    instant = dt.datetime.fromisoformat(clock_text) if clock_text else started
    engine_config = dataclasses.replace(config or EngineConfig(), clock=lambda: instant)
    message = record.inputs.message if record.inputs.message is not None else record.user_message
    if record.verdict.kind == "human_mode":
        outcome = human_turn(definition, before, message, engine_config, message_id=record.message_id)
        return Redecided(outcome.record, after=before)
    answers = _Answers(record, versions, flows, parents)
    if record.intent == "timer" and record.timer is not None:  # nobody wrote: the armed timer fired
        turn = run_timer(definition, before, record.timer, PromptBuilder(), engine_config, action_memo=answers.memo)
    else:
        turn = run_turn(
            definition,
            before,
            message,
            PromptBuilder(),
            engine_config,
            message_id=record.message_id,
            action_memo=answers.memo,
        )
    try:
        outcome = answers.drive(turn)
    except NotRecomputableError:
        raise  # the record cannot say: not the turn's own failure
    except FSMError as exc:
        return Redecided(None, error=f"{type(exc).__name__}: {exc}", unrecorded=answers.unrecorded)
    return Redecided(outcome.record, unrecorded=answers.unrecorded, after=before)


class _Answers:
    """The tape, read back: each effect of the turn answered with what the recorded turn was given."""

    def __init__(
        self,
        record: TurnRecord,
        versions: Resolve,
        flows: FlowLookup | None,
        parents: Callable[[str], FSMDefinition | None] | None = None,
    ) -> None:
        assert record.inputs is not None
        self.parents = parents
        self.inputs = record.inputs
        self.record = record
        self.versions = versions
        self.flows = flows
        self.memo = ActionMemo()
        self.memo.turn_label(record.message_id)
        self.unrecorded: list[str] = []
        self._used: set[int] = set()
        self._turn_reply: LLMResponse | None = None

    def drive(self, turn: Generator[Any, Any, TurnOutcome]) -> TurnOutcome:
        answer: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                effect = turn.send(answer) if thrown is None else turn.throw(thrown)
            except StopIteration as stop:
                outcome: TurnOutcome = stop.value
                return outcome
            thrown = None
            try:
                answer = self.answer(effect)
            except DefinitionError as exc:  # a sub-flow that did not load: the turn refuses it, as it did
                answer, thrown = None, exc

    def answer(self, effect: Any) -> Any:
        if isinstance(effect, CallLLM):
            return self._model(effect)
        if isinstance(effect, CallHook):
            entry = self._next("hook", name=effect.name)
            return None if entry is None else entry.get("answer")
        if isinstance(effect, CallAction):
            return self._action(effect)
        if isinstance(effect, CallRetriever):
            return self._retrieval(effect)
        if isinstance(effect, LoadFlow):
            return self._flow(effect)
        if isinstance(effect, LoadDefinition):
            own = self.parents(effect.fsm_id) if self.parents is not None else None
            if own is not None:
                self._next("definition", fsm_id=effect.fsm_id)  # consumed, as the recorded turn did
                return own
            entry = self._next("definition", fsm_id=effect.fsm_id)
            if entry is None or not entry.get("version"):
                raise NotRecomputableError(f"turn {self.record.index}: definition {effect.fsm_id!r} was not recorded")
            return self.versions(str(entry["version"]))
        if isinstance(effect, AwaitMessage):
            entry = self._next("message")
            reply = self._turn_reply or LLMResponse(transition=StateTransition(target_state=""), message="")
            text = entry.get("text") if entry is not None else None
            return LLMResult(response=reply.model_copy(update={"message": text if text is not None else reply.message}))
        if isinstance(effect, Decided):
            return None
        raise NotRecomputableError(
            f"turn {self.record.index}: an effect the audit does not know: {type(effect).__name__}"
        )

    def _next(self, kind: str, **match: Any) -> dict[str, Any] | None:
        for position, entry in enumerate(self.inputs.tape):
            if position in self._used or entry.get("effect") != kind:
                continue
            if any(entry.get(key) != value for key, value in match.items()):
                continue
            self._used.add(position)
            if "unrecorded" in entry:
                raise NotRecomputableError(
                    f"turn {self.record.index}: {kind} answer not recorded: {entry['unrecorded']}"
                )
            raised = entry.get("raised")
            if isinstance(raised, dict):
                raise _error(raised)
            return entry
        return None

    def _model(self, effect: CallLLM) -> LLMResult:
        purpose = effect.request.purpose
        entry = self._next("llm", purpose=purpose)
        if entry is None:
            if purpose != "regenerate":
                raise NotRecomputableError(f"turn {self.record.index}: no recorded model reply for the {purpose} call")
            # a candidate writes the reply again where production did not: only its message would be used
            self.unrecorded.append("a regenerated reply")
            response = LLMResponse(transition=StateTransition(target_state=""), message=self.record.reply)
            return LLMResult(response=response)
        response = LLMResponse.model_validate(entry.get("reply") or {})
        if purpose == "turn":
            self._turn_reply = response
        return LLMResult(response=response)

    def _action(self, effect: CallAction) -> ActionResult:
        key = action_memo_key(effect, self.memo.turn or "")
        data = self.inputs.actions.get(key)
        if data is None:
            self.unrecorded.append(f"action {effect.call.name} in {effect.call.state} ({effect.call.when})")
            return ActionResult(error="replay: production never called this action with these inputs")
        result = action_result_of(data)
        if result is None:
            raise NotRecomputableError(f"turn {self.record.index}: action {effect.call.name}'s result was not recorded")
        return result

    def _retrieval(self, effect: CallRetriever) -> RetrievalResult:
        entry = self._next("retrieval", name=effect.name)
        if entry is None:
            self.unrecorded.append(f"retrieval from {effect.name} in {effect.state}")
            return RetrievalResult(error="replay: production never asked this retriever")
        result = retrieval_result_of(entry.get("answer"))
        if result is None:
            raise NotRecomputableError(f"turn {self.record.index}: retriever {effect.name}'s answer was not recorded")
        return result

    def _flow(self, effect: LoadFlow) -> tuple[str, FSMDefinition]:
        if self.flows is not None:
            return self.flows(effect.declaration.name, effect.parent)
        entry = self._next("flow", name=effect.declaration.name)
        if entry is None or not entry.get("version"):
            raise NotRecomputableError(
                f"turn {self.record.index}: sub-flow {effect.declaration.name!r} was not recorded"
            )
        return str(entry.get("reference") or effect.declaration.name), self.versions(str(entry["version"]))


def _error(raised: dict[str, Any]) -> Exception:
    """The recorded error, raised again as its own type where the library has it."""
    kind = getattr(_errors, str(raised.get("type")), None)
    message = str(raised.get("message", ""))
    if isinstance(kind, type) and issubclass(kind, FSMError):
        try:
            return kind(message)
        except TypeError:  # an error type that needs more than a message
            pass
    return DefinitionError(message)


_FLOW_ID = re.compile(r"^(?P<name>.+)_[0-9a-f]{8}$")


def flow_name(flow_id: str) -> str:
    """A flow instance's id without its random part (``kyc_1a2b3c4d`` → ``kyc``): what two runs share."""
    match = _FLOW_ID.match(flow_id)
    return match.group("name") if match else flow_id


def decision_of(record: TurnRecord) -> dict[str, Any]:
    """What a turn decided, as comparable data: the verdict and its chained steps, where it left the conversation,
    the values stored or refused, the actions called, and what was retrieved and cited. Timings, usage, random flow
    ids and the reply's wording are left out (a regenerated reply is the model's, not the engine's)."""
    decided: dict[str, Any] = {
        "intent": record.intent,
        "proposal": record.proposal,
        "verdict": {
            "kind": record.verdict.kind,
            "target": record.verdict.target_state,
            "transition": record.verdict.transition_index,
        },
        "chained": [
            {"kind": v.kind, "target": v.target_state, "transition": v.transition_index} for v in record.chained
        ],
        "state_after": record.state_after,
        "flow_after": flow_name(record.flow_after),
        "values": [
            {"key": c.key, "value": c.value, "applied": c.applied, "rule": c.rule} for c in record.context_changes
        ],
        "actions": [
            {
                "call": a.call,
                "state": a.state,
                "when": a.when,
                "inputs": a.inputs,
                "outcome": "ok" if a.outcome == "replayed" else a.outcome,
            }
            for a in record.actions
            if not a.lost_attempt
        ],
    }
    retrieval = record.retrieval
    if retrieval is not None:  # (absent from records of states that retrieve nothing, as from older records)
        decided["retrieval"] = {
            "retriever": retrieval.retriever,
            "query": retrieval.query,
            "snippets": [snippet.id for snippet in retrieval.snippets],
            "cited": retrieval.cited,
            "error": retrieval.error,
            "on_error": retrieval.on_error,
            "skipped": retrieval.skipped,
        }
    return decided


def differences(recorded: dict[str, Any], again: dict[str, Any]) -> list[str]:
    """The parts of two decisions that differ, in words: ``verdict: stay → proposal_accepted (collect_email)``."""
    out: list[str] = []
    for key in recorded.keys() | again.keys():
        if recorded.get(key) != again.get(key):
            out.append(f"{key}: {_short(recorded.get(key))} → {_short(again.get(key))}")
    return sorted(out)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "…"


__all__ = [
    "FlowLookup",
    "Redecided",
    "Resolve",
    "decision_of",
    "differences",
    "flow_name",
    "instance_before",
    "redecide",
]
