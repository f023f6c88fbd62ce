"""The provenance reader: where each value of a conversation came from, with the words that say it quoted.

``FSMInstance.provenance`` keeps an origin per key (``engine._provenance``); this reader joins it with the value
and, for a value read from words, with the message that holds them — from the whole transcript, the store's
archive included, since the words may be older than the hot record's messages. What it returns is what a person
may be shown: a sensitive key's value and words are masked, and so is any sensitive value another quote contains.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._context import _MISSING, get_path
from llm_fsm.engine._data import _Data
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._messages import entry_view
from llm_fsm.engine._provenance import FLOW_SEPARATOR, Origin
from llm_fsm.engine._turn import _redact
from llm_fsm.engine._values import MASK
from llm_fsm.runtime._base import RuntimeBase
from llm_fsm.runtime._effects import LoadActiveDefinition, LoadConversation, StoreCall
from llm_fsm.runtime._operations import Operation


class Quote(_Data):
    """The message that holds a value's words, cut at their span, so a UI can highlight ``inside``."""

    message: str = Field(description="The transcript entry id of the message.")
    role: str = Field(description="user, or assistant (operator) for an offer the user accepted.")
    before: str
    inside: str
    after: str


class ValueOrigin(_Data):
    """One key: its value (masked when sensitive), where the value came from, and the words quoted."""

    key: str
    value: Any = None
    origin: Origin | None = Field(
        default=None, description="None for a value stored before the conversation kept origins."
    )
    quote: Quote | None = Field(default=None, description="For a value read from words: the message, cut at them.")


class ProvenanceAPI(RuntimeBase):
    """``provenance`` and its async twin; ``FSMManager`` inherits it."""

    def provenance(
        self, conversation_id: str, key: str | None = None, *, user_id: str | None = None, room_id: str | None = None
    ) -> dict[str, ValueOrigin]:
        """Where each value of the active flow came from, by key path (``key``: that key and the paths under it).

        Answers "where did ``income = 52000`` come from?": the model, reading the user's words in message ``m4``
        (quoted, the words marked), an action's result, an operator, a hook, a sub-flow, a migration.
        """
        return self._run(_provenance(conversation_id, key, user_id, room_id))

    async def aprovenance(
        self, conversation_id: str, key: str | None = None, *, user_id: str | None = None, room_id: str | None = None
    ) -> dict[str, ValueOrigin]:
        return await self._arun(_provenance(conversation_id, key, user_id, room_id))


def _provenance(
    conversation_id: str, key: str | None, user_id: str | None, room_id: str | None
) -> Operation[dict[str, ValueOrigin]]:
    instance: FSMInstance = yield LoadConversation(conversation_id, user_id, room_id)
    definition: FSMDefinition = yield LoadActiveDefinition(instance)
    entries = yield StoreCall("transcript", (conversation_id,), {"user_id": user_id, "room_id": room_id})
    messages = {view["id"]: view for view in (entry_view(entry) for entry in entries) if view.get("id")}
    return origins_of(instance, definition, messages, key)


def origins_of(
    instance: FSMInstance, definition: FSMDefinition, messages: dict[str, dict[str, Any]], key: str | None = None
) -> dict[str, ValueOrigin]:
    """The reader's answer from what it loaded (``messages``: transcript views by id). Keys with an origin come
    first, then keys stored before origins were kept, each with no origin."""
    data = instance.context.data
    kept = {path: origin for path, origin in instance.provenance.items() if FLOW_SEPARATOR not in path}
    paths = [p for p in kept if _has(data, p)]
    paths += [top for top in data if not any(p == top or p.startswith(top + ".") for p in paths)]
    if key is not None:
        paths = [p for p in paths if p == key or p.startswith(key + ".")]
        if not paths and _has(data, key):
            paths = [key]  # a value inside one written whole: its origin is its parent's
    out: dict[str, ValueOrigin] = {}
    for path in paths:
        origin = kept.get(path) or _ancestor(kept, path)
        sensitive = _sensitive(definition, path)
        value = MASK if sensitive else get_path(data, path) if path not in data else data[path]
        quote = _quote(origin, messages, definition, data, sensitive) if origin is not None else None
        out[path] = ValueOrigin(key=path, value=value, origin=origin, quote=quote)
    return out


def _has(data: dict[str, Any], path: str) -> bool:
    return path in data or get_path(data, path) is not _MISSING


def _ancestor(kept: dict[str, Origin], path: str) -> Origin | None:
    parts = path.split(".")
    for end in range(len(parts) - 1, 0, -1):
        found = kept.get(".".join(parts[:end]))
        if found is not None:
            return found
    return None


def _sensitive(definition: FSMDefinition, path: str) -> bool:
    found = definition.declaration_for(path)
    return found is not None and found[1].sensitive


def _quote(
    origin: Origin,
    messages: dict[str, dict[str, Any]],
    definition: FSMDefinition,
    data: dict[str, Any],
    sensitive: bool,
) -> Quote | None:
    """The words' message cut at the span; every sensitive value in it masked, and the words themselves when
    they say a sensitive key's value (the span marks where, never what)."""
    view = messages.get(origin.message) if origin.message is not None else None
    if view is None or origin.start is None or origin.end is None:
        return None
    text = str(view.get("text") or "")
    if not 0 <= origin.start <= origin.end <= len(text):
        return None
    before, inside, after = _redact((definition,), data, text[: origin.start], text[origin.start : origin.end],
                                    text[origin.end :])  # fmt: skip
    return Quote(
        message=str(origin.message),
        role=str(view.get("role")),
        before=before,
        inside=MASK if sensitive else inside,
        after=after,
    )


__all__ = ["ProvenanceAPI", "Quote", "ValueOrigin", "origins_of"]
