"""The JSON the API takes and gives, as pydantic models: they validate requests and document the OpenAPI schema."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from llm_fsm.engine._records import Verdict
from llm_fsm.server._errors import CONTROL_CHARACTERS


def _no_control_characters(value: str) -> str:
    # an id is stored and compared, shown in logs and the inspector: PostgreSQL refuses a NUL in text, and a
    # terminal obeys an escape sequence, so an id with a control character is refused here rather than stored
    if CONTROL_CHARACTERS.search(value):
        raise ValueError("an id holds no control characters (U+0000-U+001F, U+007F-U+009F)")
    return value


Name = Annotated[str, AfterValidator(_no_control_characters)]
"""A client's id or name for something (a message id, an actor): printable text, no control characters."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not silently ignored


class StartConversation(_Request):
    definition: str = Field(description="Id of a served definition (GET /v1/definitions).", min_length=1)
    context: dict[str, Any] | None = Field(
        default=None, description="Initial context data, written as the application (declared keys are checked)."
    )
    version: str | None = Field(
        default=None,
        pattern="^[0-9a-f]{8,64}$",
        description="Start on this version of the definition (its content hash: one the server holds or the store "
        "keeps; 404 `version_not_found` else). Not with `alias`.",
    )
    alias: Name | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Start on the version this alias names (`llm-fsm serve --alias`); 404 `alias_not_found` when the "
        "definition has none of this name. Not with `version`.",
    )
    language: str | None = Field(
        default=None,
        min_length=1,
        max_length=35,
        description="The conversation's language: one of the definition's `languages` (422 `unknown_language` "
        "else); absent: its default language.",
    )


class Started(BaseModel):
    conversation_id: str
    definition: str
    opening: str = Field(description="The assistant's first message.")
    state: str
    ended: bool
    definition_version: str | None = Field(
        default=None, description="The version (content hash) of the definition the conversation runs on, pinned."
    )
    alias: str | None = Field(default=None, description="The alias it was started on, if any.")


class SendMessage(_Request):
    message: str | list[dict[str, Any]] = Field(
        description=(
            "The user's message: text, or content parts in OpenAI's format — "
            '`[{"type": "text", "text": "…"}, {"type": "image_url", "image_url": {"url": "https://…"}}]` — '
            "for a model that reads images (415 `unsupported_content` otherwise)."
        )
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="A small JSON object stored with the message and returned in its history (channel ids, …).",
    )
    message_id: Name | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description=(
            "Idempotency key: a message sent again with the same id (a retry, or twice at once) "
            "is answered once, with the same reply, and runs one turn. No control characters."
        ),
    )


class TurnResult(BaseModel):
    conversation_id: str
    message_id: str = Field(description="The id given, or the one the server gave the message.")
    reply: str = Field(description='The reply; "" while a person has the conversation (mode human).')
    state: str = Field(description="The state the turn left the conversation in.")
    ended: bool
    verdict: Verdict | None = Field(description="What the engine decided and why (None if the record is not kept).")
    mode: Literal["bot", "human"] = Field(default="bot", description="Who has the conversation after the turn.")
    duplicate: bool = Field(
        default=False,
        description="True when the message_id was answered before: this is the saved reply, and no turn ran.",
    )


class HistoryMessage(BaseModel):
    role: str = Field(description="user, assistant or operator (a human agent).")
    content: str = Field(description="The message's text (a message of content parts: its text parts, joined).")
    id: str | None = Field(default=None, description="The message's id (a user message's `message_id`).")
    at: float | None = Field(default=None, description="When it was recorded, epoch seconds.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="What the client sent with it.")
    parts: list[dict[str, Any]] | None = Field(
        default=None, description="Its content parts as stored (long data: URLs without their bytes), or null."
    )


class HandoffOut(BaseModel):
    reason: str
    actor: str
    since: float
    from_state: str


class ConversationDetail(BaseModel):
    conversation_id: str
    definition: str
    state: str
    status: str
    ended: bool
    turn_count: int
    stack: list[str] = Field(description="Sub-flows above the root, oldest first.")
    mode: Literal["bot", "human"] = Field(default="bot", description="human: a person has the conversation.")
    handoff: HandoffOut | None = Field(default=None, description="Who handed off, when, why, from which state.")
    created_at: float
    updated_at: float
    context: dict[str, Any] = Field(description="Context data; values of keys declared sensitive are masked.")
    history: list[HistoryMessage]
    definition_version: str | None = Field(
        default=None, description="The version (content hash) of the definition the conversation runs on."
    )


class _Operator(_Request):
    actor: Name | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The person acting through this key; recorded as '<key>/<actor>' (default: the key alone).",
    )
    reason: str | None = Field(default=None, max_length=2000, description="Why; recorded in the trace.")


class ForceState(_Operator):
    state: str = Field(min_length=1, description="Any state the active flow's definition declares.")


class PushFlow(_Operator):
    flow: str = Field(min_length=1, description="A sub-flow declared for the current state (or the definition).")
    inputs: dict[str, Any] | None = Field(default=None, description="Keys of the sub-flow to start with.")


class PopFlow(_Operator):
    outputs: dict[str, Any] | None = Field(
        default=None, description="Keys of the sub-flow; its declared outputs hand them to the parent."
    )


class SetContext(_Operator):
    updates: dict[str, Any] = Field(description="Keys to write as the application (null removes a key).")


class HandOff(_Operator):
    reason: str = Field(min_length=1, max_length=2000, description="Why a person takes the conversation.")


class OperatorMessage(_Request):
    text: str = Field(description="The person's reply, recorded in the transcript as role operator.")
    message_id: Name | None = Field(
        default=None, min_length=1, max_length=200, description="Idempotency key: the same id is recorded once."
    )
    actor: Name | None = Field(default=None, min_length=1, max_length=200, description="As for the other operations.")


class ResumeBot(_Operator):
    state: str | None = Field(default=None, description="Resume in this declared state (default: where it was).")


class ConversationItem(BaseModel):
    conversation_id: str
    definition: str
    state: str
    status: str
    version: int
    updated_at: float


class ConversationList(BaseModel):
    conversations: list[ConversationItem]
    next_cursor: str | None = Field(
        default=None, description="Pass back as `cursor` for the next page; null on the last page."
    )


class DefinitionVersionOut(BaseModel):
    version: str = Field(description="Content hash; `POST /v1/conversations` takes it as `version`.")
    current: bool = Field(description="The version of the served file now: what a start without version runs on.")
    aliases: list[str] = Field(description="The aliases that name this version.")


class DefinitionItem(BaseModel):
    id: str
    name: str
    description: str
    initial_state: str
    states: list[str]
    version: str = Field(default="", description="The current version's content hash.")
    versions: list[DefinitionVersionOut] = Field(
        default_factory=list, description="The versions the server holds: the current one, then the aliases'."
    )
    aliases: dict[str, str] = Field(default_factory=dict, description="Alias → the version it names.")


class DefinitionList(BaseModel):
    definitions: list[DefinitionItem]


class GraphOut(BaseModel):
    definition: str
    format: Literal["mermaid", "dot", "text"]
    graph: str


class ErrorBody(BaseModel):
    code: str = Field(description="Stable, for programs (see docs/server.md).")
    status: int
    message: str = Field(description="For people; may change.")
    details: Any = None


class ErrorOut(BaseModel):
    error: ErrorBody


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    detail: str | None = None


Responses = dict[int | str, dict[str, Any]]
"""Other answers of a route, for the OpenAPI document (FastAPI's ``responses=``)."""

ERRORS: Responses = {
    status: {"model": ErrorOut, "description": description}
    for status, description in (
        (401, "No API key, or an unknown one (`unauthorized`)"),
        (403, "The key lacks the right (`forbidden`)"),
        (422, "Malformed JSON or a body that does not match the schema"),
        (429, "Rate limit of the key (`rate_limited`); see Retry-After"),
        (503, "The store cannot be reached (`store_unavailable`)"),
    )
}
"""What any ``/v1`` route may answer besides its own result."""
NOT_FOUND: Responses = {
    404: {"model": ErrorOut, "description": "Unknown id, or another tenant's (`conversation_not_found`)"}
}
DEFINITION_NOT_FOUND: Responses = {
    404: {"model": ErrorOut, "description": "No such definition (`definition_not_found`)"}
}


__all__ = [
    "DEFINITION_NOT_FOUND",
    "ERRORS",
    "NOT_FOUND",
    "ConversationDetail",
    "ConversationItem",
    "ConversationList",
    "DefinitionItem",
    "DefinitionList",
    "DefinitionVersionOut",
    "ErrorOut",
    "ForceState",
    "HandOff",
    "HandoffOut",
    "OperatorMessage",
    "Responses",
    "PopFlow",
    "PushFlow",
    "ResumeBot",
    "SetContext",
    "GraphOut",
    "Health",
    "HistoryMessage",
    "SendMessage",
    "StartConversation",
    "Started",
    "TurnResult",
]
