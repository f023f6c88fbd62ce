"""One way to turn an ``FSMInstance`` into stored text and back, shared by every store.

Stores differ in where bytes live, never in what the bytes mean: every store
writes the whole instance with pydantic's own JSON (so fields added to the
runtime models later are carried without touching a store) and every store
applies the same size caps, so a conversation that fits one backend fits all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import (
    ConversationNotFoundError,
    RecordTooLargeError,
    StoreCorruptedError,
)
from llm_fsm.stores.base import ConversationSummary

DEFAULT_MAX_RECORD_BYTES = 16 * 1024 * 1024
"""Record cap of the embedded stores: large enough never to bite a sane conversation, small enough to stop a runaway
one."""

REDIS_MAX_RECORD_BYTES = 1_000_000
"""Record cap of the Redis store: Redis holds everything in RAM, so the cap is tighter."""

REDIS_MAX_CONTEXT_BYTES = 10_000
"""Context-data cap of the Redis store, the Mathia seed's ``DIALOG_STATE_MAX_SIZE_BYTES``."""


@dataclass(frozen=True)
class SizeLimits:
    """Caps checked before anything is written; ``None`` switches a cap off."""

    max_record_bytes: int | None = DEFAULT_MAX_RECORD_BYTES
    max_context_bytes: int | None = None


@dataclass(frozen=True)
class Encoded:
    """A save, prepared: the record text for the new version and the messages to archive."""

    record: str
    version: int
    archive: list[dict[str, str]]


def context_bytes(instance: FSMInstance) -> int:
    """Size of the context data as compact JSON, the measure the caps are stated in."""
    text = json.dumps(instance.context.data, separators=(",", ":"), ensure_ascii=False, default=str)
    return len(text.encode("utf-8"))


def new_version(expected_version: int | None) -> int:
    """The version a successful compare-and-set produces: 1 on create, n+1 over n."""
    if expected_version is None:
        return 1
    if expected_version < 0:
        raise ValueError(f"expected_version must be None or >= 0, got {expected_version}")
    return expected_version + 1


def check_limits(instance: FSMInstance, limits: SizeLimits, record: str | None = None) -> None:
    """Raise RecordTooLargeError when the instance breaks a cap.

    The record is serialised to be measured only when a record cap is set and
    the caller does not already have the text.
    """
    if limits.max_context_bytes is not None:
        size = context_bytes(instance)
        if size > limits.max_context_bytes:
            raise RecordTooLargeError(
                f"conversation {instance.conversation_id}: context data is {size} bytes, "
                f"over the store's cap of {limits.max_context_bytes} bytes"
            )
    if limits.max_record_bytes is not None:
        size = len((record if record is not None else instance.model_dump_json()).encode("utf-8"))
        if size > limits.max_record_bytes:
            raise RecordTooLargeError(
                f"conversation {instance.conversation_id}: record is {size} bytes, "
                f"over the store's cap of {limits.max_record_bytes} bytes"
            )


def encode(
    instance: FSMInstance,
    *,
    expected_version: int | None,
    limits: SizeLimits,
    indent: int | None = None,
) -> Encoded:
    """Serialize the instance as it will be stored, without touching the caller's object.

    The stored copy carries the new version and an empty ``archive_outbox``: the
    outbox is drained into the archive by the same save, so a later load never
    archives the same messages twice.
    """
    check_limits(instance, SizeLimits(max_record_bytes=None, max_context_bytes=limits.max_context_bytes))
    version = new_version(expected_version)
    stored = instance.model_copy(update={"version": version, "archive_outbox": []})
    record = stored.model_dump_json(indent=indent)
    check_limits(instance, SizeLimits(max_record_bytes=limits.max_record_bytes, max_context_bytes=None), record)
    archive = [dict(message) for message in instance.archive_outbox]
    return Encoded(record=record, version=version, archive=archive)


def decode(text: str | bytes, *, where: str) -> FSMInstance:
    """The stored instance; StoreCorruptedError (naming ``where``) when the text is not a valid record."""
    try:
        return FSMInstance.model_validate_json(text)
    except (ValidationError, ValueError, UnicodeDecodeError) as exc:
        raise StoreCorruptedError(f"{where}: stored record cannot be decoded: {_first_line(exc)}") from exc


def committed(instance: FSMInstance, encoded: Encoded) -> int:
    """Reflect a successful save on the caller's instance: new version, outbox drained."""
    instance.version = encoded.version
    instance.archive_outbox = []
    return encoded.version


def summary_of(instance: FSMInstance) -> ConversationSummary:
    return ConversationSummary(
        conversation_id=instance.conversation_id,
        fsm_id=instance.fsm_id,
        user_id=instance.user_id,
        room_id=instance.room_id,
        current_state=instance.current_state,
        status=instance.status,
        version=instance.version,
        updated_at=instance.updated_at,
    )


def owned_by(instance: FSMInstance, user_id: str | None, room_id: str | None) -> bool:
    """Isolation rule of every store: a record answers only to the exact (user, room) pair it was saved for."""
    return instance.user_id == user_id and instance.room_id == room_id


def not_found(conversation_id: str) -> ConversationNotFoundError:
    """The one error for absent, expired and someone else's conversations, so none can be told apart."""
    return ConversationNotFoundError(f"conversation {conversation_id!r} not found")


def encode_message(message: dict[str, str]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def decode_message(text: str | bytes, *, where: str) -> dict[str, str]:
    try:
        value: Any = json.loads(text)
    except ValueError as exc:
        raise StoreCorruptedError(f"{where}: archived message cannot be decoded: {exc}") from exc
    if not isinstance(value, dict):
        raise StoreCorruptedError(f"{where}: archived message is not an object")
    return {str(k): str(v) for k, v in value.items()}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = [
    "DEFAULT_MAX_RECORD_BYTES",
    "Encoded",
    "REDIS_MAX_CONTEXT_BYTES",
    "REDIS_MAX_RECORD_BYTES",
    "SizeLimits",
    "committed",
    "context_bytes",
    "decode",
    "decode_message",
    "encode",
    "encode_message",
    "new_version",
    "not_found",
    "owned_by",
    "summary_of",
]
