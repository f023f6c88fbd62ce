"""The conversation operations as generators of effects: start, turn, application write, read — and the one
compare-and-set loop every change goes through.

Written once for every driver: an operation says what it needs (``yield LoadConversation(...)``) and never
how it is done, so the sync, async and streaming paths (and the operator's changes, in ``_operator.py``)
share the same retries, the same accounting of lost attempts and the same definition checks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._actions import ActionMemo
from llm_fsm.engine._context import apply_update
from llm_fsm.engine._handoff import conversation_ended
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._languages import check_language
from llm_fsm.engine._messages import UserMessage
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._provenance import between_turns, note
from llm_fsm.engine._records import ActionRecord
from llm_fsm.engine._tape import recorded_human_turn, recorded_turn
from llm_fsm.engine._transitions import refused_writes
from llm_fsm.engine._turn import Decided, EngineConfig, LoadDefinition, LoadFlow, TurnOutcome, run_opening
from llm_fsm.engine._values import KeyPolicy
from llm_fsm.errors import ConcurrentUpdateError, DefinitionError
from llm_fsm.runtime._actions import ActionRegistry
from llm_fsm.runtime._effects import LoadActiveDefinition, LoadConversation, SaveConversation
from llm_fsm.runtime._performer import Ledger

logger = logging.getLogger(__name__)

_R = TypeVar("_R")
_V = TypeVar("_V")

Operation = Generator[Any, Any, _R]


@dataclass(frozen=True)
class Unchanged(Generic[_V]):
    """What a change returns when it found nothing to do (a retried message id): ``value``, and nothing saved."""

    value: _V


Change = Callable[[FSMInstance], Operation[Any]]
"""A change to a loaded conversation: a generator that may yield effects (a definition, a sub-flow, the model)."""


def compare_and_set(
    retries: int, load: LoadConversation, change: Change, ledger: Ledger | None = None
) -> Operation[Any]:
    """Load, change, save if the version is still the one loaded; a lost race loads the new version and changes
    it again (up to ``retries`` times, then ``ConcurrentUpdateError``). The one retry loop of turns, application
    writes and operator changes."""
    for attempt in range(retries + 1):
        if ledger is not None:
            ledger.new_attempt()
        instance = yield load
        expected = instance.version
        result = yield from change(instance)
        if isinstance(result, Unchanged):
            return result.value
        try:
            yield SaveConversation(instance, expected, load.message_id)
        except ConcurrentUpdateError:
            if attempt == retries:
                raise
            logger.info("conversation %s changed under us; running the change again", load.conversation_id)
            continue
        return result
    raise AssertionError("unreachable")  # pragma: no cover


def read(load: LoadConversation) -> Operation[FSMInstance]:
    instance: FSMInstance = yield load
    return instance


# --- starting ----------------------------------------------------------------------------------------------


def checking_actions(actions: ActionRegistry, definition: FSMDefinition) -> Operation[None]:
    """Refuse a conversation whose definition, or a sub-flow it can start however deep, calls unregistered
    actions: it would fail mid-way (``ActionRegistry.require``, each sub-flow once).

    A sub-flow that cannot be loaded is skipped here: starting it is refused in the turn that asks for it.
    """
    actions.require(definition)
    seen: set[str] = set()
    pending = [(definition, "")]
    while pending:
        parent, path = pending.pop()
        declarations = [d for state in parent.states for d in parent.flows_for(state)]
        for declaration in {(d.name, d.definition): d for d in declarations}.values():
            try:
                reference, child = yield LoadFlow(declaration, parent)
            except DefinitionError:
                continue
            if reference in seen:
                continue
            seen.add(reference)
            via = f"{path} → {declaration.name}"
            actions.require(child, via=f" (sub-flow {definition.name}{via})")
            pending.append((child, via))


@dataclass
class Opening:
    """What starting a conversation needs besides the definition."""

    actions: ActionRegistry
    builder: PromptBuilder
    config: EngineConfig
    schema_sent: bool
    new_instance: Callable[[Any, FSMDefinition], FSMInstance]
    given: dict[str, FSMDefinition]


def starting(
    opening: Opening,
    fsm_id: Any,
    initial_context: Mapping[str, Any] | None,
    version: str | None = None,
    language: str | None = None,
) -> Operation[tuple[str, str]]:
    definition: FSMDefinition = yield LoadDefinition(fsm_id, version, exact=version is not None)
    language = check_language(definition, language)  # before anything runs: an unknown language starts nothing
    if isinstance(fsm_id, FSMDefinition):
        opening.given[definition.name] = definition
    yield from checking_actions(opening.actions, definition)
    instance = opening.new_instance(fsm_id, definition)
    instance.language = language
    outcome = yield from run_opening(
        definition, instance, opening.builder, opening.config, initial_context, schema_sent=opening.schema_sent
    )
    yield SaveConversation(instance, None)
    return instance.conversation_id, outcome.reply


# --- a turn --------------------------------------------------------------------------------------------------


@dataclass
class TurnRequest:
    """One user message to one conversation, as the caller sent it (already checked)."""

    conversation_id: str
    message: UserMessage
    message_id: str | None
    user_id: str | None
    room_id: str | None


class _TurnAttempts:
    """The change a turn makes, attempt after attempt: what the attempts share is the action memo (an action
    that ran in a lost attempt is reused, not called again) and what a lost attempt did that the saved one
    must still record (its model calls, its action calls)."""

    def __init__(
        self, request: TurnRequest, builder: PromptBuilder, config: EngineConfig, schema_sent: bool, ledger: Ledger
    ) -> None:
        self.request = request
        self.builder = builder
        self.config = config
        self.schema_sent = schema_sent
        self.ledger = ledger
        self.memo = ActionMemo()
        self.unsaved_actions: list[ActionRecord] = []

    def __call__(self, instance: FSMInstance) -> Operation[Any]:
        request = self.request
        message_id = request.message_id
        if message_id is not None and message_id in instance.processed_messages:
            # a retried delivery: answered once; a streaming client gets its state event before the reply, as the
            # first delivery did (the turn's own record is in the turn log, not in this hot record: "duplicate")
            yield Decided(state=instance.current_state, verdict="duplicate", ended=instance.ended)
            return Unchanged(
                TurnOutcome(
                    reply=instance.processed_messages[message_id],
                    state=instance.current_state,
                    ended=instance.ended,
                    mode=instance.mode,
                )
            )
        if instance.ended:
            raise conversation_ended(instance)
        definition: FSMDefinition = yield LoadActiveDefinition(instance)
        if instance.mode == "human":  # a person has it: record the message, call no model and no hook
            outcome = recorded_human_turn(definition, instance, request.message, self.config, message_id=message_id)
            yield Decided(state=outcome.state, verdict="human_mode", ended=False)
        else:
            outcome = yield from recorded_turn(
                definition,
                instance,
                request.message,
                self.builder,
                self.config,
                message_id=message_id,
                schema_sent=self.schema_sent,
                action_memo=self.memo,
            )
        self._settle(instance, outcome)
        return outcome

    def _settle(self, instance: FSMInstance, outcome: TurnOutcome) -> None:
        """Count and record what earlier, lost attempts spent; remember what this one did, should it lose too."""
        record = outcome.record
        if not self.unsaved_actions and self.ledger.settled == self.ledger.attempt_started:
            if record is not None and record.actions:  # the first attempt: remember what it did, should it lose
                self.unsaved_actions = [a for a in record.actions if a.outcome not in ("replayed", "skipped")]
            return
        lost_calls = self.ledger.lost()
        for call in lost_calls:
            instance.usage.add(call)
        if record is None:
            return
        reused = {(a.call, a.state, a.when) for a in record.actions if a.outcome == "replayed"}
        carried = [a for a in self.unsaved_actions if (a.call, a.state, a.when) not in reused]
        mine = [a for a in record.actions if a.outcome not in ("replayed", "skipped")]
        if lost_calls:
            record.llm_calls[:0] = [c.model_copy(update={"lost_attempt": True}) for c in lost_calls]
        if carried:
            record.actions[:0] = [a.model_copy(update={"lost_attempt": True}) for a in carried]
            instance.add_trace(
                "lost_attempt_actions",
                {"calls": [a.call for a in carried], "turn": record.index},
                self.config.max_trace_events,
            )
        self.unsaved_actions = carried + mine


def turn(
    request: TurnRequest,
    builder: PromptBuilder,
    config: EngineConfig,
    *,
    schema_sent: bool,
    retries: int,
    ledger: Ledger,
) -> Operation[TurnOutcome]:
    """Load, run the turn, save with compare-and-set; on a lost race, run it again on the new version."""
    load = LoadConversation(request.conversation_id, request.user_id, request.room_id, request.message_id)
    attempts = _TurnAttempts(request, builder, config, schema_sent, ledger)
    outcome: TurnOutcome = yield from compare_and_set(retries, load, attempts, ledger)
    _log_refusals(request.conversation_id, outcome)
    return outcome


def _log_refusals(conversation_id: str, outcome: TurnOutcome) -> None:
    """What the engine refused, at WARNING, with ids and rules only: never the user's text or a value."""
    record = outcome.record
    if record is None or not logger.isEnabledFor(logging.WARNING):
        return
    if record.verdict.kind == "stay_rejected":
        # the reason names states, transitions and conditions (definition text), after the refused writes, whose
        # reasons quote the refused values: those are left out here (the next line names their keys and rules)
        reason = record.verdict.reason
        writes = refused_writes(record.context_changes)
        if writes and reason.startswith(writes + "; "):
            reason = reason[len(writes) + 2 :]
        logger.warning(
            "conversation %s: turn %d: %s refused in state %r (%s)",
            conversation_id,
            record.index,
            "proposal " + repr(record.proposal) if record.proposal else f"intent {record.intent!r}",
            record.state_before,
            reason if len(reason) <= 300 else reason[:297] + "...",
        )
    refused = [(c.key, c.rule) for c in record.context_changes if not c.applied and c.rule is not None]
    if refused:
        logger.warning(
            "conversation %s: turn %d: values refused: %s",
            conversation_id,
            record.index,
            ", ".join(f"{key} ({rule})" for key, rule in refused),
        )


# --- the application's writes ----------------------------------------------------------------------------


def context_update(updates: Mapping[str, Any], config: EngineConfig) -> Change:
    """``update_context``: the application's write, checked against the declarations of the definition the
    conversation may run on (the ``on_definition_change`` policy applies), recorded in the bounded trail."""

    def change(instance: FSMInstance) -> Operation[dict[str, Any]]:
        definition: FSMDefinition = yield LoadActiveDefinition(instance)
        policy = KeyPolicy(definition) if definition.context_keys else None
        changes = apply_update(
            instance.context.data, updates, source="application", max_bytes=config.max_context_bytes, policy=policy
        )
        note(instance, changes, between_turns("application", hook="update_context"))
        instance.add_trace(
            "context_update", {"source": "application", "keys": [c.key for c in changes]}, config.max_trace_events
        )
        return instance.context.data

    return change


def ending(config: EngineConfig) -> Change:
    def change(instance: FSMInstance) -> Operation[None]:
        if instance.status == "active":
            instance.status = "ended"
            instance.add_trace(
                "end", {"state": instance.current_state, "reason": "ended by the application"}, config.max_trace_events
            )
        yield from ()

    return change


__all__ = [
    "Change",
    "Opening",
    "TurnRequest",
    "Unchanged",
    "checking_actions",
    "compare_and_set",
    "context_update",
    "ending",
    "read",
    "starting",
    "turn",
]
