"""Plain-data base of the engine's models, their defaults, ids and the clock.

Everything built on ``_Data`` round-trips through JSON, so a store can save it and another process carry on.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

DEFAULT_MAX_HISTORY_SIZE = 5
"""Exchanges (user message + reply) shown to the model in the prompt window."""

DEFAULT_MAX_MESSAGE_LENGTH = 1000
"""Characters of each message shown to the model; longer ones are cut in the prompt."""

DEFAULT_MAX_STORED_MESSAGES = 50
"""Messages kept in the stored transcript (the Soni seed's ``max_history_messages``); older ones go to the store's
archive."""

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
