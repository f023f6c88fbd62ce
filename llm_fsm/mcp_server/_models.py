"""What each tool answers, as pydantic models: the SDK publishes them as the tools' output schemas and sends every
answer as structured content an agent can read without parsing prose.

An agent platform hands a definition a sub-task and wants typed data back, so the collected values travel as
JSON values (an integer key stays an integer), and each definition lists its keys with the JSON Schema of their
values before a conversation starts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class KeyOut(BaseModel):
    """One key a definition collects."""

    type: str | None = Field(description="The declared JSON type (string, integer, number, boolean, array, object).")
    description: str | None = Field(default=None, description="What the value is, as the definition says.")
    json_schema: dict[str, Any] = Field(
        description="The JSON Schema a value of the key satisfies (enum, format, bounds, pattern, items)."
    )
    sensitive: bool = Field(default=False, description="Its value is masked in every answer.")
    required: bool = Field(
        default=False, description="A state or a transition condition needs it: the conversation collects it."
    )


class DefinitionOut(BaseModel):
    id: str = Field(description="What start_conversation takes as `definition`.")
    name: str
    description: str
    initial_state: str
    states: list[str]
    languages: list[str] = Field(default_factory=list, description="What start_conversation takes as `language`.")
    keys: dict[str, KeyOut] = Field(description="The keys the conversation collects, with their declared types.")


class DefinitionsOut(BaseModel):
    definitions: list[DefinitionOut]


class StartedOut(BaseModel):
    conversation_id: str = Field(description="Pass it to send_message, get_state and explain.")
    definition: str
    opening: str = Field(description="The assistant's first message: show it, or answer it with send_message.")
    state: str
    ended: bool
    data: dict[str, Any] = Field(description="The values collected so far (the initial context at first).")


class TurnOut(BaseModel):
    conversation_id: str
    reply: str = Field(description="The assistant's answer to the message.")
    state: str = Field(description="The state the turn left the conversation in.")
    ended: bool = Field(description="True when the conversation is over: read `data`, send no more messages.")
    data: dict[str, Any] = Field(
        description="Every value collected so far, typed as the definition declares (sensitive values masked)."
    )
    mode: Literal["bot", "human"] = Field(default="bot", description="human: a person has taken the conversation.")
    duplicate: bool = Field(
        default=False, description="The message_id was answered before: this is its saved reply, and no turn ran."
    )


class TranscriptMessage(BaseModel):
    role: str = Field(description="user, assistant or operator (a person).")
    content: str


class StateOut(BaseModel):
    conversation_id: str
    definition: str
    state: str
    status: str
    ended: bool
    turn_count: int
    stack: list[str] = Field(description="The sub-flows running above the root, oldest first; [] in the root flow.")
    mode: Literal["bot", "human"]
    data: dict[str, Any] = Field(description="Every value collected so far (sensitive values masked).")
    transcript: list[TranscriptMessage] = Field(description="The most recent messages, oldest first.")


class ExplainOut(BaseModel):
    conversation_id: str
    turn: int = Field(description="The turn's index (1-based).")
    record: dict[str, Any] = Field(
        description="The turn's explain record as `llm-fsm explain --format json` prints it: the message, the "
        "values read, the transitions considered with their conditions, the verdict, actions, model calls, reply."
    )


class ErrorOut(BaseModel):
    """The structured content of a tool error (``isError``): a stable code to branch on, a message to read."""

    code: str = Field(description="Stable: conversation_not_found, conversation_ended, message_too_large, ...")
    message: str


__all__ = [
    "DefinitionOut",
    "DefinitionsOut",
    "ErrorOut",
    "ExplainOut",
    "KeyOut",
    "StartedOut",
    "StateOut",
    "TranscriptMessage",
    "TurnOut",
]
