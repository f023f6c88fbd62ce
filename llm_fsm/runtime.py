"""Models of a running conversation, and of what one turn decided.

Everything here is plain data: a store can save an ``FSMInstance`` as JSON and
another process can load it and carry on. Nothing here does I/O.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MAX_HISTORY_SIZE = 5
"""Exchanges (user message + reply) shown to the model in the prompt window."""

DEFAULT_MAX_MESSAGE_LENGTH = 1000
"""Characters of each message shown to the model; longer ones are cut in the prompt."""

DEFAULT_MAX_STORED_MESSAGES = 50
"""Messages kept in the stored transcript (the Soni seed's ``max_history_messages``); older ones go to the store's archive."""

DEFAULT_MAX_COMPLETED_FLOWS = 10
"""Completed or cancelled sub-flows kept, with their outputs, in the conversation's archive."""

DEFAULT_MAX_FLOW_DEPTH = 5
"""Flows that can be stacked (the root included) before starting another is refused."""

DEFAULT_MAX_TURN_RECORDS = 50
"""Turn records (explain data) kept per conversation."""

DEFAULT_MAX_CONTEXT_BYTES = 10_000
"""Size cap of the context data, as compact JSON (the Mathia seed's limit)."""

ConversationStatus = Literal["active", "ended", "cancelled"]


def copy_json(value: Any) -> Any:
    """A copy of JSON-shaped data (dicts and lists copied, everything else shared): ~4x faster than deepcopy."""
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) for key, item in value.items()}
    if kind is list:
        return [copy_json(item) for item in value]
    return value


def _replace(model: _M, **changes: Any) -> _M:
    """A shallow copy of a runtime model with some fields replaced.

    What ``model_copy(update=...)`` does, without its three ``copy.copy`` calls:
    this runs twice per turn on every field of the conversation, and the
    runtime models carry neither extra fields nor private attributes.
    """
    cls = type(model)
    new = cls.__new__(cls)
    values = model.__dict__.copy()
    values.update(changes)
    object.__setattr__(new, "__dict__", values)
    object.__setattr__(new, "__pydantic_fields_set__", set(model.__pydantic_fields_set__))
    object.__setattr__(new, "__pydantic_extra__", None)
    object.__setattr__(new, "__pydantic_private__", None)
    return new


def new_conversation_id() -> str:
    """Random, unguessable ids: knowing one conversation id reveals nothing about another."""
    return str(uuid.uuid4())


def now() -> float:
    return time.time()


class _Data(BaseModel):
    model_config = ConfigDict(extra="ignore")


_M = TypeVar("_M", bound=_Data)


# --- the seed's runtime models ---------------------------------------------------


class Conversation(_Data):
    """The transcript. ``exchanges`` holds one dict per message: ``{"user": text}`` or ``{"assistant": text}``."""

    exchanges: list[dict[str, str]] = Field(default_factory=list)
    max_history_size: int = DEFAULT_MAX_HISTORY_SIZE
    max_message_length: int = DEFAULT_MAX_MESSAGE_LENGTH
    archived_messages: int = Field(
        default=0, description="Messages moved out of `exchanges` into the store's archive."
    )

    def add_user_message(self, text: str) -> None:
        self.exchanges.append({"user": text})

    def add_assistant_message(self, text: str) -> None:
        self.exchanges.append({"assistant": text})

    def window(self, size: int | None = None) -> list[tuple[str, str]]:
        """The last ``size`` (default ``max_history_size``) exchanges as (role, text), each cut to ``max_message_length``."""
        keep = (self.max_history_size if size is None else size) * 2
        recent = self.exchanges[-keep:] if keep > 0 else []
        out: list[tuple[str, str]] = []
        for entry in recent:
            for role, text in entry.items():
                if len(text) > self.max_message_length:
                    text = text[: self.max_message_length] + "…"
                out.append((role, text))
        return out


class FSMContext(_Data):
    """What the conversation knows: collected data, transcript, and metadata for the application."""

    data: dict[str, Any] = Field(default_factory=dict)
    conversation: Conversation = Field(default_factory=Conversation)
    metadata: dict[str, Any] = Field(default_factory=dict)


class StateTransition(_Data):
    """What the model proposes: where to go, and what it extracted from the message."""

    target_state: str
    context_update: dict[str, Any] = Field(default_factory=dict)


class LLMRequest(_Data):
    """One call to a model."""

    system_prompt: str
    user_message: str
    context: dict[str, Any] | None = None
    response_schema: dict[str, Any] | None = Field(
        default=None, description="JSON Schema the reply must follow (structured output)."
    )
    purpose: Literal["turn", "opening", "regenerate"] = "turn"
    context_keys: list[str] | None = Field(
        default=None,
        description=(
            "Keys that matter in this state (to collect, read by its conditions, or already collected). "
            "An LLM edge may close the reply schema to them for small models."
        ),
    )


Intent = Literal["continue", "digression", "cancel", "start_flow", "resume_flow", "confirm", "deny"]


class LLMResponse(_Data):
    """The model's answer, parsed.

    ``intent`` is the model's reading of the message (the one understanding step
    every message goes through): ``continue`` (answers the current step, the
    default), ``digression`` (a side question), ``cancel``, ``start_flow`` /
    ``resume_flow`` (with ``flow``), ``confirm`` / ``deny`` in a confirmation step.
    """

    transition: StateTransition
    message: str
    reasoning: str | None = None
    intent: Intent = "continue"
    flow: str | None = None


@dataclass(frozen=True)
class LLMResult:
    """One model call as the engine sees it: the reply and what it took to get it (for the explain record).

    Lives with the other runtime data (not in ``llm.py``) so the pure turn logic
    can name it without importing the LLM edge.
    """

    response: LLMResponse
    attempts: int = 1
    raw_outputs: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    """Why each rejected attempt was rejected, in order (``attempts - 1`` entries)."""
    response_format: str = "none"
    """The structured-output mode actually used ('user' when the caller set ``response_format`` itself)."""
    usage: Mapping[str, int] = field(default_factory=dict)
    """Token counts summed over all attempts, when the provider reports them."""


# --- explain records -------------------------------------------------------------


class ConditionResult(_Data):
    """How one condition evaluated against the context after the turn's update."""

    description: str
    missing_keys: list[str] = Field(default_factory=list, description="requires_context_keys absent, null or empty.")
    logic_value: Any = None
    logic_missing_vars: list[str] = Field(default_factory=list, description="Variables the rule read that were missing.")
    error: str | None = None
    holds: bool


class TransitionEvaluation(_Data):
    """One declared transition, considered."""

    index: int = Field(default=0, description="Position in the state's `transitions` list.")
    target_state: str
    priority: int
    guarded: bool
    conditions: list[ConditionResult] = Field(default_factory=list)
    eligible: bool


VerdictKind = Literal[
    "proposal_accepted",  # the model's eligible proposal stands
    "guarded_override",  # a guarded transition of strictly higher priority beat the proposal
    "guarded_fallback",  # the proposal was stay or ineligible; an eligible guarded transition fired
    "stay",  # nothing moved
    "stay_rejected",  # the model proposed a move (or a flow action) that is not allowed; stayed
    "digression",  # a side question was answered; state and stack unchanged
    "flow_started",  # a declared sub-flow was pushed (call) or handed over to (link)
    "flow_resumed",  # a paused flow was brought back to the top of the stack
    "flow_cancelled",  # the active sub-flow was cancelled; the one below resumed
    "flow_completed",  # the active sub-flow reached a terminal state; the one below resumed
    "conversation_cancelled",  # the root flow was cancelled: the conversation ended as cancelled
]


class Verdict(_Data):
    """What the engine decided, and why, in words a person can read."""

    kind: VerdictKind
    target_state: str
    reason: str
    transition_index: int | None = Field(
        default=None, description="Index, in the state's `transitions`, of the transition taken (None when staying)."
    )

    @property
    def moved(self) -> bool:
        """A transition inside the active flow was taken."""
        return self.kind in ("proposal_accepted", "guarded_override", "guarded_fallback")


class ContextChange(_Data):
    """One key of a context update and what happened to it."""

    key: str
    value: Any = None
    previous: Any = None
    applied: bool
    reason: str = Field(description="'set', 'corrected', 'removed', or why it was dropped.")


class LLMCallRecord(_Data):
    purpose: str
    attempts: int = 1
    error: str | None = None


class TurnRecord(_Data):
    """Everything one turn did, so any decision can be explained afterwards."""

    index: int
    message_id: str | None = None
    user_message: str
    intent: str = "continue"
    state_before: str
    state_after: str
    flow_before: str = "root"
    flow_after: str = "root"
    proposal: str | None = Field(default=None, description="Target state the model proposed.")
    context_changes: list[ContextChange] = Field(default_factory=list)
    evaluations: list[TransitionEvaluation] = Field(default_factory=list)
    verdict: Verdict
    llm_calls: list[LLMCallRecord] = Field(default_factory=list)
    reply: str
    started_at: float
    finished_at: float


class TraceEvent(_Data):
    """One entry of the audit trail."""

    event: str
    timestamp: float = Field(default_factory=now)
    data: dict[str, Any] = Field(default_factory=dict)


# --- the flow stack ------------------------------------------------------------------

FlowStatus = Literal["active", "paused", "completed", "cancelled", "linked"]


class FlowFrame(_Data):
    """One flow instance: the root conversation or a sub-flow, with its own id and its own data."""

    flow_id: str
    flow_name: str = Field(description="The declared name (the root uses its definition's name).")
    fsm_id: str = Field(description="Definition id or path this flow runs.")
    definition_hash: str | None = None
    current_state: str
    data: dict[str, Any] = Field(default_factory=dict, description="This flow's data while it is paused or archived.")
    status: FlowStatus = "paused"
    mode: Literal["root", "call", "link"] = "root"
    outputs: dict[str, Any] = Field(default_factory=dict)
    output_mapping: dict[str, str] = Field(default_factory=dict, description="Parent key ← this flow's key.")
    started_at: float = Field(default_factory=now)
    paused_at: float | None = None
    completed_at: float | None = None
    reason: str | None = None


def new_flow_id(name: str) -> str:
    """``<name>_<8 hex>``: readable in traces, unique per instance."""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)[:40] or "flow"
    return f"{safe}_{uuid.uuid4().hex[:8]}"


# --- the instance -----------------------------------------------------------------


class FSMInstance(_Data):
    """One running conversation of a definition: everything a store saves."""

    fsm_id: str
    current_state: str
    context: FSMContext = Field(default_factory=FSMContext)
    persona: str | None = None

    conversation_id: str = Field(default_factory=new_conversation_id)
    user_id: str | None = None
    room_id: str | None = None
    definition_hash: str | None = Field(default=None, description="Hash of the definition the conversation started on.")
    status: ConversationStatus = "active"
    version: int = Field(default=0, description="Bumped on every save; stores compare-and-set on it.")
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)
    turn_count: int = 0
    turns: list[TurnRecord] = Field(default_factory=list)
    processed_messages: dict[str, str] = Field(
        default_factory=dict, description="message_id → reply, so a retried message is answered once."
    )
    trace: list[TraceEvent] = Field(default_factory=list)
    flow_id: str = Field(default="root", description="Id of the active flow instance.")
    flow_name: str | None = Field(default=None, description="Name of the active flow (the root's is its definition's name).")
    flow_mode: Literal["root", "call", "link"] = "root"
    flow_started_at: float = Field(default_factory=now)
    flow_output_mapping: dict[str, str] = Field(
        default_factory=dict, description="Parent key ← key of the active sub-flow, applied when it completes."
    )
    flow_stack: list[FlowFrame] = Field(
        default_factory=list, description="Paused flows below the active one, bottom (the root) first."
    )
    completed_flows: list[FlowFrame] = Field(
        default_factory=list, description="Archive of completed and cancelled flows, with their outputs."
    )
    consecutive_digressions: int = 0
    archive_outbox: list[dict[str, str]] = Field(
        default_factory=list,
        description=(
            "Messages pruned from the live transcript this turn. The store appends them to the "
            "conversation's archive on save and empties this list, so no message is silently dropped."
        ),
    )

    @property
    def ended(self) -> bool:
        return self.status != "active"

    @property
    def root_fsm_id(self) -> str:
        """The definition the conversation started on, whichever flow is active now."""
        return self.flow_stack[0].fsm_id if self.flow_stack else self.fsm_id

    @property
    def stack(self) -> list[str]:
        """Names of the sub-flows above the root, oldest first; ``[]`` when the root flow is active."""
        if not self.flow_stack:
            return []
        return [frame.flow_name for frame in self.flow_stack[1:]] + [self.flow_name or self.fsm_id]

    def copy_for_turn(self) -> "FSMInstance":
        """A copy that can be changed freely without touching this instance.

        Cheaper than a deep copy, which matters because it happens on every
        load and save of the memory store: what a turn changes (the context data,
        the lists it appends to, the paused flows) is copied, while records
        already written — turn records, trace events, archived flows, transcript
        messages — are shared, because nothing changes them once written.
        """
        context = self.context
        return _replace(
            self,
            context=_replace(
                context,
                data=copy_json(context.data),
                conversation=_replace(context.conversation, exchanges=list(context.conversation.exchanges)),
                metadata=copy_json(context.metadata),
            ),
            turns=list(self.turns),
            trace=list(self.trace),
            processed_messages=dict(self.processed_messages),
            flow_stack=[_replace(f, data=copy_json(f.data)) for f in self.flow_stack],
            completed_flows=list(self.completed_flows),
            flow_output_mapping=dict(self.flow_output_mapping),
            archive_outbox=list(self.archive_outbox),
        )


__all__ = [
    "ConditionResult",
    "ContextChange",
    "Conversation",
    "ConversationStatus",
    "DEFAULT_MAX_CONTEXT_BYTES",
    "DEFAULT_MAX_HISTORY_SIZE",
    "DEFAULT_MAX_MESSAGE_LENGTH",
    "DEFAULT_MAX_STORED_MESSAGES",
    "DEFAULT_MAX_TURN_RECORDS",
    "FSMContext",
    "FSMInstance",
    "FlowFrame",
    "Intent",
    "LLMCallRecord",
    "LLMRequest",
    "LLMResponse",
    "LLMResult",
    "StateTransition",
    "TraceEvent",
    "TransitionEvaluation",
    "TurnRecord",
    "Verdict",
    "copy_json",
    "new_conversation_id",
    "new_flow_id",
]
