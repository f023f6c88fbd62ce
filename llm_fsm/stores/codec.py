"""One way to turn an ``FSMInstance`` into stored text and back, shared by every store.

Stores differ in where bytes live, never in what the bytes mean: every store
writes the instance with pydantic's own JSON (so fields added to the runtime
models later are carried without touching a store) and every store applies the
same size caps, so a conversation that fits one backend fits all.

A save is split in two (``encode``): the *hot record*, the instance less its
turn records and processed message ids, which every turn reads and rewrites;
and the *log entries*, the turn records and (message id, reply) pairs, which a
store appends and trims (see ``stores.base.TurnLogStore``). A record written
before the split still decodes: its turns and ids come back inside the instance
and the next save moves them to the log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from llm_fsm.engine._chain import digest, stored_payload
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import TurnRecord
from llm_fsm.errors import (
    ConversationNotFoundError,
    RecordTooLargeError,
    StoreCorruptedError,
)
from llm_fsm.stores.base import ConversationSummary, Retention

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


_TURN_INDEX = re.compile(r'^\{"index":(\d+)')
"""A logged record's index, read from its text when the rest cannot be parsed (pydantic writes it first)."""

COLD_FIELDS: set[str] = {"turns", "processed_messages"}
"""Fields of ``FSMInstance`` kept in the turn log, not in the hot record: no turn reads them (a retried message id
is looked up by the store, see ``TurnLogStore.load_for_turn``)."""


@dataclass(frozen=True)
class Encoded:
    """A save, prepared: the record text for the new version, the messages to archive and the log entries."""

    record: str
    version: int
    archive: list[dict[str, Any]]
    turns: list[tuple[int, str]] = field(default_factory=list)
    """(index, TurnRecord as compact JSON) of every turn record the instance holds, in its order (empty when the
    record is not split: the turns are then inside ``record``)."""
    replies: list[tuple[str, str]] = field(default_factory=list)
    """(message id, reply) of every processed message id the instance holds, oldest first."""
    retention: Retention = field(default_factory=Retention)


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
    split: bool = False,
    retention: Retention | None = None,
) -> Encoded:
    """Serialize the instance as it will be stored, without touching the caller's object.

    The stored copy carries the new version and an empty ``archive_outbox``: the
    outbox is drained into the archive by the same save, so a later load never
    archives the same messages twice. ``split``: the record is the hot record
    and the turn records and message ids come apart, as log entries; the record
    cap applies to the hot record.
    """
    check_limits(instance, SizeLimits(max_record_bytes=None, max_context_bytes=limits.max_context_bytes))
    version = new_version(expected_version)
    stored = instance.model_copy(update={"version": version, "archive_outbox": []})
    record = stored.model_dump_json(indent=indent, exclude=COLD_FIELDS if split else None)
    check_limits(instance, SizeLimits(max_record_bytes=limits.max_record_bytes, max_context_bytes=None), record)
    archive = [dict(message) for message in instance.archive_outbox]
    if not split:
        return Encoded(record=record, version=version, archive=archive)
    return Encoded(
        record=record,
        version=version,
        archive=archive,
        turns=[(turn.index, turn.model_dump_json()) for turn in instance.turns],
        replies=list(instance.processed_messages.items()),
        retention=retention or Retention(),
    )


def turns_after(turns: Iterable[tuple[int, str]], last_index: int | None) -> list[tuple[int, str]]:
    """The encoded turns a save appends: those above the last index logged, in index order.

    A turn record at or below it is already in the log (an instance loaded whole and saved again,
    or a save replayed), so a log never holds one index twice.
    """
    fresh = [entry for entry in turns if last_index is None or entry[0] > last_index]
    return sorted(fresh, key=lambda entry: entry[0])


def decode_turn(data: str | bytes | dict[str, Any], *, where: str) -> TurnRecord:
    """One logged turn record (JSON text, or already parsed); StoreCorruptedError (naming ``where``) when it cannot
    be decoded."""
    try:
        # the text is parsed once, by pydantic; the chain's digest below reads the same bytes, not a parse of them
        record = TurnRecord.model_validate(data) if isinstance(data, dict) else TurnRecord.model_validate_json(data)
    except (ValidationError, ValueError, UnicodeDecodeError) as exc:
        if isinstance(data, dict):
            text = f'{{"index":{data.get("index")}'
        else:
            text = data if isinstance(data, str) else bytes(data[:200]).decode("utf-8", "replace")
        turn = _TURN_INDEX.search(text)
        named = f" (turn {turn.group(1)})" if turn else ""
        raise StoreCorruptedError(f"{where}: logged turn record{named} cannot be decoded: {_first_line(exc)}") from exc
    if record.chain is not None and not isinstance(data, dict):  # for the audit: the bytes its chain hash covers
        stored = stored_payload(data)
        record._payload_digest = digest(stored if stored is not None else b"")
    return record


def with_log(instance: FSMInstance, turns: Iterable[TurnRecord], replies: Iterable[tuple[str, str]]) -> FSMInstance:
    """The whole instance: the hot record with its logged turn records and message ids put back.

    A record of the format before the split holds its own; entries of both are merged (by turn
    index and message id), so a record read between the split and its first save loses nothing.
    """
    merged = {turn.index: turn for turn in turns}
    for turn in instance.turns:
        merged.setdefault(turn.index, turn)
    instance.turns = [merged[index] for index in sorted(merged)]
    answered = dict(replies)
    for message_id, reply in instance.processed_messages.items():
        answered.setdefault(message_id, reply)
    instance.processed_messages = answered
    return instance


def for_turn(instance: FSMInstance, message_id: str | None, reply: str | None) -> FSMInstance:
    """The hot record as a turn receives it: ``message_id`` → ``reply`` when the store found that id answered."""
    if message_id is not None and reply is not None:
        instance.processed_messages[message_id] = reply
    return instance


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


def encode_message(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def decode_message(text: str | bytes, *, where: str) -> dict[str, Any]:
    """An archived transcript entry as it was stored: its role key, and ``id``, ``at``, ``metadata`` and ``parts``
    when it has them (their JSON types kept; a record of the seed's shape has the role key alone)."""
    try:
        value: Any = json.loads(text)
    except ValueError as exc:
        raise StoreCorruptedError(f"{where}: archived message cannot be decoded: {exc}") from exc
    if not isinstance(value, dict):
        raise StoreCorruptedError(f"{where}: archived message is not an object")
    return value


NUL_MARK = "\ue000"
"""Starts a value ``escape_nul`` wrote as its JSON string (a private-use character: no text means anything by it)."""


def escape_nul(value: str) -> str:
    """``value`` as a column that cannot hold U+0000 (PostgreSQL's ``text``) can: unchanged, unless it contains
    U+0000 or starts with ``NUL_MARK``; then the mark and the value's JSON string, which escapes U+0000.

    Message ids and replies are stored as plain text, unlike records (whose JSON escapes U+0000 already), and a
    model's reply may contain one; a value that needs no escape stays as it is, so the rows stay readable in SQL
    and rows written before the escape read back unchanged.
    """
    if "\x00" in value or value.startswith(NUL_MARK):
        return NUL_MARK + json.dumps(value, ensure_ascii=False)
    return value


def unescape_nul(text: str) -> str:
    """The value ``escape_nul`` stored as ``text``. Text that is not exactly what ``escape_nul`` writes (a row
    stored before the escape that happens to start with the mark) is taken as it is."""
    if not text.startswith(NUL_MARK):
        return text
    try:
        value = json.loads(text[1:])
    except ValueError:
        return text
    return value if isinstance(value, str) and escape_nul(value) == text else text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


__all__ = [
    "COLD_FIELDS",
    "DEFAULT_MAX_RECORD_BYTES",
    "Encoded",
    "NUL_MARK",
    "REDIS_MAX_CONTEXT_BYTES",
    "REDIS_MAX_RECORD_BYTES",
    "SizeLimits",
    "committed",
    "context_bytes",
    "decode",
    "decode_message",
    "decode_turn",
    "encode",
    "encode_message",
    "escape_nul",
    "for_turn",
    "new_version",
    "not_found",
    "owned_by",
    "summary_of",
    "turns_after",
    "unescape_nul",
    "with_log",
]
