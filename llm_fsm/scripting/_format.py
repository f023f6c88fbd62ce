"""The format of a conversation test script (``*.conv.yaml``): the strict models a script validates against.

Strict on purpose: an unknown key is an error with its path, so ``expect: {stat: done}`` fails loudly
instead of silently checking nothing. What the forms mean when run is the runner's (``_runner``); loading,
locating errors and finding scripts are ``_scripts``'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from llm_fsm.definition._timers import Duration
from llm_fsm.engine._context import _valid_path
from llm_fsm.engine._records import Intent, VerdictKind
from llm_fsm.engine._values import Rule
from llm_fsm.llm.fakes import script_reply

_MATCHER_KEYS = ("equals", "regex", "present", "absent")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Matcher(_Strict):
    """One check on a value: exactly one of ``equals``, ``regex``, ``present``, ``absent``.

    ``present: true`` means collected in the engine's sense (there, and not null
    or empty); ``absent: true`` the opposite. ``regex`` is searched (use ``^…$``
    to anchor) in the value, or in its JSON text when it is not a string.
    """

    equals: Any = None
    regex: str | None = None
    present: bool | None = None
    absent: bool | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Matcher:
        given = [k for k in _MATCHER_KEYS if k in self.model_fields_set]
        if len(given) != 1:
            raise ValueError(
                f"a matcher takes exactly one of {', '.join(_MATCHER_KEYS)}; got {', '.join(given) or 'none'}"
                " (to expect an object value, write {equals: {...}})"
            )
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"invalid regex {self.regex!r}: {exc}") from None
        if "present" in given and self.present is None or "absent" in given and self.absent is None:
            raise ValueError("present/absent take true or false")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in _MATCHER_KEYS if k in self.model_fields_set)


class TransitionReply(_Strict):
    target_state: str | None = Field(default=None, description="Proposed state; null or absent: stay.")
    context_update: dict[str, Any] = Field(default_factory=dict)


class ModelReply(_Strict):
    """A scripted model answer: the flat form, the full form, or ``raw`` model text.

    Flat: ``{target_state, context_update, message}``. Full: ``{transition:
    {target_state, context_update}, message}``. Raw: ``{raw: "text"}`` is
    parsed exactly like a real model's output (to test malformed answers). A
    plain string in a script means ``{message: string}``: stay and say this.
    This model validates a script strictly (unknown keys, a missing message);
    what the forms mean is ``script_reply``'s, shared with ``ScriptedLLM``.
    """

    message: str | None = None
    target_state: str | None = None
    context_update: dict[str, Any] | None = None
    transition: TransitionReply | None = None
    reasoning: str | None = None
    intent: Intent | None = Field(
        default=None, description="continue (default), digression, cancel, start_flow, resume_flow, confirm, deny."
    )
    flow: str | None = Field(default=None, description="The sub-flow to start or resume (with start_flow/resume_flow).")
    raw: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _plain_string(cls, value: Any) -> Any:
        return {"message": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_form(self) -> ModelReply:
        fields = self.model_fields_set
        if self.raw is not None:
            others = fields - {"raw"}
            if others:
                raise ValueError(f"raw takes the whole model output; remove {', '.join(sorted(others))}")
            return self
        if self.transition is not None and fields & {"target_state", "context_update"}:
            raise ValueError("give either transition: {...} or target_state/context_update, not both")
        if not isinstance(self.message, str) or not self.message.strip():
            raise ValueError("a model reply needs a non-empty message (or raw: text)")
        return self

    def as_reply(self) -> dict[str, Any] | str:
        """What the scripted model returns: raw text, or a reply object (``llm_fsm.llm.fakes.script_reply``)."""
        return script_reply(self.model_dump(mode="json", exclude_unset=True))


def _matcher_or_value(value: Any) -> Any:
    """Any mapping is a matcher, so a typo such as ``{regx: ...}`` is an error, not an odd exact value."""
    if not isinstance(value, Mapping):
        return value
    try:
        return Matcher.model_validate(value)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            if error["type"] == "extra_forbidden":
                problems.append(f"unknown matcher key {error['loc'][-1]!r} (use one of {', '.join(_MATCHER_KEYS)})")
            else:
                problems.append(error["msg"].removeprefix("Value error, "))
        raise ValueError("; ".join(problems)) from None


ContextExpectation = Annotated[Any, BeforeValidator(_matcher_or_value)]


def _action_stub(value: Any) -> Any:
    """A stubbed action's answer: the result mapping itself, or ``{raise: "message"}`` to fail."""
    if not isinstance(value, Mapping):
        raise ValueError(
            "an action stub is the result mapping (e.g. {status: shipped}), {raise: message} or {handoff: reason}"
        )
    for special in ("raise", "handoff"):
        if special in value and (len(value) != 1 or not isinstance(value[special], str)):
            raise ValueError(f"{{{special}: text}} takes only its text (a string)")
    return dict(value)


ActionStub = Annotated[dict[str, Any], BeforeValidator(_action_stub)]
ActionStubs = dict[str, ActionStub]
_STUBS_DESCRIPTION = (
    "Stubbed actions: name → the result the action returns (a mapping), {raise: message} to make it fail, or "
    "{handoff: reason} to return HandOff (a person takes over). "
    "Turn-level stubs replace these from that turn on."
)


class StubSnippet(_Strict):
    """One snippet a stubbed retriever answers, as ``llm_fsm.retrieval.Snippet`` holds it."""

    id: str = Field(min_length=1)
    text: str
    source: str
    score: float = 0.0


def _retriever_stub(value: Any) -> Any:
    """A stubbed retriever's answer: its snippets (best first; ``[]`` when the docs say nothing), or
    ``{raise: "message"}`` to make the retrieval fail, so the state's ``on_error`` applies."""
    if isinstance(value, Mapping) and "raise" in value:
        if len(value) != 1 or not isinstance(value["raise"], str):
            raise ValueError("{raise: text} takes only its text (a string)")
        return dict(value)
    if not isinstance(value, list):
        raise ValueError(
            "a retriever stub is a list of snippets ([{id, text, source}], [] for none) or {raise: message}"
        )
    snippets = []
    for number, item in enumerate(value, start=1):
        try:
            snippets.append(StubSnippet.model_validate(item).model_dump())
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'it'}: {error['msg']}" for error in exc.errors()
            )
            raise ValueError(f"snippet {number} needs an id, a text and a source ({problems})") from None
    return snippets


RetrieverStub = Annotated[list[dict[str, Any]] | dict[str, Any], BeforeValidator(_retriever_stub)]
RetrieverStubs = dict[str, RetrieverStub]
_RETRIEVER_STUBS_DESCRIPTION = (
    "Stubbed retrievers: name → the snippets it answers ([{id, text, source, score}], best first; [] for none) or "
    "{raise: message} to make the retrieval fail (the state's on_error applies). A stub takes precedence over "
    "the application's retriever of that name (llm-fsm test --retrievers). Turn-level stubs replace these from "
    "that turn on."
)


class Expectation(_Strict):
    """What must hold after a turn. Every field is optional; only what is given is checked."""

    state: str | None = Field(default=None, description="State the conversation is in after the turn.")
    context: dict[str, ContextExpectation] | None = Field(
        default=None,
        description="Context keys (dot paths nest) → an exact value, or a matcher {equals|regex|present|absent}.",
    )
    ended: bool | None = Field(default=None, description="Whether the conversation has ended.")
    stack: list[str] | None = Field(default=None, description="Sub-flow stack, bottom first (flow names).")
    verdict: VerdictKind | None = Field(default=None, description="The engine's verdict kind for the turn.")
    reply: Matcher | None = Field(default=None, description="The reply the user saw (a string is an exact match).")
    error: str | None = Field(
        default=None,
        description="The turn must fail with an llm_fsm error whose class name or message contains this text.",
    )
    refused: dict[str, Rule] | None = Field(
        default=None,
        description=(
            "Context keys the turn refused to store → the rule each broke (format, enum, ungrounded, ...), "
            "as the explain record gives it."
        ),
    )
    masked: list[str] | None = Field(
        default=None,
        description=(
            "Sensitive keys the turn wrote: its explain record must show them masked, and their stored "
            "values must appear nowhere in it."
        ),
    )
    chained: list[str] | None = Field(
        default=None,
        description="States passed through after the turn's move, in order (guarded transitions that already held).",
    )
    mode: Literal["bot", "human"] | None = Field(
        default=None, description="Who has the conversation after the step: the bot, or a person (handed off)."
    )
    called: dict[str, dict[str, ContextExpectation]] | None = Field(
        default=None,
        description=(
            "Actions the turn called → the inputs each was called with (values or matchers; {} for any inputs)."
        ),
    )
    not_called: list[str] | None = Field(default=None, description="Actions the turn must not have called.")
    timers: int | None = Field(default=None, ge=0, description="How many timers a wait: step fired.")
    retrieved: list[str] | None = Field(
        default=None,
        description=("Snippet ids the turn's prompt must have held (from the state's retrieve); [] : it held none."),
    )
    cited: list[str] | None = Field(
        default=None, description="The ids of retrieved snippets the reply cited ([id]), exactly, in prompt order."
    )
    retrieval_error: str | None = Field(
        default=None, description="The turn's retrieval must have failed with an error containing this text."
    )

    @property
    def checks_retrieval(self) -> bool:
        return self.retrieved is not None or self.cited is not None or self.retrieval_error is not None

    @field_validator("reply", mode="before")
    @classmethod
    def _reply_string(cls, value: Any) -> Any:
        return {"equals": value} if isinstance(value, str) else value


_OPERATOR_ACTIONS = ("hand_off", "message", "resume", "force_state")


class OperatorStep(_Strict):
    """An operator's act between the user's turns: exactly one of ``hand_off``, ``message``, ``resume``,
    ``force_state`` (see docs/operations.md)."""

    actor: str = Field(default="script", min_length=1, description="Who acts (recorded in the trace).")
    reason: str | None = None
    hand_off: bool | None = Field(default=None, description="true: hand the conversation to a person.")
    message: str | None = Field(default=None, description="The person's reply (post_operator_message).")
    resume: bool | str | None = Field(default=None, description="true: the bot resumes where it was; a state: there.")
    force_state: str | None = Field(default=None, description="Put the conversation in this declared state.")

    @model_validator(mode="after")
    def _exactly_one(self) -> OperatorStep:
        given = [name for name in _OPERATOR_ACTIONS if getattr(self, name) not in (None, False)]
        if len(given) != 1:
            raise ValueError(
                f"an operator step takes exactly one of {', '.join(_OPERATOR_ACTIONS)}; "
                f"got {', '.join(given) or 'none'}"
            )
        return self

    @property
    def action(self) -> str:
        return next(name for name in _OPERATOR_ACTIONS if getattr(self, name) not in (None, False))


class ApplicationStep(_Strict):
    """The application's write between the user's turns: ``context:`` keys set as ``FSMManager.update_context``
    sets them (declared keys checked, ``null`` removes), so a script can say what the application provided and
    when, as a hook or a backend would."""

    context: dict[str, Any] = Field(description="Keys (dot paths nest) → the value the application writes.")

    @field_validator("context")
    @classmethod
    def _key_paths(cls, value: dict[str, Any]) -> dict[str, Any]:
        # the engine skips a key that is no path without a word: the script would claim a write that never was
        if not value:
            raise ValueError("an application step writes at least one key")
        for key in value:
            if not _valid_path(key):
                raise ValueError(f"{key!r} is not a key path (dot-separated names, none empty)")
        return value


_STEP_KINDS = ("user", "operator", "application", "wait")


class TurnSpec(_Strict):
    user: str | list[dict[str, Any]] | None = Field(
        default=None,
        description=(
            "The user's message: text, or content parts as litellm takes them ([{type: text, text: ...}, "
            "{type: image_url, image_url: {url: ...}}]); or give operator: or application: instead."
        ),
    )
    metadata: dict[str, Any] | None = Field(
        default=None, description="The message's metadata (channel ids, attachments), stored with it."
    )
    operator: OperatorStep | None = Field(
        default=None, description="An operator's act instead of a user message: hand off, post, resume, force."
    )
    application: ApplicationStep | None = Field(
        default=None, description="The application's write instead of a user message: context keys it sets."
    )
    wait: Duration | None = Field(
        default=None,
        description=(
            "Time passes instead of a message ('15m', '1h 30m', or seconds): the script's clock moves on and every "
            "timer then due fires (its model call, if any, answered by model:)."
        ),
    )
    model: ModelReply | None = Field(default=None, description="The model's answer in offline runs.")
    regenerate: ModelReply | None = Field(
        default=None,
        description=(
            "The answer to the engine's second call when its verdict differs from the proposal; "
            "default: the turn's message again."
        ),
    )
    actions: ActionStubs | None = Field(default=None, description="Stubs that replace earlier ones from this turn on.")
    retrievers: RetrieverStubs | None = Field(
        default=None, description="Retriever stubs that replace earlier ones from this turn on."
    )
    expect: Expectation = Field(default_factory=Expectation)

    @model_validator(mode="after")
    def _user_or_operator(self) -> TurnSpec:
        if isinstance(self.user, list) and not self.user:
            raise ValueError("user: as content parts needs at least one part")
        given = [f"{kind}:" for kind in _STEP_KINDS if getattr(self, kind) is not None]
        if len(given) != 1:
            together = f"not both {given[0]} and {given[1]}" if len(given) == 2 else f"not {', '.join(given)} together"
            raise ValueError(
                "a step has exactly one of user: (a message), operator: (an operator's act), application: "
                f"(the application's write), wait: (time passes){'; ' + together if given else ''}"
            )
        if self.user is None and self.metadata is not None:
            raise ValueError(f"metadata: belongs to a user message; an {self.kind} step has none")
        if self.user is None and self.wait is None and (self.model is not None or self.regenerate is not None):
            raise ValueError(f"an {self.kind} step calls no model; remove model:/regenerate:")
        if self.wait is not None and self.regenerate is not None:
            raise ValueError("a wait: step's timers make no second call; remove regenerate:")
        if self.kind in ("operator", "application") and self.expect.checks_retrieval:
            raise ValueError(
                f"a turn retrieves only for a user message; an {self.kind} step has no retrieval to check "
                "(remove retrieved:, cited:, retrieval_error:)"
            )
        if self.wait is None and self.expect.timers is not None:
            raise ValueError("expect: timers: counts the timers a wait: step fired; this step waits for nothing")
        return self

    @property
    def kind(self) -> Literal["user", "operator", "application", "wait"]:
        """Who acts in this step: the user (a turn), an operator, the application, or time (a wait)."""
        if self.operator is not None:
            return "operator"
        if self.wait is not None:
            return "wait"
        return "application" if self.application is not None else "user"


class ConversationSpec(_Strict):
    name: str | None = None
    description: str | None = None
    initial_context: dict[str, Any] | None = None
    opening: ModelReply | None = None
    actions: ActionStubs | None = Field(default=None, description=_STUBS_DESCRIPTION)
    retrievers: RetrieverStubs | None = Field(default=None, description=_RETRIEVER_STUBS_DESCRIPTION)
    turns: list[TurnSpec] = Field(min_length=1)
    language: str | None = Field(
        default=None, description="The conversation's language (one of the definition's `languages`)."
    )


class ScriptDocument(_Strict):
    """A script file: one conversation (``turns``) or several (``conversations``)."""

    definition: str = Field(description="Path of the definition, relative to this script file.")
    name: str | None = None
    description: str | None = None
    initial_context: dict[str, Any] | None = Field(default=None, description="Default for every conversation.")
    opening: ModelReply | None = Field(default=None, description="Default opening answer for every conversation.")
    actions: ActionStubs | None = Field(default=None, description=_STUBS_DESCRIPTION + " (every conversation)")
    retrievers: RetrieverStubs | None = Field(
        default=None, description=_RETRIEVER_STUBS_DESCRIPTION + " (every conversation)"
    )
    turns: list[TurnSpec] | None = None
    conversations: list[ConversationSpec] | None = None
    language: str | None = Field(
        default=None, description="Default language of every conversation (one of the definition's `languages`)."
    )

    @model_validator(mode="after")
    def _turns_or_conversations(self) -> ScriptDocument:
        if (self.turns is None) == (self.conversations is None):
            raise ValueError("a script has either turns: [...] (one conversation) or conversations: [...], not both")
        if self.turns is not None and not self.turns:
            raise ValueError("turns must not be empty")
        if self.conversations is not None and not self.conversations:
            raise ValueError("conversations must not be empty")
        return self


__all__ = [
    "ActionStub",
    "ApplicationStep",
    "ActionStubs",
    "ContextExpectation",
    "ConversationSpec",
    "Expectation",
    "Matcher",
    "ModelReply",
    "OperatorStep",
    "RetrieverStub",
    "RetrieverStubs",
    "ScriptDocument",
    "StubSnippet",
    "TransitionReply",
    "TurnSpec",
]
