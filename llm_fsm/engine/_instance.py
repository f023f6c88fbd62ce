"""A running conversation as data: the instance, its context, flow frames and the summary stores list."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import Field

from llm_fsm.engine._data import (
    DEFAULT_MAX_HISTORY_SIZE,
    DEFAULT_MAX_MESSAGE_LENGTH,
    ConversationStatus,
    _Data,
    _replace,
    copy_json,
    new_conversation_id,
    now,
)
from llm_fsm.engine._messages import entry_images, entry_role, entry_text, make_entry
from llm_fsm.engine._provenance import Origin
from llm_fsm.engine._records import TraceEvent, TurnRecord, Usage

# --- the seed's runtime models ---------------------------------------------------


class Conversation(_Data):
    """The transcript. ``exchanges`` holds one dict per message, oldest first.

    An entry has one role key holding the text — ``{"user": text}``, ``{"assistant": text}`` or
    ``{"operator": text}`` (a human agent) — as the seed had it, and beside it ``id``, ``at`` (epoch
    seconds), and when given ``metadata`` and ``parts`` (``llm_fsm.engine._messages``). Read entries
    with ``entry_role`` / ``entry_text`` / ``entry_view``, not by iterating their items: records of
    the seed's shape have the role key alone.
    """

    exchanges: list[dict[str, Any]] = Field(default_factory=list)
    max_history_size: int = DEFAULT_MAX_HISTORY_SIZE
    max_message_length: int = DEFAULT_MAX_MESSAGE_LENGTH
    archived_messages: int = Field(default=0, description="Messages moved out of `exchanges` into the store's archive.")

    def add_user_message(
        self,
        text: str,
        *,
        id: str | None = None,
        at: float | None = None,
        metadata: dict[str, Any] | None = None,
        parts: list[dict[str, Any]] | None = None,
    ) -> None:
        """Append the user's message; ``id`` is its ``message_id`` when it came with one (else ``next_id``)."""
        self.exchanges.append(make_entry("user", text, id=id or self.next_id(), at=at, metadata=metadata, parts=parts))

    def add_assistant_message(self, text: str, *, id: str | None = None, at: float | None = None) -> None:
        self.exchanges.append(make_entry("assistant", text, id=id or self.next_id(), at=at))

    def next_id(self) -> str:
        """``m`` and the message's number in the whole transcript (archived ones counted): unique in the
        conversation, stable when older messages move to the archive, and a few bytes in the record every
        turn rewrites (a random id cost 12 more per message)."""
        return f"m{self.archived_messages + len(self.exchanges) + 1}"

    def add_operator_message(self, text: str, *, id: str | None = None, at: float | None = None) -> None:
        """A person's reply during a handoff: the bot, once resumed, sees it as a human agent's."""
        self.exchanges.append(make_entry("operator", text, id=id or self.next_id(), at=at))

    def window(self, size: int | None = None) -> list[tuple[str, str]]:
        """The last ``size`` (default ``max_history_size``) exchanges as (role, text), each cut to
        ``max_message_length``; a message that carried images says how many (the model saw them on its turn)."""
        keep = (self.max_history_size if size is None else size) * 2
        recent = self.exchanges[-keep:] if keep > 0 else []
        out: list[tuple[str, str]] = []
        for entry in recent:
            text = entry_text(entry)
            if len(text) > self.max_message_length:
                text = text[: self.max_message_length] + "…"
            images = entry_images(entry) if "parts" in entry else 0
            if images:
                text = f"{text} [{images} image{'s' if images > 1 else ''}]".lstrip()
            out.append((entry_role(entry), text))
        return out


class FSMContext(_Data):
    """What the conversation knows: collected data, transcript, and metadata for the application."""

    data: dict[str, Any] = Field(default_factory=dict)
    conversation: Conversation = Field(default_factory=Conversation)
    metadata: dict[str, Any] = Field(default_factory=dict)


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


# --- handoff -------------------------------------------------------------------------

ConversationMode = Literal["bot", "human"]


class Handoff(_Data):
    """Who handed the conversation to a person, when, why and from where (replaced whole, never edited)."""

    reason: str
    actor: str = Field(description="Who handed off: an operator's name, 'definition' for a declared handoff state.")
    since: float = Field(default_factory=now)
    from_state: str = Field(description="The state the conversation was in when it was handed off.")


class ArmedTimer(_Data):
    """A timer of the current state that has not fired yet (a state's ``after`` entry, armed by the engine).

    The instance is the truth: a store indexes ``FSMInstance.timers`` by due time on every save, atomically with
    the compare-and-set, and a worker fires a claimed timer only if the conversation it loads still arms it. The
    save that records the firing drops it, so a timer fires once however many workers claimed it.
    """

    id: str = Field(
        description="Unique per arming: the flow, state, entry index and the turn that armed it, so re-entering a "
        "state arms new ids and a claim made for an earlier visit never matches."
    )
    due_at: float = Field(description="Epoch seconds (the engine's clock) at which the timer is due.")


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
    turns: list[TurnRecord] = Field(
        default_factory=list,
        description=(
            "Turn records (explain data), oldest first. Stores keep them in a turn log beside the hot record: "
            "an instance loaded for a turn holds only the records that turn adds."
        ),
    )
    processed_messages: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "message_id → reply, so a retried message is answered once. Kept in the store's turn log too: an "
            "instance loaded for a turn holds only that turn's id (with its reply when it was answered before)."
        ),
    )
    trace: list[TraceEvent] = Field(default_factory=list)
    flow_id: str = Field(default="root", description="Id of the active flow instance.")
    flow_name: str | None = Field(
        default=None, description="Name of the active flow (the root's is its definition's name)."
    )
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
    mode: ConversationMode = Field(
        default="bot",
        description="bot: turns call the model; human: a person has the conversation, turns only record messages.",
    )
    handoff: Handoff | None = Field(default=None, description="Set while a person has the conversation.")
    pending_cancel: bool = Field(
        default=False,
        description=(
            "A cancel that would end the conversation is waiting for the user's confirmation (confirm_cancel); "
            "the next turn's confirm or cancel ends it, anything else clears this."
        ),
    )
    action_runs: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "`collected` actions of the current state that have run: flow id/action key → fingerprint of the inputs "
            "they ran with, so each runs once per visit and again only when an input changes. Cleared on leaving."
        ),
    )
    usage: Usage = Field(default_factory=Usage, description="Model calls, tokens and cost of the conversation so far.")
    chain_head: str | None = Field(
        default=None, description="Hash of the newest turn record: the head of the conversation's hash chain."
    )
    provenance: dict[str, Origin] = Field(
        default_factory=dict,
        description=(
            "Key path → where its current value came from (engine._provenance): who wrote it, and for words the "
            "message and span that say it. Paused flows' origins wait under '<flow id>/<path>'."
        ),
    )
    timers: list[ArmedTimer] = Field(
        default_factory=list,
        exclude_if=lambda timers: not timers,  # the hot record every turn rewrites carries nothing for no timers
        description="Timers armed in the current state, not fired yet; stores index them by due time (TimerStore).",
    )
    archive_outbox: list[dict[str, Any]] = Field(
        default_factory=list,
        description=(
            "Messages pruned from the live transcript this turn. The store appends them to the "
            "conversation's archive on save and empties this list, so no message is silently dropped."
        ),
    )
    language: str | None = Field(
        default=None,
        exclude_if=lambda language: language is None,  # left out of the hot record while unset
        description=(
            "The conversation's language (a tag of its definition's `languages`), given at start or switched by "
            "the definition's `language_key`; unset: the definition's default language."
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

    def keep_turn(
        self, record: TurnRecord, *, max_turn_records: int, message_id: str | None, reply: str, max_message_ids: int
    ) -> None:
        """Keep a finished turn's record (the newest ``max_turn_records``) and, for a message with an id, its reply
        (the newest ``max_message_ids``), so a retried delivery is answered once: every kind of turn (a user's, a
        person's, a timer's) is kept alike."""
        self.turns.append(record)
        if len(self.turns) > max_turn_records:
            del self.turns[: len(self.turns) - max_turn_records]
        if message_id is not None:
            self.processed_messages[message_id] = reply
            while len(self.processed_messages) > max_message_ids:
                self.processed_messages.pop(next(iter(self.processed_messages)))
        self.updated_at = record.finished_at

    def add_trace(self, event: str, data: dict[str, Any], limit: int) -> None:
        """Append an audit-trail event, keeping the last ``limit`` (``EngineConfig.max_trace_events``)."""
        self.trace.append(TraceEvent(event=event, data=data))
        self.bound_trace(limit)

    def bound_trace(self, limit: int) -> None:
        """Keep the last ``limit`` audit-trail events: the runtime applies it before every save, so a path that
        appended without ``add_trace`` cannot grow the record without bound."""
        if len(self.trace) > limit:
            del self.trace[: len(self.trace) - limit]

    def copy_for_turn(self) -> FSMInstance:
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
            action_runs=dict(self.action_runs),
            provenance=dict(self.provenance),
            flow_stack=[_replace(f, data=copy_json(f.data)) for f in self.flow_stack],
            completed_flows=list(self.completed_flows),
            flow_output_mapping=dict(self.flow_output_mapping),
            archive_outbox=list(self.archive_outbox),
            usage=_replace(self.usage),
        )
