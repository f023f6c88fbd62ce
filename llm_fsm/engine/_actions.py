"""Running the actions a state declares, as effects: which run, with what, and what their results do.

Pure like the rest of the turn: the engine decides that an action runs and with which values, yields a
``CallAction`` effect, and the runtime (its performer, with ``llm_fsm.actions``) calls the
application's function with its timeout and answers an ``ActionResult``. A failure never raises out of
the driver: it comes back as data, so the engine applies the action's ``on_error`` the same way whether
the function raised, timed out or returned a result without a declared field.

A turn that runs again because its save lost a compare-and-set race passes the same ``memo``: the
function's result is reused (recorded as ``replayed``), so a retried turn never books twice.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.definition._actions import DEFAULT_TIMEOUT_S, ON_ERROR_FAIL, ON_ERROR_HANDOFF, ActionDeclaration
from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.engine._context import _MISSING, apply_update, get_path, has_value
from llm_fsm.engine._data import copy_json
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._provenance import Origin, in_turn, note
from llm_fsm.engine._records import ActionOutcome, ActionRecord, ContextChange, Verdict
from llm_fsm.engine._values import MASK, KeyPolicy, _mask_path
from llm_fsm.errors import ActionError, ContextError


@dataclass(frozen=True)
class ActionCall:
    """What the function may want to know besides its inputs (passed when it takes a parameter named ``call``)."""

    name: str
    state: str
    when: str
    conversation_id: str
    fsm_id: str
    message_id: str | None
    idempotency_key: str
    """Stable for one declared action in one turn, even when the turn runs again: a backend that takes an
    idempotency key (a payment, a booking) can use it to do the work once across processes too."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """The declared timeout, after which the call counts as failed and is abandoned: a function that waits on a
    backend (an MCP server, an HTTP API) gives its own request this deadline, so nothing runs on after it."""


@dataclass(frozen=True)
class HandOff:
    """What an action returns to hand the conversation to a person (``from llm_fsm.actions import HandOff``):
    the order system says "refund over the limit", so a person should take it from here. No outputs are
    written; the reply for the state is still given, then a person has the conversation."""

    reason: str = "an action handed the conversation to a person"


@dataclass(frozen=True)
class CallAction:
    """Effect: call the registered function ``call.name`` with ``arguments``; the driver answers an ActionResult."""

    call: ActionCall
    arguments: dict[str, Any]
    timeout_s: float


@dataclass(frozen=True)
class ActionResult:
    """What a call gave: its value, or why it failed (``error`` set). Never an exception."""

    value: Any = None
    error: str | None = None
    timed_out: bool = False
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class ActionsRun:
    """What running one batch of actions did."""

    changes: list[ContextChange] = field(default_factory=list)
    records: list[ActionRecord] = field(default_factory=list)
    failure: ActionRecord | None = None
    """The failed action's record (then ``on_error`` says what to do); the batch stopped there."""
    handoff: str | None = None
    """Why a person should take over: an action returned ``HandOff``, or failed with ``on_error: handoff``;
    the batch stopped there."""

    @property
    def stopped(self) -> bool:
        return self.failure is not None or self.handoff is not None

    def extend(self, other: ActionsRun) -> None:
        self.changes += other.changes
        self.records += other.records
        self.failure = self.failure or other.failure
        self.handoff = self.handoff or other.handoff


@dataclass
class ActionMemo:
    """What the attempts of one turn (or opening) share: the results by idempotency key and inputs, and the
    turn's label in those keys.

    The label is fixed by the first attempt: the turn's ``message_id``, else a random one. A label computed
    from the conversation (its turn count) would change when another worker's turn is saved first (the very
    race a re-run answers, so the result would not be found and the backend called twice), and would be the
    same for the opening and the first turn."""

    results: dict[str, ActionResult] = field(default_factory=dict)
    turn: str | None = None

    def turn_label(self, message_id: str | None) -> str:
        if self.turn is None:
            self.turn = message_id or f"t-{uuid.uuid4().hex[:12]}"
        return self.turn


def _fingerprint(arguments: Mapping[str, Any]) -> str:
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def action_key(state: State, index: int, action: ActionDeclaration) -> str:
    return f"{state.id}#{index}:{action.call}"


def _masked(definition: FSMDefinition, path: str, value: Any) -> Any:
    """``value`` at ``path`` as people may see it: masked when its key is sensitive, and an object with the
    sensitive keys declared inside it (``customer`` holding ``customer.card``) masked there."""
    found = definition.declaration_for(path)
    if found and found[1].sensitive:
        return MASK
    if isinstance(value, dict):
        for key, declaration in (definition.context_keys or {}).items():
            if declaration.sensitive and key.startswith(path + "."):
                value = _mask_path(value, key[len(path) + 1 :])
    return value


def _masked_inputs(definition: FSMDefinition, action: ActionDeclaration, arguments: dict[str, Any]) -> dict[str, Any]:
    return {name: _masked(definition, (action.inputs or {})[name], value) for name, value in arguments.items()}


def _masked_outputs(definition: FSMDefinition, outputs: dict[str, Any]) -> dict[str, Any]:
    return {path: _masked(definition, path, value) for path, value in outputs.items()}


def _masked_error(definition: FSMDefinition, action: ActionDeclaration, arguments: dict[str, Any], error: str) -> str:
    """An error's text with the values of sensitive inputs masked: a backend's message often quotes its arguments."""
    for name, value in arguments.items():
        shown = _masked(definition, (action.inputs or {})[name], value)
        if shown is MASK and isinstance(value, (str, int, float)) and len(str(value)) >= 3:
            error = error.replace(str(value), MASK)
    return error


def _policy(definition: FSMDefinition) -> KeyPolicy | None:
    if not definition.context_keys and definition.additional_keys:
        return None
    return KeyPolicy(definition)


def _as_mapping(value: Any) -> Mapping[str, Any] | None:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)  # a pydantic model
    if callable(dump):
        dumped = dump(mode="json")
        return dumped if isinstance(dumped, Mapping) else None
    return None


def _write_outputs(
    definition: FSMDefinition, instance: FSMInstance, action: ActionDeclaration, value: Any, max_bytes: int
) -> tuple[list[ContextChange], dict[str, Any]] | str:
    """The declared outputs written as application writes, all or none; a problem is returned as text."""
    if not action.outputs:
        return [], {}
    result = _as_mapping(value)
    if result is None:
        return f"the result is {type(value).__name__}, not a mapping with fields {sorted(set(action.outputs.values()))}"
    additions: dict[str, Any] = {}
    for path, name in action.outputs.items():
        if name not in result:
            return f"the result has no field {name!r} (outputs: {path} ← {name})"
        additions[path] = result[name]
    data = copy_json(instance.context.data)
    try:
        changes = apply_update(data, additions, source="application", max_bytes=max_bytes, policy=_policy(definition))
    except ContextError as exc:
        return f"an output was refused: {exc}"
    instance.context.data = data
    note(instance, changes, Origin(by="action", call=action.call, turn=in_turn(instance)))
    return changes, additions


def run_actions(
    definition: FSMDefinition,
    instance: FSMInstance,
    state: State,
    when: str,
    *,
    message_id: str | None,
    memo: ActionMemo,
    max_bytes: int,
) -> Generator[CallAction, ActionResult, ActionsRun]:
    """Run ``state``'s actions declared for ``when``, in order; stop at the first failure.

    ``collected`` actions run when every input has a value and those values differ from the ones the
    action last ran with during this visit (``instance.action_runs``); ``enter``/``exit`` actions run every
    time, and are recorded as skipped when an input has no value.
    """
    run = ActionsRun()
    for index, action in enumerate(state.actions or ()):
        if action.when != when:
            continue
        inputs = action.inputs or {}
        missing = [path for path in inputs.values() if not has_value(instance.context.data, path)]
        key = action_key(state, index, action)
        run_key = f"{instance.flow_id}/{key}"  # a sub-flow may name its states like its parent's
        if missing:
            if when != "collected":
                run.records.append(
                    ActionRecord(
                        call=action.call,
                        state=state.id,
                        when=when,
                        outcome="skipped",
                        error=f"no value for {', '.join(missing)}",
                    )
                )
            continue
        arguments = {
            name: copy_json(value)
            for name, path in inputs.items()
            if (value := get_path(instance.context.data, path)) is not _MISSING
        }
        fingerprint = _fingerprint(arguments)
        if when == "collected" and instance.action_runs.get(run_key) == fingerprint:
            continue
        idempotency_key = f"{instance.conversation_id}:{memo.turn_label(message_id)}:{key}"
        memo_key = f"{idempotency_key}:{fingerprint}"
        replayed = memo_key in memo.results
        if replayed:
            result = memo.results[memo_key]
        else:
            call = ActionCall(
                name=action.call,
                state=state.id,
                when=when,
                conversation_id=instance.conversation_id,
                fsm_id=instance.fsm_id,
                message_id=message_id,
                idempotency_key=idempotency_key,
                timeout_s=action.timeout_s,
            )
            result = yield CallAction(call=call, arguments=arguments, timeout_s=action.timeout_s)
            memo.results[memo_key] = result
        if when == "collected":
            instance.action_runs[run_key] = fingerprint
        error = result.error
        written: tuple[list[ContextChange], dict[str, Any]] | str = ([], {})
        if error is None and isinstance(result.value, HandOff):
            run.records.append(
                ActionRecord(
                    call=action.call,
                    state=state.id,
                    when=when,
                    inputs=_masked_inputs(definition, action, arguments),
                    outcome="handoff",
                    error=None,
                    duration_ms=0.0 if replayed else round(result.duration_ms, 3),
                )
            )
            run.handoff = f"action {action.call!r}: {result.value.reason}"
            return run
        if error is None:
            written = _write_outputs(definition, instance, action, result.value, max_bytes)
            if isinstance(written, str):
                error = written
        if error is not None:
            error = _masked_error(definition, action, arguments, error)
            outcome: ActionOutcome = "timeout" if result.timed_out else "error"
        else:
            outcome = "replayed" if replayed else "ok"
        record = ActionRecord(
            call=action.call,
            state=state.id,
            when=when,
            inputs=_masked_inputs(definition, action, arguments),
            outputs=_masked_outputs(definition, written[1]) if not isinstance(written, str) else {},
            outcome=outcome,
            error=error,
            on_error=action.on_error if error is not None else None,
            duration_ms=0.0 if replayed else round(result.duration_ms, 3),
        )
        run.records.append(record)
        if error is not None and action.on_error == ON_ERROR_HANDOFF:
            # the failure's text stays in the record: the handoff's reason is read by people and shown in the CLI
            run.handoff = f"action {action.call!r} failed ({outcome}); on_error hands off"
            return run
        if error is not None:
            run.failure = record
            return run
        assert not isinstance(written, str)
        run.changes += written[0]
    return run


@dataclass
class ActionScope:
    """What the actions of one turn (or opening) share: the memo across attempts, the records, the limits."""

    message_id: str | None
    memo: ActionMemo
    max_bytes: int
    max_trace_events: int
    records: list[ActionRecord] = field(default_factory=list)
    redirected: bool = False
    """An ``on_error`` state was already entered this turn: a second failure raises instead of looping."""
    failed_in: str | None = None
    """The state whose collected or exit action failed, when ``redirected``: an ``on_error`` naming it keeps the
    conversation there."""
    handoff: str | None = None
    """Set when an action asked for a person (see ``ActionsRun.handoff``); the turn hands off at its end."""


def _trace(instance: FSMInstance, scope: ActionScope, event: str, **data: Any) -> None:
    instance.add_trace(event, data, scope.max_trace_events)


def run_for(
    definition: FSMDefinition, instance: FSMInstance, state: State, when: str, scope: ActionScope
) -> Generator[CallAction, ActionResult, ActionsRun]:
    """``run_actions`` for one turn: records kept in the scope, each run traced."""
    if not state.actions:
        return ActionsRun()
    run = yield from run_actions(
        definition, instance, state, when, message_id=scope.message_id, memo=scope.memo, max_bytes=scope.max_bytes
    )
    scope.records += run.records
    scope.handoff = scope.handoff or run.handoff
    for record in run.records:
        _trace(
            instance,
            scope,
            "action",
            call=record.call,
            state=record.state,
            when=record.when,
            outcome=record.outcome,
            duration_ms=record.duration_ms,
            **({"error": record.error, "on_error": record.on_error} if record.error else {}),
        )
    return run


def arrive(
    definition: FSMDefinition, instance: FSMInstance, source: State | None, target: State, scope: ActionScope
) -> Generator[CallAction, ActionResult, ActionsRun]:
    """A move from ``source`` to ``target`` inside one flow: ``exit`` actions of the source (a self-loop leaves
    and enters again), then ``enter`` and ``collected`` actions of the target. Stops at the first failure."""
    run = ActionsRun()
    if source is not None:
        run.extend((yield from run_for(definition, instance, source, "exit", scope)))
        forget_visit(instance, source.id)
        if run.stopped:
            return run
    run.extend((yield from run_for(definition, instance, target, "enter", scope)))
    if not run.stopped:
        run.extend((yield from run_for(definition, instance, target, "collected", scope)))
    return run


def redirect(definition: FSMDefinition, failure: ActionRecord, scope: ActionScope) -> Verdict:
    """The move a failed action's ``on_error`` asks for, when it names a state (the caller moves, and runs that
    state's ``enter`` and ``collected`` actions without the source's ``exit`` ones).

    ``fail`` raises ``ActionError``, and so does a second failure in one turn: an error state whose own action
    fails must not bounce the conversation around.
    """
    target_id = error_target(failure)
    if target_id == ON_ERROR_FAIL or scope.redirected:
        raise failure_error(failure)
    if target_id not in definition.states:
        raise ActionError(
            f"action {failure.call!r} in state {failure.state!r} failed ({failure.error}), and its on_error names "
            f"state {target_id!r}, which {definition.name!r} does not declare",
            action=failure.call,
            state=failure.state,
        )
    scope.redirected = True
    # a collected (or exit) action may keep the conversation in its state; an enter action's failure sent back into
    # its own state stays a second failure that raises (what fsm-lint's FSM036 warns of)
    scope.failed_in = failure.state if failure.when != "enter" else None
    # the failure's text stays in the action record: it may name hosts or internals the model must not repeat
    return Verdict(
        kind="action_error",
        target_state=target_id,
        reason=f"the backend call {failure.call!r} failed; its on_error leads to {target_id!r}",
    )


def forget_visit(instance: FSMInstance, state_id: str) -> None:
    """Leaving a state of the active flow: its ``collected`` actions run again on the next visit. Runs of flows no
    longer on the stack (finished or cancelled) are dropped too, so the record does not grow with sub-flows."""
    prefix = f"{instance.flow_id}/{state_id}#"
    live = {instance.flow_id, *(frame.flow_id for frame in instance.flow_stack)}
    for key in [k for k in instance.action_runs if k.startswith(prefix) or k.split("/", 1)[0] not in live]:
        del instance.action_runs[key]


def failure_error(record: ActionRecord) -> ActionError:
    """The typed error of an action whose ``on_error`` is ``fail`` (or whose on_error could not be applied)."""
    return ActionError(
        f"action {record.call!r} ({record.when}) in state {record.state!r} failed: {record.error}",
        action=record.call,
        state=record.state,
    )


def error_target(record: ActionRecord) -> str:
    """``on_error`` of a failed action: 'fail', 'handoff' or a state id."""
    return record.on_error or ON_ERROR_FAIL


def registered_names(definition: FSMDefinition) -> set[str]:
    """Every action name a definition's states call, their timers' included."""
    names = {action.call for state in definition.states.values() for action in state.actions or ()}
    for state in definition.states.values():
        names |= {entry.action_declaration.call for entry in state.after or () if entry.action_declaration}
    return names


__all__ = [
    "HandOff",
    "ActionCall",
    "ActionScope",
    "ActionMemo",
    "ActionResult",
    "ActionsRun",
    "CallAction",
    "ON_ERROR_FAIL",
    "ON_ERROR_HANDOFF",
    "error_target",
    "failure_error",
    "forget_visit",
    "arrive",
    "redirect",
    "registered_names",
    "run_actions",
    "run_for",
]
