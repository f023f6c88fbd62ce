"""Running conversation scripts: each conversation played through the real engine, its turns checked.

Each conversation runs on its own ``FSMManager`` with an in-memory store, so
scripts never share state and never touch the user's conversation database.
The model is the script itself (offline, the default), a live model, or a
recording being replayed; the engine is always the real one, so a passing
script says something about the definition, not about a mock.

Beside it: the scripted model (``_scripted_model``), what a run found (``_results``) and the checks of a
turn's expectations (``_expectations``); the names they had here are re-exported.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.definition._timers import duration_seconds
from llm_fsm.engine._snippets import Snippet
from llm_fsm.errors import (
    ActionNotRegisteredError,
    FSMError,
    LLMConfigurationError,
    LLMScriptExhaustedError,
    UsageError,
)
from llm_fsm.runtime._retrievers import RetrieverRegistry
from llm_fsm.scripting._expectations import check_expectations, flow_stack, match, same_value
from llm_fsm.scripting._results import ConversationResult, PathStep, TurnResult
from llm_fsm.scripting._scripted_model import ScriptedConversationModel, set_turn
from llm_fsm.scripting._scripts import (
    OperatorStep,
    ScriptConversation,
    ScriptTurn,
)


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


class RetrieverStubError(RuntimeError):
    """What a retriever stub written ``{raise: message}`` raises: the retrieval fails, and its on_error applies."""


class RetrieverStubs:
    """The script's stubbed retrievers, registered on the conversation's own registry (a copy of the
    application's, so a stub never replaces a retriever other conversations use); a turn may replace them."""

    def __init__(self, registry: RetrieverRegistry) -> None:
        self.registry = registry
        self.table: dict[str, Any] = {}

    def apply(self, stubs: Mapping[str, Any]) -> None:
        """From now on, each name in ``stubs`` answers as it says (before that, the application's retriever did)."""
        for name, answer in stubs.items():
            if name not in self.table:
                self.registry.register(name, _StubRetriever(self, name))
            self.table[name] = answer


class _StubRetriever:
    def __init__(self, stubs: RetrieverStubs, name: str) -> None:
        self.stubs, self.name = stubs, name

    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        answer = self.stubs.table[self.name]
        if isinstance(answer, Mapping):
            raise RetrieverStubError(answer["raise"])
        return [Snippet(s["id"], s["text"], s["source"], s["score"]) for s in answer[:k]]


def conversation_retrievers(application: RetrieverRegistry | Mapping[str, Any] | None) -> RetrieverRegistry:
    """A registry of its own for one conversation: the application's retrievers, which the script may stub."""
    own = RetrieverRegistry()
    if application is not None:
        own.update(application if isinstance(application, RetrieverRegistry) else RetrieverRegistry(application))
    return own


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
    retrievers: RetrieverRegistry | Mapping[str, Any] | None = None,
) -> ConversationResult:
    """Play one conversation through the real engine and check every turn's expectations.

    ``load_definition`` loads sub-flow definitions by the path the engine
    resolved (default: ``load_fsm_definition``). ``actions`` is the application's
    ``ActionRegistry`` (``llm-fsm test --actions``); the script's stubs replace its functions. ``retrievers`` are
    the application's (``llm-fsm test --retrievers``); the script's retriever stubs take precedence over them.
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
    waits = any(turn.spec.wait is not None for turn in conversation.turns)
    manager = FSMManager(
        fsm_loader=loader,
        llm_interface=llm,
        store="memory://",
        config=EngineConfig(
            max_turn_records=max(50, 4 * len(conversation.turns) + 1),  # a wait may fire several timers
            clock=ScriptClock() if waits else None,  # time passes only where the script says so
        ),
        actions=actions,
        retrievers=conversation_retrievers(retrievers),
    )
    retriever_stubs = RetrieverStubs(manager.retrievers)
    retriever_stubs.apply(conversation.retrievers)
    stubs = ActionStubs(conversation.actions)
    stubs.register(
        manager.actions, {name for t in conversation.turns for name in t.spec.actions or {}} | set(stubs.table)
    )
    set_turn(llm, 0)
    try:
        conversation_id, result.opening = manager.start_conversation(
            ROOT_ID, conversation.initial_context, language=conversation.language
        )
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
        retriever_stubs.apply(turn.spec.retrievers or {})
        result.turns.append(_run_turn(manager, conversation_id, turn, llm, definition))
        stop = isinstance(result.turns[-1].error, _StopMarker)
    final = manager.get_instance(conversation_id)
    result.final_state, result.ended = final.current_state, final.ended
    result.failures += _audit(manager, conversation_id)
    result.seconds = time.perf_counter() - started
    return result


def _audit(manager: Any, conversation_id: str) -> list[str]:
    """Every turn the script ran decides again the same way from its record (``FSMManager.verify``): a turn whose
    decision depends on something the record does not keep is a bug of the engine's recording, shown here."""
    report = manager.verify(conversation_id)
    if report.ok:
        return []
    failure = report.failure
    if failure is None:
        return [f"the audit found the conversation's records inconsistent: {report.problem}"]
    return [f"turn {failure.index} does not decide again the same way from its record: {'; '.join(failure.details)}"]


class _StopMarker(str):
    """An error text after which later turns cannot run (no model answer, no model)."""


def _run_turn(manager: Any, conversation_id: str, turn: ScriptTurn, llm: Any, definition: FSMDefinition) -> TurnResult:
    expect = turn.spec.expect
    before = manager.get_instance(conversation_id)
    outcome = TurnResult(turn=turn, definition_before=before.fsm_id, flow_before=before.flow_name or before.fsm_id)
    set_turn(llm, turn.index)
    operator, application = turn.spec.operator, turn.spec.application
    try:
        if operator is not None:
            _operate(manager, conversation_id, operator)
        elif application is not None:
            manager.update_context(conversation_id, application.context)
        elif turn.spec.wait is not None:
            outcome.reply = _wait(manager, conversation_id, turn, outcome)
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
        if turn.spec.kind == "user":
            outcome.record = manager.explain(conversation_id)
        elif outcome.fired:
            outcome.record = outcome.fired[-1]
        if expect.error is not None:
            outcome.failures.append(f"expected the turn to fail with {expect.error!r}, but it succeeded")
    instance = manager.get_instance(conversation_id)
    outcome.state = instance.current_state
    outcome.definition_after, outcome.flow_after = instance.fsm_id, instance.flow_name or instance.fsm_id
    outcome.failures.extend(check_expectations(expect, instance, outcome.record, outcome.reply, definition))
    return outcome


class ScriptClock:
    """The clock of a script that lets time pass: now when the conversation started, moved on by each ``wait:``."""

    def __init__(self) -> None:
        self.now = dt.datetime.now(dt.UTC).replace(microsecond=0)  # whole seconds: due times add up exactly

    def __call__(self) -> dt.datetime:
        return self.now


def _wait(manager: Any, conversation_id: str, turn: ScriptTurn, outcome: TurnResult) -> str:
    """Let the step's time pass, fire what is then due, and check how many fired; the reply is what they said."""
    clock = manager.config.clock
    assert isinstance(clock, ScriptClock) and turn.spec.wait is not None
    try:
        clock.now += dt.timedelta(seconds=duration_seconds(turn.spec.wait))
    except OverflowError:  # the step fails, not the whole run
        raise UsageError(f"wait: {turn.spec.wait} takes the script's clock past the year 9999") from None
    before = manager.get_instance(conversation_id).turn_count
    report = manager.run_due_timers()
    outcome.failures += [f"timer {f.timer_id} failed: {f.error}" for f in report.failed]
    outcome.fired = [r for r in manager.get_instance(conversation_id).turns if r.index > before]
    wanted = turn.spec.expect.timers
    if wanted is not None and len(report.fired) != wanted:
        outcome.failures.append(f"expected {wanted} timer(s) to fire, {len(report.fired)} fired")
    return "\n".join(f.reply for f in report.fired if f.reply)


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
    "RetrieverStubError",
    "RetrieverStubs",
    "ScriptedConversationModel",
    "TurnResult",
    "check_expectations",
    "conversation_retrievers",
    "flow_stack",
    "match",
    "model_for",
    "run_conversation",
    "same_value",
    "set_turn",
]
