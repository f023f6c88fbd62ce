"""Running conversation scripts: the scripted model, the turn loop, and the checks.

Each conversation runs on its own ``FSMManager`` with an in-memory store, so
scripts never share state and never touch the user's conversation database.
The model is the script itself (offline, the default), a live model, or a
recording being replayed; the engine is always the real one, so a passing
script says something about the definition, not about a mock.

The scripted model answers by *purpose* rather than strictly in order: the
engine makes a second, "regenerate" call only when its verdict differs from the
model's proposal, and a script should not have to predict that. A turn's
``regenerate`` answer is used when given; otherwise the turn's own message is
returned again, which keeps scripts short.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._context import _MISSING, get_path, has_value
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult, TurnRecord
from llm_fsm.engine._values import MASK
from llm_fsm.errors import ActionNotRegisteredError, FSMError, LLMConfigurationError, LLMScriptExhaustedError
from llm_fsm.llm._interface import LLMInterface
from llm_fsm.llm.fakes import to_response
from llm_fsm.scripting._scripts import (
    Expectation,
    Matcher,
    OperatorStep,
    ScriptConversation,
    ScriptTurn,
)

# --- the scripted model ---------------------------------------------------------------------


class ScriptedConversationModel(LLMInterface):
    """Answers from a script: the opening, each turn's ``model:``, and regenerate calls.

    Replies go through the same parser as a real model's output
    (``llm_fsm.testing.to_response``), so a proposal outside the allowed states
    or a reply without a message fails exactly as it would live.
    """

    reads_images = True
    """A script's model stands for one that reads images, so scripts can send content parts offline (a turn's
    ``model:`` answer says what it made of them; with a live ``--model``, that model's own support decides)."""

    def __init__(self, conversation: ScriptConversation) -> None:
        self.conversation = conversation
        self.turn = 0
        self.requests: list[LLMRequest] = []
        self._turn_messages: dict[int, str] = {}

    def begin_turn(self, index: int) -> None:
        self.turn = index

    def send_request(self, request: LLMRequest) -> LLMResponse:
        return self.complete(request).response

    def complete(self, request: LLMRequest) -> LLMResult:
        self.requests.append(request)
        reply = self._reply_for(request)
        raw = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        response = to_response(reply, request)
        if request.purpose == "turn":
            self._turn_messages[self.turn] = response.message
        return LLMResult(response=response, attempts=1, raw_outputs=(raw,), response_format="scripted")

    def _reply_for(self, request: LLMRequest) -> dict[str, Any] | str:
        if request.purpose == "opening" or self.turn == 0:
            return self.conversation.opening.as_reply()
        turn = self.conversation.turns[self.turn - 1]
        where = f"turn {turn.index}" + (f" (line {turn.line})" if turn.line else "")
        if request.purpose == "turn":
            if turn.spec.model is None:
                raise LLMScriptExhaustedError(f"{where} has no model: answer; offline runs need one for every turn")
            return turn.spec.model.as_reply()
        if turn.spec.regenerate is not None:
            return turn.spec.regenerate.as_reply()
        message = self._turn_messages.get(self.turn) or "(regenerated)"
        return {"transition": {"target_state": None, "context_update": {}}, "message": message}


def set_turn(llm: Any, index: int) -> None:
    """Tell a turn-aware model (scripted, replay, recorder) which turn the next calls belong to."""
    begin = getattr(llm, "begin_turn", None)
    if callable(begin):
        begin(index)


# --- results ---------------------------------------------------------------------------------


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
        return [t.record for t in self.turns if t.record is not None]

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
            elif t.turn.spec.operator is not None and t.error is None:
                operator = f"operator:{t.turn.spec.operator.action}"
                steps.append(PathStep(t.turn.index, t.state, t.state, None, operator, flow_after=t.flow_after))
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


# --- checks ----------------------------------------------------------------------------------


def same_value(actual: Any, expected: Any) -> bool:
    """Equality as JSON sees it: ``true`` is not ``1``, but ``1`` is ``1.0``."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        return actual.keys() == expected.keys() and all(same_value(actual[k], expected[k]) for k in actual)
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(same_value(a, e) for a, e in zip(actual, expected, strict=False))
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
        return actual == expected
    return type(actual) is type(expected) and actual == expected


def _show(value: Any) -> str:
    if value is _MISSING:
        return "(missing)"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def match(matcher: Matcher, value: Any, *, collected: bool) -> str | None:
    """None when ``value`` satisfies ``matcher``; else what was expected, in words."""
    kind = matcher.kind
    if kind == "equals":
        ok = value is not _MISSING and same_value(value, matcher.equals)
        return None if ok else f"expected {_show(matcher.equals)}"
    if kind == "regex":
        assert matcher.regex is not None
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        ok = value is not _MISSING and re.search(matcher.regex, text) is not None
        return None if ok else f"expected a match for /{matcher.regex}/"
    if kind == "present":
        return (
            None
            if collected == matcher.present
            else ("expected present" if matcher.present else "expected not present")
        )
    return None if (not collected) == matcher.absent else ("expected absent" if matcher.absent else "expected present")


def flow_stack(instance: FSMInstance) -> list[str] | None:
    """The sub-flow stack as flow names above the root, oldest first; None when the engine keeps none."""
    stack = getattr(instance, "stack", None)
    if stack is None:
        return None
    names: list[str] = []
    for entry in stack:
        if isinstance(entry, str):
            names.append(entry)
            continue
        data = entry.model_dump() if hasattr(entry, "model_dump") else entry
        if isinstance(data, Mapping):
            name = next((data[k] for k in ("flow_name", "name", "flow", "fsm_id") if data.get(k)), None)
            names.append(str(name) if name is not None else _show(data))
        else:
            names.append(str(entry))
    return names


def check_expectations(
    expect: Expectation,
    instance: FSMInstance,
    record: TurnRecord | None,
    reply: str | None,
    definition: FSMDefinition | None = None,
) -> list[str]:
    """Every way the conversation after this turn differs from what the script expects."""
    failures: list[str] = []
    if expect.mode is not None and instance.mode != expect.mode:
        failures.append(f"mode: expected {expect.mode}, got {instance.mode}")
    if expect.state is not None and instance.current_state != expect.state:
        note = ""
        if definition is not None and expect.state not in definition.states:
            note = f" (the definition declares no state {expect.state!r})"
        failures.append(f"state: expected {expect.state}{note}, got {instance.current_state}")
    data = instance.context.data
    for key, expected in (expect.context or {}).items():
        value = get_path(data, key)
        if isinstance(expected, Matcher):
            problem = match(expected, value, collected=has_value(data, key))
        else:
            problem = None if value is not _MISSING and same_value(value, expected) else f"expected {_show(expected)}"
        if problem:
            failures.append(f"context.{key}: {problem}, got {_show(value)}")
    if expect.ended is not None and instance.ended != expect.ended:
        failures.append(
            f"ended: expected {str(expect.ended).lower()}, got {str(instance.ended).lower()} "
            f"(status {instance.status}, state {instance.current_state})"
        )
    if expect.stack is not None:
        stack = flow_stack(instance)
        if stack is None:
            if expect.stack:
                failures.append(f"stack: expected {_show(expect.stack)}, but this engine keeps no sub-flow stack")
        elif stack != list(expect.stack):
            failures.append(f"stack: expected {_show(expect.stack)}, got {_show(stack)}")
    if expect.verdict is not None:
        if record is None:
            failures.append(f"verdict: expected {expect.verdict}, but the turn has no record (it failed)")
        elif record.verdict.kind != expect.verdict:
            failures.append(f"verdict: expected {expect.verdict}, got {record.verdict.kind} ({record.verdict.reason})")
    failures += _check_record(expect, instance, record)
    if expect.reply is not None:
        shown: Any = reply if reply is not None else _MISSING
        problem = match(expect.reply, shown, collected=bool(reply and reply.strip()))
        if problem:
            failures.append(f"reply: {problem}, got {_show(shown)}")
    return failures


def _check_record(expect: Expectation, instance: FSMInstance, record: TurnRecord | None) -> list[str]:
    """The expectations read from the turn's explain record: refused keys, masked keys, chained states."""
    wanted = [
        name for name in ("refused", "masked", "chained", "called", "not_called") if getattr(expect, name) is not None
    ]
    if not wanted:
        return []
    if record is None:
        return [f"{name}: expected, but the turn has no record (it failed)" for name in wanted]
    failures: list[str] = []
    for key, rule in (expect.refused or {}).items():
        changes = [c for c in record.context_changes if c.key == key]
        refused = [c for c in changes if not c.applied]
        if any(c.rule == rule for c in refused):
            continue
        if refused:
            got = "; ".join(f"rule {c.rule} ({c.reason})" for c in refused)
        elif changes:
            got = f"stored ({changes[-1].reason})"
        else:
            got = "no write to it this turn"
        failures.append(f"refused.{key}: expected refused by rule {rule}, got {got}")
    if expect.masked is not None:
        shown = record.model_dump_json()
        for key in expect.masked:
            changes = [c for c in record.context_changes if c.key == key]
            if not changes:
                failures.append(f"masked.{key}: expected a masked write, got no write to it this turn")
                continue
            bare = [c for c in changes if c.value not in (None, MASK) or c.previous not in (None, MASK)]
            if bare:
                failures.append(f"masked.{key}: expected {MASK}, got {_show(bare[0].value)} in the explain record")
            value = get_path(instance.context.data, key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                secret = json.dumps(value, ensure_ascii=False).strip('"')
                if len(secret) >= 3 and secret in shown:
                    failures.append(f"masked.{key}: its value {_show(value)} appears in the explain record")
    if expect.chained is not None:
        through = [step.target_state for step in record.chained]
        if through != list(expect.chained):
            failures.append(f"chained: expected {_show(list(expect.chained))}, got {_show(through)}")
    return failures + _check_actions(expect, record)


def _check_actions(expect: Expectation, record: TurnRecord) -> list[str]:
    """``called`` and ``not_called``, read from the turn's action records (a skipped action was not called)."""
    failures: list[str] = []
    called = [a for a in record.actions if a.outcome != "skipped"]
    for name, inputs in (expect.called or {}).items():
        calls = [a for a in called if a.call == name]
        if not calls:
            got = ", ".join(sorted({a.call for a in called})) or "no action"
            failures.append(f"called.{name}: expected a call, got {got}")
            continue
        problems: list[str] = []
        for call in calls:
            problems = []
            for key, expected in inputs.items():
                value = call.inputs.get(key, _MISSING)
                if isinstance(expected, Matcher):
                    problem = match(expected, value, collected=value is not _MISSING and value not in (None, ""))
                else:
                    ok = value is not _MISSING and same_value(value, expected)
                    problem = None if ok else f"expected {_show(expected)}"
                if problem:
                    problems.append(f"called.{name}.{key}: {problem}, got {_show(value)}")
            if not problems:
                break
        failures += problems
    for name in expect.not_called or ():
        if any(a.call == name for a in called):
            failures.append(f"not_called: {name} was called")
    return failures


class ActionStubError(RuntimeError):
    """What a stub written ``{raise: message}`` raises: the action fails, and its on_error applies."""


class ActionStubs:
    """The script's stubbed actions, registered on the conversation's manager; a turn may replace them."""

    def __init__(self, stubs: Mapping[str, dict[str, Any]]) -> None:
        self.table: dict[str, dict[str, Any]] = dict(stubs)

    def register(self, registry: Any, names: Any) -> None:
        for name in names:
            registry.register(name, self._function(name))

    def _function(self, name: str) -> Callable[..., Any]:
        def stub(**inputs: Any) -> Any:
            answer = self.table.get(name)
            if answer is None:
                raise ActionStubError(f"the script stubs {name!r} only from a later turn")
            if "raise" in answer:
                raise ActionStubError(answer["raise"])
            if "handoff" in answer:
                from llm_fsm.engine._actions import HandOff

                return HandOff(answer["handoff"])
            return json.loads(json.dumps(answer))  # a fresh copy: the engine may keep what it is given

        stub.__name__ = f"stub_{name}"
        return stub


# --- running one conversation -------------------------------------------------------------------

ROOT_ID = "<script definition>"
"""The loader id of the script's own definition; sub-flows are loaded by their own path."""
_STOP_AFTER = (LLMScriptExhaustedError,)


def run_conversation(
    conversation: ScriptConversation,
    definition: FSMDefinition,
    llm: Any,
    *,
    load_definition: Callable[[str], FSMDefinition] | None = None,
    actions: Any = None,
) -> ConversationResult:
    """Play one conversation through the real engine and check every turn's expectations.

    ``load_definition`` loads sub-flow definitions by the path the engine
    resolved (default: ``load_fsm_definition``). ``actions`` is the application's
    ``ActionRegistry`` (``llm-fsm test --actions``); the script's stubs replace its functions.
    """
    from llm_fsm.engine._turn import EngineConfig
    from llm_fsm.loading import load_fsm_definition
    from llm_fsm.manager import FSMManager

    load_other = load_definition or load_fsm_definition

    def loader(fsm_id: str) -> FSMDefinition:
        return definition if fsm_id == ROOT_ID else load_other(fsm_id)

    started = time.perf_counter()
    result = ConversationResult(
        conversation=conversation, definition=definition, initial_state=definition.initial_state
    )
    manager = FSMManager(
        fsm_loader=loader,
        llm_interface=llm,
        store="memory://",
        config=EngineConfig(max_turn_records=max(50, len(conversation.turns) + 1)),
        actions=actions,
    )
    stubs = ActionStubs(conversation.actions)
    stubs.register(
        manager.actions, {name for t in conversation.turns for name in t.spec.actions or {}} | set(stubs.table)
    )
    set_turn(llm, 0)
    try:
        conversation_id, result.opening = manager.start_conversation(ROOT_ID, conversation.initial_context)
    except LLMConfigurationError:
        raise  # no model, no key: no later conversation can run either
    except FSMError as exc:
        hint = ""
        if isinstance(exc, ActionNotRegisteredError):
            hint = "; or stub it in the script: actions: {name: {field: value}}"
        result.failures.append(f"the conversation could not start: {type(exc).__name__}: {exc}{hint}")
        result.turns = [TurnResult(turn=t, skipped=True) for t in conversation.turns]
        result.seconds = time.perf_counter() - started
        return result

    stop = False
    for turn in conversation.turns:
        if stop:
            result.turns.append(TurnResult(turn=turn, skipped=True))
            continue
        instance = manager.get_instance(conversation_id)
        if instance.ended:
            result.turns.append(
                TurnResult(
                    turn=turn,
                    state=instance.current_state,
                    skipped=True,  # never sent, so not part of the route
                    failures=[
                        f"the conversation already ended in state {instance.current_state}; this turn cannot be sent"
                    ],
                )
            )
            stop = True
            continue
        stubs.table.update(turn.spec.actions or {})
        result.turns.append(_run_turn(manager, conversation_id, turn, llm, definition))
        stop = isinstance(result.turns[-1].error, _StopMarker)
    final = manager.get_instance(conversation_id)
    result.final_state, result.ended = final.current_state, final.ended
    result.seconds = time.perf_counter() - started
    return result


class _StopMarker(str):
    """An error text after which later turns cannot run (no model answer, no model)."""


def _run_turn(manager: Any, conversation_id: str, turn: ScriptTurn, llm: Any, definition: FSMDefinition) -> TurnResult:
    expect = turn.spec.expect
    before = manager.get_instance(conversation_id)
    outcome = TurnResult(turn=turn, definition_before=before.fsm_id, flow_before=before.flow_name or before.fsm_id)
    set_turn(llm, turn.index)
    operator = turn.spec.operator
    try:
        if operator is not None:
            _operate(manager, conversation_id, operator)
        else:
            outcome.reply = manager.process_message(
                conversation_id, turn.spec.user, **({"metadata": turn.spec.metadata} if turn.spec.metadata else {})
            )
    except LLMConfigurationError:
        raise
    except FSMError as exc:
        text = f"{type(exc).__name__}: {exc}"
        outcome.error = _StopMarker(text) if isinstance(exc, _STOP_AFTER) else text
        if expect.error is None or expect.error.lower() not in text.lower():
            wanted = f" (expected an error containing {expect.error!r})" if expect.error else ""
            outcome.failures.append(f"the turn failed: {text}{wanted}")
    else:
        outcome.record = manager.explain(conversation_id) if operator is None else None
        if expect.error is not None:
            outcome.failures.append(f"expected the turn to fail with {expect.error!r}, but it succeeded")
    instance = manager.get_instance(conversation_id)
    outcome.state = instance.current_state
    outcome.definition_after, outcome.flow_after = instance.fsm_id, instance.flow_name or instance.fsm_id
    outcome.failures.extend(check_expectations(expect, instance, outcome.record, outcome.reply, definition))
    return outcome


def _operate(manager: Any, conversation_id: str, step: OperatorStep) -> None:
    """An operator step, through the manager's operator API (so it is refused and traced as in production)."""
    actor, reason = step.actor, step.reason
    if step.hand_off:
        manager.hand_off(conversation_id, reason or "handed off by the script", actor=actor)
    elif step.message is not None:
        manager.post_operator_message(conversation_id, step.message, actor=actor)
    elif step.force_state is not None:
        manager.force_state(conversation_id, step.force_state, reason or "forced by the script", actor=actor)
    else:
        state = step.resume if isinstance(step.resume, str) else None
        manager.resume_bot(conversation_id, actor=actor, state=state, reason=reason)


# --- running many ----------------------------------------------------------------------------

LLMSource = Any
"""An LLM interface shared by every conversation, or a callable conversation → interface."""


def model_for(conversation: ScriptConversation, llm: LLMSource | None) -> Any:
    """The scripted model by default; else the given interface, or the factory's answer."""
    if llm is None:
        return ScriptedConversationModel(conversation)
    if callable(llm) and not hasattr(llm, "complete") and not hasattr(llm, "send_request"):
        return llm(conversation)
    return llm


__all__ = [
    "ROOT_ID",
    "ConversationResult",
    "PathStep",
    "ScriptedConversationModel",
    "TurnResult",
    "check_expectations",
    "flow_stack",
    "match",
    "model_for",
    "run_conversation",
    "same_value",
    "set_turn",
]
