"""Plain-data base of the engine's models, their defaults, ids and the clock.

Everything built on ``_Data`` round-trips through JSON, so a store can save it and another process carry on.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

DEFAULT_MAX_HISTORY_SIZE = 5
"""Exchanges (user message + reply) shown to the model in the prompt window."""

DEFAULT_MAX_MESSAGE_LENGTH = 1000
"""Characters of each message shown to the model; longer ones are cut in the prompt."""

DEFAULT_MAX_STORED_MESSAGES = 30
"""Messages kept in the conversation's hot record (three times the prompt's default window of 5 exchanges);
older ones go to the store's append-only archive, and the history (``get_conversation_history``) has them all.
The Soni seed's ``max_history_messages`` was 50 in one record; here the record every turn rewrites keeps
what the next turn reads (the prompt's window, the user's words that ground a value) and the rest is appended
once. A value is grounded in the user messages this keeps (the last 15)."""

DEFAULT_MAX_COMPLETED_FLOWS = 10
"""Completed or cancelled sub-flows kept, with their outputs, in the conversation's archive."""

DEFAULT_MAX_FLOW_DEPTH = 5
"""Flows that can be stacked (the root included) before starting another is refused."""

DEFAULT_MAX_TURN_RECORDS = 50
"""Turn records (explain data) kept per conversation."""

DEFAULT_MAX_CONTEXT_BYTES = 10_000
"""Size cap of the context data, as compact JSON (the Mathia seed's limit)."""

ConversationStatus = Literal["active", "ended", "cancelled"]


MAX_VALUE_DEPTH = 32
"""Nesting of a context value (its dot path counted): deeper is refused where it is written.

Far below where JSON encoders and the stores' decoders give up (about 200), so an accepted
value can always be saved and loaded again; far above what a form or a plan needs."""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    """True for text with a half of a UTF-16 pair: valid in a Python str, not encodable as UTF-8 or JSON text."""
    return _LONE_SURROGATE.search(text) is not None


def clean_text(text: str) -> str:
    """Lone surrogates replaced by U+FFFD: a model's broken ``\\udXXX`` escape is shown, not fatal."""
    return _LONE_SURROGATE.sub("\ufffd", text) if has_lone_surrogate(text) else text


def clean_json(value: Any, depth: int = 0) -> Any:
    """``clean_text`` on every string and key of JSON-shaped data, to ``MAX_VALUE_DEPTH`` levels (deeper is left
    for the writer to refuse)."""
    if isinstance(value, str):
        return clean_text(value)
    if depth > MAX_VALUE_DEPTH:
        return value
    # Every reply passes here, and nearly all are clean: the input itself is returned unless something changed.
    if isinstance(value, dict):
        items = [(clean_text(k) if isinstance(k, str) else k, clean_json(v, depth + 1)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list):
        cleaned = [clean_json(item, depth + 1) for item in value]
        return value if all(a is b for a, b in zip(cleaned, value, strict=True)) else cleaned
    return value


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
