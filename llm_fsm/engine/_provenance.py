"""Where each stored value came from: the origin of every key's current value, kept on the instance.

Turn records say what a turn changed, but they are trimmed (the last 50 kept) and mask sensitive values, so they
cannot answer "where did ``income = 52000`` come from?" for a value set long ago. ``FSMInstance.provenance`` can: it
maps each key path of the active flow's data to the ``Origin`` of its current value, written where the value is
written. An origin names who wrote the value and, for a value read from what someone said, the transcript entry and
the characters of it that say it: a span, never the value, so a sensitive key keeps its origin too.

Paused flows' origins wait under ``<flow id>/<path>`` (``/`` is in no key path) while a sub-flow runs, and come back
when their flow does; a flow that finishes takes its own with it, as it takes its data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, cast

from pydantic import (
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core.core_schema import CoreSchema

from llm_fsm.engine._context import _MISSING, get_path
from llm_fsm.engine._data import _Data, now
from llm_fsm.engine._messages import entry_role
from llm_fsm.engine._records import ContextChange, GroundedBy

if TYPE_CHECKING:
    from llm_fsm.engine._instance import FlowFrame as _Frame
    from llm_fsm.engine._instance import FSMInstance
    from llm_fsm.engine._values import KeyPolicy

OriginBy = Literal["model", "extractor", "application", "action", "operator", "flow", "migration"]

_READ = ("model", "extractor")
"""Origins read from someone's words."""

FLOW_SEPARATOR = "/"
"""Between a paused flow's id and a key path in ``provenance``: no valid key path holds it."""


class Origin(_Data):
    """Who wrote a key's current value and, when it was read from words, whose words and where.

    Serialised without its empty fields: the hot record carries one per key on every save.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    by: OriginBy = Field(description="Who wrote the value.")
    message: str | None = Field(
        default=None,
        description="The transcript entry id (m3, or the message_id it came with) of the message holding the words.",
    )
    start: int | None = Field(default=None, description="Where the words start in that message's text (characters).")
    end: int | None = Field(default=None, description="Where they end (exclusive).")
    source: Literal["user", "assistant"] | None = Field(
        default=None,
        description="user, or assistant for an offer the user accepted (for words; JSON leaves out user).",
    )
    rule: str | None = Field(
        default=None,
        description=(
            "How the words were read: the grounding kind (date, time, number, phone, words, dontcare), repair (the "
            "model's words read in the declared form), or the extractor's fill or repair."
        ),
    )
    turn: int | None = Field(
        default=None,
        description="The turn that set it (0: the conversation's opening); None for a write between turns.",
    )
    at: float | None = Field(
        default=None, description="When, for a write between turns (an operator's, the application's, a migration's)."
    )
    call: str | None = Field(default=None, description="For an action: the call name of the action whose result it is.")
    hook: str | None = Field(
        default=None, description="For the application: initial_context, update_context, or the hook that returned it."
    )
    actor: str | None = Field(default=None, description="For an operator: who set it.")
    flow: str | None = Field(
        default=None, description="For a flow hand-over: the name of the flow that handed it over."
    )

    @model_validator(mode="before")
    @classmethod
    def _said_by_the_user(cls, data: Any) -> Any:
        # words are the user's unless said otherwise: ``source`` is stored only for an offer the user accepted
        if isinstance(data, dict) and data.get("source") is None and data.get("message") is not None:
            return {**data, "source": "user"} if data.get("by") in _READ else data
        return data

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {
            name: value
            for name, value in dumped.items()
            if value is not None and not (name == "source" and value == "user")
        }

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        # the fields, not the compact serialiser's dict: API documents show what an origin may hold
        return handler(cast("CoreSchema", {k: v for k, v in schema.items() if k != "serialization"}))

    @property
    def has_span(self) -> bool:
        return self.message is not None and self.start is not None and self.end is not None


# --- writing ---------------------------------------------------------------------------------------


def in_turn(instance: FSMInstance) -> int:
    """The index the running turn's record gets (the opening's values are renumbered 0 by ``settle_opening``)."""
    return instance.turn_count + 1


def note(instance: FSMInstance, changes: Iterable[ContextChange], origin: Origin) -> None:
    """Every applied change of one write has ``origin``; a removed key loses its origin."""
    for change in changes:
        if change.applied:
            _put(instance.provenance, change.key, None if change.reason == "removed" else origin)


def note_model(
    instance: FSMInstance, changes: Iterable[ContextChange], message_id: str, policy: KeyPolicy | None = None
) -> None:
    """The model's values (and the extractors') of this turn: each points at the words that say it.

    ``message_id`` is the id this turn's user message gets when the turn appends it. A value its key does not
    require to be grounded (a date, a number: by default the model may derive them) is looked for anyway, as
    grounding would look, so that it too shows the words it came from when they say it; nothing is decided by it.
    """
    turn = in_turn(instance)
    for change in changes:
        if change.applied:
            origin = None if change.reason == "removed" else _model_origin(instance, change, message_id, turn, policy)
            _put(instance.provenance, change.key, origin)


def _sighting(instance: FSMInstance, key: str, policy: KeyPolicy | None) -> GroundedBy | None:
    """Where the conversation says the stored value of a key grounding did not need to find, if it does."""
    grounding = policy.grounding if policy is not None else None
    if policy is None or grounding is None:
        return None
    found = policy.definition.declaration_for(key)
    declaration = found[1] if found is not None and found[0] == key else None
    value = get_path(instance.context.data, key)
    witness = None if value is _MISSING else grounding.witness(value, declaration)
    if witness is None:
        return None
    return GroundedBy(**dataclasses.asdict(grounding.located(witness)))


def _model_origin(
    instance: FSMInstance, change: ContextChange, message_id: str, turn: int, policy: KeyPolicy | None
) -> Origin:
    found, repaired, grounded = change.extracted, change.repaired, change.grounded_by
    if found is None and repaired is None and grounded is None:
        grounded = _sighting(instance, change.key, policy)
    if found is not None and found.rule in ("fill", "repair"):
        return Origin(by="extractor", message=message_id, start=found.start, end=found.end, source="user",
                      rule=found.rule, turn=turn)  # fmt: skip
    if repaired is not None:
        source, back, start, end = repaired.source, repaired.messages_back, repaired.start, repaired.end
        rule = "repair"
    elif grounded is not None:
        source, back, start, end = grounded.source, grounded.messages_back, grounded.start, grounded.end
        rule = grounded.kind
    else:
        return Origin(by="model", message=message_id, turn=turn)  # a value no words need to ground
    if source == "user" and back is not None:
        message = message_id if back == 0 else _entry_id(instance, source, back)
    elif source == "assistant" and back is not None:
        message = _entry_id(instance, source, back)
    else:
        return Origin(by="model", message=message_id, rule=rule, turn=turn)
    if message is None:
        start = end = None
    said: Literal["user", "assistant"] = "user" if source == "user" else "assistant"
    return Origin(by="model", message=message, start=start, end=end, source=said, rule=rule, turn=turn)


def _entry_id(instance: FSMInstance, source: str, back: int) -> str | None:
    """The transcript id of a witness's message, counted back as grounding counts: the user's messages with this
    turn's (not yet appended) as 0; the assistant's (or a person's) with the newest as 0."""
    roles = ("user",) if source == "user" else ("assistant", "operator")
    skip = back - 1 if source == "user" else back
    for entry in reversed(instance.context.conversation.exchanges):
        if entry_role(entry) in roles:
            if skip == 0:
                found = entry.get("id")
                return found if isinstance(found, str) else None
            skip -= 1
    return None


def between_turns(by: OriginBy, **detail: str) -> Origin:
    """The origin of a write made between turns: an operator's, the application's ``update_context``."""
    return Origin(by=by, at=round(now(), 3), **detail)  # type: ignore[arg-type]


def _put(provenance: dict[str, Origin], path: str, origin: Origin | None) -> None:
    """Set (or, with None, remove) a path's origin: a value written whole replaces the origins of its parts."""
    inner = path + "."
    for key in [k for k in provenance if k.startswith(inner)]:
        del provenance[key]
    if origin is None:
        provenance.pop(path, None)
    else:
        provenance[path] = origin


def prune(instance: FSMInstance) -> None:
    """Origins of the active flow's keys that hold no value any more dropped (a restart clears what the user gave,
    a sub-flow's cancel removes nothing of the parent's): no origin outlives its value."""
    data = instance.context.data
    for key in [k for k in instance.provenance if FLOW_SEPARATOR not in k]:
        if key not in data and get_path(data, key) is _MISSING:
            del instance.provenance[key]


def settle_opening(instance: FSMInstance) -> None:
    """The values the opening wrote were set by no turn: turn 0."""
    for key, origin in list(instance.provenance.items()):
        if origin.turn == 1 and instance.turn_count == 0:
            instance.provenance[key] = origin.model_copy(update={"turn": 0})


def settle_between_turns(instance: FSMInstance) -> None:
    """What an operator's change wrote through the turn's own paths (a sub-flow's hand-over) was set by no turn:
    stamped with the time instead."""
    running, stamp = in_turn(instance), round(now(), 3)
    for key, origin in list(instance.provenance.items()):
        if origin.turn == running:
            instance.provenance[key] = origin.model_copy(update={"turn": None, "at": stamp})


# --- flows ---------------------------------------------------------------------------------------------


def pause(instance: FSMInstance, flow_id: str) -> None:
    """The active flow's origins put aside under its id while another flow runs (``call``)."""
    prefix = flow_id + FLOW_SEPARATOR
    for key in [k for k in instance.provenance if FLOW_SEPARATOR not in k]:
        instance.provenance[prefix + key] = instance.provenance.pop(key)


def leave(instance: FSMInstance) -> None:
    """The active flow's origins dropped: it finished, or was archived (``link``); its data went with it."""
    for key in [k for k in instance.provenance if FLOW_SEPARATOR not in k]:
        del instance.provenance[key]


def resume(instance: FSMInstance, flow_id: str) -> None:
    """A paused flow's origins back as the active flow's."""
    prefix = flow_id + FLOW_SEPARATOR
    for key in [k for k in instance.provenance if k.startswith(prefix)]:
        instance.provenance[key[len(prefix) :]] = instance.provenance.pop(key)


class Origins:
    """A migration's view of the origins: each frame of the flow stack (bottom first, the active one last) has its
    own, the paused ones under their flow id."""

    def __init__(self, provenance: dict[str, Origin], frames: int) -> None:
        self.provenance = provenance
        self.frames = frames

    def _prefix(self, index: int, flow_id: str) -> str:
        return "" if index == self.frames - 1 else flow_id + FLOW_SEPARATOR

    def rename(self, index: int, frame: _Frame, moved: Iterable[tuple[str, str]]) -> None:
        """Origins follow the keys whose values a migration renamed (all taken out first, so swaps swap); a value
        that had no origin leaves none under its new name either."""
        prefix = self._prefix(index, frame.flow_id)
        moving = [(new, self.provenance.pop(prefix + old, None)) for old, new in moved]
        for new, origin in moving:
            _put(self.provenance, prefix + new, origin)

    def set(self, index: int, frame: _Frame, keys: Iterable[str]) -> None:
        """Defaults the migration gave."""
        prefix = self._prefix(index, frame.flow_id)
        for key in keys:
            _put(self.provenance, prefix + key, between_turns("migration"))


__all__ = [
    "FLOW_SEPARATOR",
    "Origin",
    "OriginBy",
    "Origins",
    "between_turns",
    "in_turn",
    "leave",
    "note",
    "note_model",
    "pause",
    "prune",
    "resume",
    "settle_between_turns",
    "settle_opening",
]
