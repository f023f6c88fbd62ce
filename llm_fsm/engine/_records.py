"""What one turn exchanged with the model and what it decided: requests, responses, evaluations, verdicts, turn records
and trace events.

Plain data, kept so that every decision can be explained afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from llm_fsm.engine._data import _Data, clean_json, clean_text, now


class StateTransition(_Data):
    """What the model proposes: where to go, and what it extracted from the message."""

    target_state: str
    context_update: dict[str, Any] = Field(default_factory=dict)


class LLMRequest(_Data):
    """One call to a model."""

    system_prompt: str
    user_message: str
    user_content: list[dict[str, Any]] | None = Field(
        default=None,
        description=(
            "The user's message as content parts (litellm's / OpenAI's format) when it carries images; an "
            "interface that reads images sends these instead of `user_message`, which is their text."
        ),
    )
    context: dict[str, Any] | None = None
    response_schema: dict[str, Any] | None = Field(
        default=None, description="JSON Schema the reply must follow (structured output)."
    )
    purpose: Literal["turn", "opening", "regenerate", "timer"] = "turn"
    context_keys: list[str] | None = Field(
        default=None,
        description=(
            "Keys that matter in this state (to collect, read by its conditions, or already collected). "
            "An LLM edge may close the reply schema to them for small models."
        ),
    )
    conversation_id: str | None = Field(
        default=None,
        description=(
            "The conversation the call is for; no provider is sent it. A model that keeps state per conversation "
            "(``--model scripted:FILE``, which replays its file for each conversation) reads it."
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

    @model_validator(mode="before")
    @classmethod
    def _valid_text(cls, data: Any) -> Any:
        # A model can write "\ud800" in JSON: a lone surrogate no store can encode. Replaced here, where
        # every reply passes (parsed, validated from a dict or built by an interface), it can never
        # reach the transcript or the context and fail a save after the turn was decided.
        return clean_json(data) if isinstance(data, dict) else data


@dataclass(frozen=True)
class LLMResult:
    """One model call as the engine sees it: the reply and what it took to get it (for the explain record).

    Lives with the other runtime data (not in ``llm_fsm.llm``) so the pure turn logic
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
    cost_usd: float | None = None
    """The call's price from litellm's bundled price list (offline), when the model is in it."""
    model: str | None = None
    """The model that answered, as the interface names it."""
    message_pending: bool = False
    """A streaming driver's early result: the decision is complete, the message is still arriving (the turn
    asks for it with ``AwaitMessage`` once it knows the reply will not be regenerated)."""


# --- explain records -------------------------------------------------------------


class ConditionResult(_Data):
    """How one condition evaluated against the context after the turn's update."""

    description: str
    missing_keys: list[str] = Field(default_factory=list, description="requires_context_keys absent, null or empty.")
    logic_value: Any = None
    logic_missing_vars: list[str] = Field(
        default_factory=list, description="Variables the rule read that were missing."
    )
    error: str | None = None
    holds: bool


class TransitionEvaluation(_Data):
    """One declared transition, considered."""

    index: int = Field(
        default=0,
        description="Position in the state's transitions: its own `transitions`, then the global transitions that "
        "apply to it (FSMDefinition.transitions_from, transition_path).",
    )
    target_state: str
    priority: int
    guarded: bool
    conditions: list[ConditionResult] = Field(default_factory=list)
    eligible: bool
    global_index: int | None = Field(
        default=None,
        exclude_if=lambda position: position is None,  # records of definitions without global transitions unchanged
        description="Position in the definition's `global_transitions` when this is a global transition.",
    )


VerdictKind = Literal[
    "proposal_accepted",  # the model's eligible proposal stands
    "guarded_override",  # a guarded transition of strictly higher priority beat the proposal
    "guarded_fallback",  # the proposal was stay or ineligible; an eligible guarded transition fired
    "chained",  # after the turn's move, a guarded transition of the state reached already held and was followed
    "stay",  # nothing moved
    "stay_rejected",  # the model proposed a move (or a flow action) that is not allowed; stayed
    "digression",  # a side question was answered; state and stack unchanged
    "flow_started",  # a declared sub-flow was pushed (call) or handed over to (link)
    "flow_resumed",  # a paused flow was brought back to the top of the stack
    "flow_cancelled",  # the active sub-flow was cancelled; the one below resumed
    "flow_completed",  # the active sub-flow reached a terminal state; the one below resumed
    "conversation_cancelled",  # the root flow was cancelled: the conversation ended as cancelled
    "action_error",  # an action the state declares failed, and its on_error named the state to go to
    "retrieval_error",  # the state's retrieval failed, and its on_error named the state to go to
    "handed_off",  # an action asked for a person (HandOff, or on_error: handoff) before the decision: stayed
    "cancel_pending",  # a cancel that would end the conversation was asked to be confirmed; nothing ended yet
    "conversation_restarted",  # a cancel at the root went back to the initial state (on_cancel: restart)
    "human_mode",  # a person has the conversation: the message was recorded, no model was called
    "timer",  # a timer's `go` moved the conversation (its transition's conditions held when it fired)
]


class Verdict(_Data):
    """What the engine decided, and why, in words a person can read."""

    kind: VerdictKind
    target_state: str
    reason: str
    transition_index: int | None = Field(
        default=None,
        description="Index, in the state's transitions (its own, then the global ones that apply: "
        "FSMDefinition.transitions_from), of the transition taken (None when staying).",
    )

    @property
    def moved(self) -> bool:
        """A transition inside the active flow was taken."""
        return self.kind in (
            "proposal_accepted",
            "guarded_override",
            "guarded_fallback",
            "chained",
            "action_error",
            "retrieval_error",
            "timer",
        )


class GroundedBy(_Data):
    """What a grounded value was found in: for a date, time or number the expression that means it."""

    expression: str = Field(description="The words found ('March 12th' for 2019-03-12; the value's own spelling).")
    kind: str = Field(
        description=(
            "date, time, number or phone (an expression that means the value), words (lexical), or dontcare (an "
            "indifference the user expressed, for the value dontcare: any value of the key will do)."
        )
    )
    source: str = Field(description="user, or assistant for an offer the user accepted.")
    messages_back: int = Field(description="Which message of its source: 0 the newest (this turn's, for the user).")
    start: int | None = Field(
        default=None,
        description=(
            "Where the expression starts in that message; for words, the smallest span holding them all (None when "
            "no one message holds them all)."
        ),
    )
    end: int | None = Field(default=None, description="Where it ends (exclusive).")


class Repair(_Data):
    """A model's value written in words ("next Friday") stored in its key's declared form (``2019-03-08``)."""

    written: Any = Field(description="What the model wrote.")
    stored: Any = Field(description="What was stored: the one value the words mean.")
    rule: str = Field(description="How the words were read ('date in words, against the conversation's date ...').")
    expression: str | None = Field(default=None, description="The expression in the conversation that means it.")
    source: str | None = Field(default=None, description="user, or assistant for an offer the user accepted.")
    messages_back: int | None = Field(default=None, description="Which message of its source: 0 the newest.")
    start: int | None = Field(default=None, description="Where the expression starts in that message.")
    end: int | None = Field(default=None, description="Where it ends (exclusive).")


class Extracted(_Data):
    """A value the engine's extractors read from the user's message itself (``engine._extract``)."""

    rule: Literal["fill", "repair", "ask"] = Field(
        description=(
            "fill: a key the model left out, given the one candidate that fits; repair: a model value that failed "
            "its declaration or grounding, replaced by the one candidate that fits; ask: several fit, none stored."
        )
    )
    kind: str = Field(description="The kind of candidate: date, time, number, enum, phone or email.")
    expression: str | None = Field(default=None, description="The words of this turn's message it was read from.")
    start: int | None = Field(default=None, description="Where the expression starts in this turn's message.")
    end: int | None = Field(default=None, description="Where it ends (exclusive).")
    written: Any = Field(default=None, description="For a repair: what the model wrote.")
    options: list[Any] = Field(default_factory=list, description="For ask: the values that fit.")


class ContextChange(_Data):
    """One key of a context update and what happened to it."""

    key: str
    value: Any = None
    previous: Any = None
    applied: bool
    reason: str = Field(description="'set', 'corrected', 'removed', or why it was dropped.")
    rule: str | None = Field(
        default=None,
        description=(
            "For a refused value, the rule it broke: type, enum, format, pattern, length, range, items, "
            "ungrounded, not_writable or undeclared (None for other drops)."
        ),
    )
    grounded_by: GroundedBy | None = Field(
        default=None,
        description=(
            "For a stored model value of a grounded key: what in the conversation supports it. None when the key "
            "is not grounded, or for a refused value (rule 'ungrounded': nothing the user said means it)."
        ),
    )
    repaired: Repair | None = Field(
        default=None,
        description=(
            "For a stored model value written in words the normaliser does not take ('March 9th' for a date): what "
            "was written, what was stored, the rule that read it, and where in the conversation it was said."
        ),
    )
    extracted: Extracted | None = Field(
        default=None,
        description=(
            "When the engine's extractors filled or repaired the value from this turn's message, or asked which of "
            "several it found was meant: the rule and the words (with their span) it was read from."
        ),
    )


class LLMCallRecord(_Data):
    purpose: str
    attempts: int = 1
    error: str | None = None
    model: str | None = None
    usage: dict[str, int] = Field(
        default_factory=dict,
        description="Tokens of the call, all attempts summed: prompt_tokens, completion_tokens, cached_tokens.",
    )
    cost_usd: float | None = Field(default=None, description="Price of the call (litellm's price list), when known.")
    lost_attempt: bool = Field(
        default=False,
        description=(
            "Made by an attempt of this turn whose save lost the compare-and-set to another worker: spent, and "
            "counted in the conversation's usage, though the saved attempt did not use its reply."
        ),
    )

    @classmethod
    def of(cls, purpose: str, result: LLMResult) -> LLMCallRecord:
        return cls(
            purpose=purpose,
            attempts=result.attempts,
            model=result.model,
            usage={k: v for k, v in result.usage.items() if k != "total_tokens"},
            cost_usd=result.cost_usd,
        )

    @field_validator("error")
    @classmethod
    def _valid_text(cls, value: str | None) -> str | None:
        return clean_text(value) if value is not None else None  # error texts quote what the model wrote


class Usage(_Data):
    """What a conversation has cost so far: model calls, tokens and (where the price is known) dollars."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    calls_without_price: int = Field(
        default=0, description="Calls whose model is not in litellm's price list (local models, custom interfaces)."
    )

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, call: LLMCallRecord) -> None:
        self.calls += 1
        self.prompt_tokens += call.usage.get("prompt_tokens", 0)
        self.completion_tokens += call.usage.get("completion_tokens", 0)
        self.cached_tokens += call.usage.get("cached_tokens", 0)
        if call.cost_usd is None:
            self.calls_without_price += 1
        else:
            self.cost_usd += call.cost_usd


ActionOutcome = Literal["ok", "error", "timeout", "skipped", "replayed", "handoff"]


class ActionRecord(_Data):
    """One action a state declared, as the turn ran it (values of sensitive keys masked)."""

    call: str
    state: str
    when: str
    inputs: dict[str, Any] = Field(default_factory=dict, description="Argument name → value it was called with.")
    outputs: dict[str, Any] = Field(default_factory=dict, description="Context path → value the result wrote.")
    outcome: ActionOutcome = Field(
        description=(
            "ok; error or timeout (then on_error applied); skipped (an input had no value); replayed (the same "
            "call's result reused when a turn runs again after losing a save race: the function ran once); "
            "handoff (it returned HandOff: a person takes the conversation)."
        )
    )
    error: str | None = None
    on_error: str | None = Field(default=None, description="What the failure did: a state id, 'fail' or 'handoff'.")
    duration_ms: float = 0.0
    lost_attempt: bool = Field(
        default=False,
        description=(
            "Called by an attempt of this turn whose save lost the compare-and-set (to another worker's turn or "
            "an operator's change) and not reused by the saved attempt: the backend was called, and this says so."
        ),
    )


class RetrievedSnippet(_Data):
    """One snippet the prompt held: which passage, from where, and how much of it (its text is in the turn's
    inputs, where the audit reads it; explain copies it here for people, the stored record keeps it once)."""

    id: str
    source: str
    score: float = 0.0
    chars: int = Field(description="Characters of its text the prompt held (the last one may be cut to the budget).")
    text: str | None = Field(
        default=None,
        exclude_if=lambda text: text is None,  # stored records leave it to their inputs
        description="The text the prompt held, in an explain record (None in the stored record, and when unknown).",
    )


class RetrievalRecord(_Data):
    """What the state's ``retrieve`` did this turn: the query, the snippets the prompt held, the ids the reply
    cited, and a failure or why nothing was asked."""

    retriever: str
    query: str | None = Field(default=None, description="What was asked (None: nothing was: see skipped).")
    snippets: list[RetrievedSnippet] = Field(default_factory=list, description="Best first, as the prompt held them.")
    cited: list[str] = Field(default_factory=list, description="Ids of those snippets the reply cites ([id]).")
    error: str | None = Field(default=None, description="Why the retriever gave nothing (an exception, a timeout).")
    timed_out: bool = False
    on_error: str | None = Field(default=None, description="What the failure did: continue, or the state moved to.")
    skipped: str | None = Field(
        default=None, description="Why the retriever was not asked (a query key without a value, a budget of 0)."
    )
    duration_ms: float = 0.0


class TurnInputs(_Data):
    """What re-deciding a turn needs, kept with its record (``llm_fsm.audit``): the conversation as the turn found
    it and every answer the turn was given, in order. With the definition version it ran on, the engine's decision
    can be computed again, calling no model and no application code.

    Sensitive values are kept here as the hot record keeps them (``explain`` strips inputs), unless
    ``EngineConfig.record_sensitive_values`` is False: masked, a decision that read one is reported as not
    recomputable rather than as a mismatch.
    """

    definition: str | None = Field(default=None, description="The version (content hash) of the definition it ran on.")
    before: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "The conversation before the turn: the hot record less its trail, with transcript entries reduced to "
            "their role and text (what the decision reads)."
        ),
    )
    tape: list[dict[str, Any]] = Field(
        default_factory=list,
        description=(
            "The answers the turn received, in order: model replies (parsed), hooks' additions, definitions by "
            "version, the streamed message."
        ),
    )
    actions: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Action results by the action's key and the fingerprint of its inputs (value or error).",
    )
    clock: str | None = Field(
        default=None, description="The application clock's reading (ISO 8601), when EngineConfig.clock was read."
    )
    message: str | None = Field(
        default=None,
        description="The user's message as the turn read it, when the record's `user_message` masks part of it.",
    )


class Chain(_Data):
    """A link of the conversation's hash chain (``llm_fsm.audit``): the previous record's hash and this one's, over
    the record's canonical JSON (everything but ``hash`` itself), so an edited or removed record shows."""

    prev: str | None = None
    hash: str = ""


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
    chained: list[Verdict] = Field(
        default_factory=list,
        description=(
            "Guarded transitions followed after the verdict, in order (forms filled in one turn); "
            "state_after is where the last one led."
        ),
    )
    llm_calls: list[LLMCallRecord] = Field(default_factory=list)
    actions: list[ActionRecord] = Field(default_factory=list, description="Actions the turn ran, in order.")
    reply: str
    started_at: float
    finished_at: float
    inputs: TurnInputs | None = Field(default=None, description="What re-deciding the turn needs (llm_fsm.audit).")
    chain: Chain | None = Field(default=None, description="The record's link in the conversation's hash chain.")
    retrieval: RetrievalRecord | None = Field(
        default=None,
        exclude_if=lambda retrieval: retrieval is None,  # records of states that retrieve nothing stay as they were
        description="What the state's retrieve looked up and the reply cited (None: the state retrieves nothing).",
    )
    timer: str | None = Field(
        default=None,
        exclude_if=lambda timer: timer is None,  # a user's turn carries nothing for it
        description="The armed timer's id, for a timer's turn (intent 'timer'): nobody wrote, a state's `after` fired.",
    )

    _payload_digest: str | None = PrivateAttr(default=None)
    """SHA-256 of the bytes the store held for this record, its chain hash emptied (set by the stores' decoder,
    ``engine._chain.stored_payload``): what its chain hash covers, byte for byte."""


class TraceEvent(_Data):
    """One entry of the audit trail."""

    event: str
    timestamp: float = Field(default_factory=now)
    data: dict[str, Any] = Field(default_factory=dict)
