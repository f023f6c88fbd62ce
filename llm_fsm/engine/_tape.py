"""Recording what a turn was given, so its decision can be computed again (``llm_fsm.audit``).

The turn is a generator of effects; whatever the runtime answered (a model reply, a hook's additions, a definition,
an action's result, a retriever's snippets, a streamed message) is all the outside world ever told it.
``recorded_turn`` wraps the turn, writes those answers down in order with the conversation as the turn found it, and
puts them in the turn record's ``inputs``. Nothing here changes what the turn does: the wrapper forwards every effect,
answer and thrown error.

Sensitive values are kept, as the hot record keeps them: a decision that read one cannot be recomputed from a mask
(``explain`` and the API never show inputs). ``EngineConfig(record_sensitive_values=False)`` masks them here too,
and the audit then reports a decision that depended on one as not recomputable.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Generator, Iterable
from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._actions import ActionMemo, ActionResult, CallAction, HandOff, _fingerprint
from llm_fsm.engine._data import MAX_VALUE_DEPTH, has_lone_surrogate
from llm_fsm.engine._effects import (
    AwaitMessage,
    CallHook,
    CallLLM,
    Effect,
    EngineConfig,
    LoadDefinition,
    LoadFlow,
    TurnGenerator,
    TurnOutcome,
)
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._messages import UserMessage, entry_role
from llm_fsm.engine._operator import human_turn
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._records import LLMResult, TurnInputs
from llm_fsm.engine._retrieval import CallRetriever, RetrievalResult
from llm_fsm.engine._snippets import Snippet
from llm_fsm.engine._turn import run_turn
from llm_fsm.engine._values import MASK

SNAPSHOT_EXCLUDE = frozenset(
    {"turns", "processed_messages", "trace", "archive_outbox", "completed_flows", "provenance"}
)
"""What a turn's decision never reads, left out of its ``before`` snapshot: the log, the trail, the archive, and
where each value came from (the hot record has it; every record repeating it cost the log 8.5 %)."""


def recorded_turn(
    definition: FSMDefinition,
    instance: FSMInstance,
    message: str | UserMessage,
    builder: PromptBuilder,
    config: EngineConfig,
    *,
    message_id: str | None = None,
    schema_sent: bool = False,
    action_memo: ActionMemo | None = None,
) -> TurnGenerator:
    """``run_turn``, with what it was given kept in its record's ``inputs``."""

    def turn(config: EngineConfig, memo: ActionMemo) -> TurnGenerator:
        return run_turn(
            definition,
            instance,
            message,
            builder,
            config,
            message_id=message_id,
            schema_sent=schema_sent,
            action_memo=memo,
        )

    outcome = yield from recording(definition, instance, config, message_id, action_memo, turn)
    if outcome.record is not None and outcome.record.inputs is not None:
        text = message.text if isinstance(message, UserMessage) else message
        if text != outcome.record.user_message and config.record_sensitive_values:
            outcome.record.inputs.message = text
    return outcome


def recording(
    definition: FSMDefinition,
    instance: FSMInstance,
    config: EngineConfig,
    label: str | None,
    action_memo: ActionMemo | None,
    run: Callable[[EngineConfig, ActionMemo], TurnGenerator],
) -> TurnGenerator:
    """Run a turn (``run``, given the config and action memo to use) with what it was given kept in its record's
    ``inputs``: the conversation it found, the tape of answers, the actions' results and the clock's reading.
    ``label`` names the turn in its actions' idempotency keys (a message id, a timer id). A user's turn and a timer's
    are recorded alike, so the audit decides both again."""
    memo = action_memo if action_memo is not None else ActionMemo()
    memo.turn_label(label)
    secrets = () if config.record_sensitive_values else _secrets(definition)
    inputs = TurnInputs(definition=definition.content_hash, before=snapshot(instance, secrets))
    clock = _ClockReading(config.clock)
    if config.clock is not None:
        config = dataclasses.replace(config, clock=clock)
    tape = Tape(secrets, mask_flows=not config.record_sensitive_values)
    outcome = yield from tape.record(run(config, memo))
    if outcome.record is not None:
        inputs.tape = tape.entries
        inputs.actions = _action_results(memo, instance.conversation_id, tape.secrets)
        inputs.clock = clock.reading
        outcome.record.inputs = inputs
    return outcome


def recorded_human_turn(
    definition: FSMDefinition,
    instance: FSMInstance,
    message: str | UserMessage,
    config: EngineConfig,
    *,
    message_id: str | None = None,
) -> TurnOutcome:
    """``human_turn``, with the conversation it found kept in its record (it is given nothing else)."""
    secrets = () if config.record_sensitive_values else _secrets(definition)
    inputs = TurnInputs(definition=definition.content_hash, before=snapshot(instance, secrets))
    outcome = human_turn(definition, instance, message, config, message_id=message_id)
    if outcome.record is not None:
        text = message.text if isinstance(message, UserMessage) else message
        if text != outcome.record.user_message and config.record_sensitive_values:
            inputs.message = text
        outcome.record.inputs = inputs
    return outcome


def snapshot(instance: FSMInstance, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """The conversation as a turn finds it, as data: what the decision reads (the keys in ``secrets`` masked)."""
    data = instance.model_dump(mode="json", exclude=_DUMP_EXCLUDE)
    exchanges = []
    for entry in instance.context.conversation.exchanges:
        role = entry_role(entry)
        text = entry.get(role, "")
        exchanges.append({role: text if isinstance(text, str) else str(text)})
    data["context"]["conversation"]["exchanges"] = exchanges
    if secrets:
        data["context"]["data"] = masked(data["context"]["data"], secrets)
        for frame in data.get("flow_stack") or ():
            frame["data"] = masked(frame.get("data") or {}, secrets)
    return data


_DUMP_EXCLUDE: dict[str, Any] = {
    **dict.fromkeys(SNAPSHOT_EXCLUDE, True),
    "context": {"conversation": {"exchanges": True}},  # reduced to role and text below, not dumped whole
}


def masked(values: dict[str, Any], secrets: Iterable[str]) -> dict[str, Any]:
    """``values`` with the sensitive keys' values replaced by the mask (top level, as the engine stores them)."""
    names = set(secrets)
    return {key: MASK if key in names and value is not None else value for key, value in values.items()}


class Tape:
    """The answers one turn received, in order, as JSON data."""

    def __init__(self, secrets: Iterable[str] = (), *, mask_flows: bool = False) -> None:
        self.entries: list[dict[str, Any]] = []
        self.secrets = set(secrets)
        self.mask_flows = mask_flows

    def record(self, operation: TurnGenerator) -> Generator[Effect, Any, TurnOutcome]:
        """Forward ``operation``'s effects and their answers (and errors thrown into it), writing each down."""
        answer: Any = None
        thrown: BaseException | None = None
        while True:
            try:
                effect = operation.send(answer) if thrown is None else operation.throw(thrown)
            except StopIteration as stop:
                outcome: TurnOutcome = stop.value
                return outcome
            thrown = None
            try:
                answer = yield effect
            except GeneratorExit:
                operation.close()
                raise
            except Exception as exc:  # noqa: BLE001 - handed on to the turn, which decides what it means
                thrown = exc
                self._write(effect, None, exc)
                continue
            self._write(effect, answer, None)

    def _write(self, effect: Effect, answer: Any, error: Exception | None) -> None:
        try:
            entry = self._entry(effect, answer)
            why = unrecordable(entry) if entry is not None else None
            if why is not None:
                raise ValueError(why)
        except (ValueError, TypeError, RecursionError) as exc:  # the record must stay serialisable whatever came
            entry = {"effect": _KINDS.get(type(effect), type(effect).__name__)}
            if isinstance(effect, CallLLM):
                entry["purpose"] = effect.request.purpose
            entry["unrecorded"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        if entry is None:
            return
        if error is not None:
            entry = {key: value for key, value in entry.items() if key in ("effect", "purpose", "name", "reference")}
            entry["raised"] = {"type": type(error).__name__, "message": str(error)}
        self.entries.append(entry)

    def _entry(self, effect: Effect, answer: Any) -> dict[str, Any] | None:
        if isinstance(effect, CallLLM):
            reply = answer.response.model_dump(mode="json", exclude_none=True) if isinstance(answer, LLMResult) else {}
            update = (reply.get("transition") or {}).get("context_update")
            if self.secrets and isinstance(update, dict):
                reply["transition"]["context_update"] = masked(update, self.secrets)
            return {"effect": "llm", "purpose": effect.request.purpose, "reply": reply}
        if isinstance(effect, CallHook):
            return {"effect": "hook", "name": effect.name, "answer": _jsonable(answer, self.secrets)}
        if isinstance(effect, LoadDefinition):
            return {"effect": "definition", "fsm_id": effect.fsm_id, "version": _version(answer)}
        if isinstance(effect, LoadFlow):
            reference, definition = answer if isinstance(answer, tuple) else (None, None)
            if self.mask_flows and isinstance(definition, FSMDefinition):
                self.secrets |= set(_secrets(definition))
            return {
                "effect": "flow",
                "name": effect.declaration.name,
                "reference": reference,
                "version": _version(definition),
            }
        if isinstance(effect, AwaitMessage):
            message = answer.response.message if isinstance(answer, LLMResult) else None
            return {"effect": "message", "text": message}
        if isinstance(effect, CallRetriever):
            return {"effect": "retrieval", "name": effect.name, "answer": retrieval_result_data(answer)}
        return None  # Decided is answered with nothing; CallAction's results are kept by key (``_action_results``)


MAX_RECORDED_DEPTH = 2 * MAX_VALUE_DEPTH
"""Nesting of an answer the tape writes down: the engine refuses context values deeper than ``MAX_VALUE_DEPTH``,
but a model, a hook or an action may answer deeper, and the record that holds the answer (some ten levels more)
must stay under what JSON encoders take (about 250)."""


def unrecordable(value: Any, limit: int = 0) -> str | None:
    """Why JSON-shaped ``value`` cannot be kept in a record, else None: it nests deeper than ``limit`` levels
    (default ``MAX_RECORDED_DEPTH``), or holds text that is not valid Unicode (a lone surrogate a model wrote,
    which the engine refuses as a value but no store can encode). Walked without recursion: any depth is safe."""
    limit = limit or MAX_RECORDED_DEPTH
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return "text that is not valid Unicode"
            continue
        if isinstance(item, dict):
            children: list[Any] = [*item.keys(), *item.values()]
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return f"nested deeper than {limit} levels"
        stack.extend((child, depth + 1) for child in children)
    return None


_KINDS: dict[type, str] = {
    CallLLM: "llm",
    CallHook: "hook",
    LoadDefinition: "definition",
    LoadFlow: "flow",
    AwaitMessage: "message",
    CallRetriever: "retrieval",
}


def retrieval_result_data(result: Any) -> dict[str, Any]:
    """A retriever's answer as the tape keeps it: every snippet whole (the prompt held them), or the failure."""
    if not isinstance(result, RetrievalResult):
        return {"error": f"not a RetrievalResult: {type(result).__name__}"}
    if not result.ok:
        return {"error": result.error, "timed_out": result.timed_out}
    return {"snippets": [dataclasses.asdict(snippet) for snippet in result.snippets]}


def retrieval_result_of(data: Any) -> RetrievalResult | None:
    """The ``RetrievalResult`` ``retrieval_result_data`` wrote down; None for data it did not write."""
    if not isinstance(data, dict):
        return None
    if data.get("error") is not None:
        return RetrievalResult(error=str(data["error"]), timed_out=bool(data.get("timed_out")))
    snippets = data.get("snippets")
    if not isinstance(snippets, list):
        return None
    try:
        return RetrievalResult(snippets=tuple(Snippet(**snippet) for snippet in snippets))
    except TypeError:
        return None


class _ClockReading:
    """The application's clock, remembering what it said (the engine reads it at most once a turn)."""

    def __init__(self, clock: Callable[[], dt.datetime] | None) -> None:
        self.clock = clock
        self.reading: str | None = None

    def __call__(self) -> dt.datetime:
        assert self.clock is not None
        instant = self.clock()
        self.reading = instant.isoformat()
        return instant


def action_result_data(result: ActionResult, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """An action's result as JSON data (a ``HandOff`` as ``{"handoff": reason}``; a value the record could not
    hold as ``{"unrecorded": why}``, which makes the turn not recomputable rather than the record unsavable)."""
    if isinstance(result.value, HandOff):
        return {"handoff": result.value.reason}
    if result.error is not None:
        return {"error": result.error, "timed_out": result.timed_out}
    try:
        value = _jsonable(result.value, set(secrets))
    except (ValueError, TypeError, RecursionError) as exc:
        return {"unrecorded": f"{type(exc).__name__}: {str(exc)[:200]}"}
    why = unrecordable(value)
    if why is not None:
        return {"unrecorded": why}
    return {"value": value}


def action_result_of(data: dict[str, Any]) -> ActionResult | None:
    """The ``ActionResult`` ``action_result_data`` wrote down; None for one it could not hold."""
    if "unrecorded" in data:
        return None
    if "handoff" in data:
        return ActionResult(value=HandOff(reason=str(data["handoff"])))
    if "error" in data:
        return ActionResult(error=str(data["error"]), timed_out=bool(data.get("timed_out")))
    return ActionResult(value=data.get("value"))


def action_memo_key(effect: CallAction, label: str) -> str:
    """The key ``inputs.actions`` files a call's result under: the action's place and its inputs' fingerprint."""
    prefix = f"{effect.call.conversation_id}:{label}:"
    key = effect.call.idempotency_key
    key = key[len(prefix) :] if key.startswith(prefix) else key
    return f"{key}:{_fingerprint(effect.arguments)}"


def _action_results(memo: ActionMemo, conversation_id: str, secrets: set[str]) -> dict[str, dict[str, Any]]:
    prefix = f"{conversation_id}:{memo.turn}:"
    return {
        (key[len(prefix) :] if key.startswith(prefix) else key): action_result_data(result, secrets)
        for key, result in memo.results.items()
    }


def _version(definition: Any) -> str | None:
    return definition.content_hash if isinstance(definition, FSMDefinition) else None


def _secrets(definition: FSMDefinition) -> tuple[str, ...]:
    return tuple(key for key, declaration in (definition.context_keys or {}).items() if declaration.sensitive)


def _jsonable(value: Any, secrets: set[str]) -> Any:
    """``value`` as JSON data (a model dumped, anything else JSON cannot hold as its text); sensitive keys of a
    mapping masked."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value  # most hooks answer nothing: no round trip for them
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    data = json.loads(json.dumps(value, default=str, ensure_ascii=False))
    if secrets and isinstance(data, dict):
        return masked(data, secrets)
    return data


__all__ = [
    "SNAPSHOT_EXCLUDE",
    "Tape",
    "action_memo_key",
    "action_result_data",
    "action_result_of",
    "masked",
    "recorded_human_turn",
    "recorded_turn",
    "snapshot",
]
