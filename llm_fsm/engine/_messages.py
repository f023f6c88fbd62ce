"""Messages as the engine takes them and as the transcript keeps them.

A user message is text or a list of content parts in litellm's (OpenAI's) format::

    [{"type": "text", "text": "What is this?"},
     {"type": "image_url", "image_url": {"url": "https://…/photo.jpg"}}]

``check_message`` refuses anything else with a typed error before a turn starts, so nothing of a
refused message is ever saved. The text parts, joined by newlines, are the message's text: what the
engine reasons with (grounding, explain records, the prompt's history window). The parts themselves
go to the model on the turn they are sent.

A transcript entry is a dict with one role key (``user``, ``assistant`` or ``operator``, a human
agent) holding the text, as the seed had it, plus optional fields: ``id``, ``at`` (epoch seconds),
``metadata`` (the application's JSON object) and ``parts`` (the content parts as stored). Records
written before these fields (``{"user": text}``) read the same through the accessors here; nothing
should iterate an entry's items to find its role.

Stored parts keep image URLs, but not the bytes of a ``data:`` URL longer than
``MessageLimits.stored_data_url_chars``: such an image is stored as its media type, length and
SHA-256 (``omitted``), so a 5 MB photo does not land in the record every turn rewrites. The
application that needs the bytes keeps them itself (the digest finds them again).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llm_fsm.engine._data import MAX_VALUE_DEPTH, copy_json, has_lone_surrogate, now
from llm_fsm.errors import InvalidMessageError, MessageTooLargeError

ROLES = ("user", "assistant", "operator")
"""The role keys a transcript entry may have; exactly one per entry."""

FIELDS = ("id", "at", "metadata", "parts")
"""The optional fields beside the role key."""

DEFAULT_MAX_IMAGES = 8
"""Images one message may carry."""

DEFAULT_MAX_IMAGE_URL_CHARS = 5_000_000
"""Characters of one image URL; a ``data:`` URL of a ~3.7 MB image (base64 adds a third)."""

DEFAULT_STORED_DATA_URL_CHARS = 2_048
"""A ``data:`` URL longer than this is stored without its bytes (media type, length and SHA-256 only)."""

DEFAULT_MAX_METADATA_BYTES = 2_048
"""Bytes of one message's metadata as compact JSON: ids of a channel, an attachment list — not documents."""

_DETAILS = ("auto", "low", "high")
_IMAGE_URL_KEYS = frozenset({"url", "detail", "format"})
_DATA_URL = re.compile(r"data:(image/[A-Za-z0-9.+-]+);base64,")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


@dataclass(frozen=True)
class MessageLimits:
    """What a user message may hold; the defaults are the documented ones."""

    max_images: int = DEFAULT_MAX_IMAGES
    max_image_url_chars: int = DEFAULT_MAX_IMAGE_URL_CHARS
    stored_data_url_chars: int = DEFAULT_STORED_DATA_URL_CHARS
    max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES


@dataclass(frozen=True)
class UserMessage:
    """A checked user message: its text, and for a message of content parts the parts as sent and as stored."""

    text: str
    parts: list[dict[str, Any]] | None = None
    """The parts as given (``data:`` URLs whole): what the model receives. None for a plain text message."""
    stored_parts: list[dict[str, Any]] | None = None
    """The parts as the transcript keeps them (long ``data:`` URLs without their bytes)."""
    metadata: dict[str, Any] | None = None
    images: int = 0

    @property
    def model_content(self) -> list[dict[str, Any]] | None:
        """What the model's user message carries instead of the text: the parts, when there is an image.

        Text-only parts go as their joined text, which every provider takes.
        """
        return self.parts if self.images else None


def check_message(
    message: Any, *, max_chars: int, metadata: Any = None, limits: MessageLimits | None = None
) -> UserMessage:
    """The message checked and split into text and parts; ``InvalidMessageError`` (or a child) for anything else."""
    limits = limits or MessageLimits()
    checked_metadata = check_metadata(metadata, limits) if metadata is not None else None
    if isinstance(message, str):
        _check_text(message, "message")
        _check_length(len(message), max_chars)
        return UserMessage(text=message, metadata=checked_metadata)
    if not isinstance(message, list):
        raise InvalidMessageError(f"message must be a string or a list of content parts, not {type(message).__name__}")
    if not message:
        raise InvalidMessageError("message is an empty list of content parts; send at least one part")
    texts: list[str] = []
    stored: list[dict[str, Any]] = []
    images = 0
    for index, part in enumerate(message):
        where = f"message[{index}]"
        if not isinstance(part, Mapping):
            raise InvalidMessageError(f"{where} must be an object with a 'type', not {type(part).__name__}")
        kind = part.get("type")
        if kind == "text":
            _only_keys(part, {"type", "text"}, where)
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidMessageError(f"{where}.text must be a string, not {type(text).__name__}")
            _check_text(text, f"{where}.text")
            texts.append(text)
            stored.append({"type": "text", "text": text})
        elif kind == "image_url":
            images += 1
            if images > limits.max_images:
                raise InvalidMessageError(f"message has more than {limits.max_images} images (max_images)")
            _only_keys(part, {"type", "image_url"}, where)
            stored.append({"type": "image_url", "image_url": _check_image(part.get("image_url"), where, limits)})
        else:
            raise InvalidMessageError(
                f"{where}.type must be 'text' or 'image_url', not {kind!r}"
                if isinstance(kind, str)
                else f"{where} has no 'type' ('text' or 'image_url')"
            )
    text = "\n".join(texts)
    _check_length(len(text), max_chars)
    given = [copy_json(dict(part)) for part in message]
    return UserMessage(text=text, parts=given, stored_parts=stored, metadata=checked_metadata, images=images)


def check_metadata(metadata: Any, limits: MessageLimits | None = None) -> dict[str, Any]:
    """A message's metadata: a JSON object of at most ``max_metadata_bytes``; a copy, so the caller keeps theirs.

    Only what a store gives back unchanged is taken: string keys, lists (not tuples), finite numbers.
    """
    limits = limits or MessageLimits()
    if not isinstance(metadata, Mapping):
        raise InvalidMessageError(f"metadata must be a JSON object, not {type(metadata).__name__}")
    metadata = dict(metadata)
    _check_json(metadata, "metadata", 0)
    text = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode("utf-8"))
    if size > limits.max_metadata_bytes:
        raise MessageTooLargeError(
            f"message metadata is {size} bytes as JSON; the limit is {limits.max_metadata_bytes} (max_metadata_bytes)"
        )
    copied: dict[str, Any] = copy_json(metadata)
    return copied


def _check_json(value: Any, where: str, depth: int) -> None:
    if depth > MAX_VALUE_DEPTH:
        raise InvalidMessageError(f"{where}: nested deeper than {MAX_VALUE_DEPTH} levels")
    kind = type(value)
    if kind is str:
        if has_lone_surrogate(value):
            raise InvalidMessageError(f"{where}: text that is not valid Unicode (half of a UTF-16 surrogate pair)")
    elif kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise InvalidMessageError(f"{where}: keys must be strings, not {type(key).__name__}")
            _check_json(key, where, depth)
            _check_json(item, f"{where}.{key}", depth + 1)
    elif kind is list:
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]", depth + 1)
    elif kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidMessageError(f"{where}: numbers must be finite")
    elif value is not None and kind not in (int, bool):
        raise InvalidMessageError(f"{where}: {kind.__name__} is not JSON (objects, arrays, strings, numbers, booleans)")


def _check_text(text: str, where: str) -> None:
    if has_lone_surrogate(text):
        raise InvalidMessageError(
            f"{where} is not valid Unicode text (it holds half of a UTF-16 surrogate pair); "
            "decode the client's bytes as UTF-8 before passing them"
        )


def _check_length(length: int, max_chars: int) -> None:
    if length > max_chars:
        raise MessageTooLargeError(f"message has {length} characters; the limit is {max_chars} (max_input_chars)")


def _only_keys(part: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in part if k not in allowed)
    if unknown:
        raise InvalidMessageError(
            f"{where} has unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}"
        )


def _check_image(image: Any, where: str, limits: MessageLimits) -> dict[str, Any]:
    """One ``image_url`` object checked; returns it as stored."""
    where = f"{where}.image_url"
    if not isinstance(image, Mapping):
        raise InvalidMessageError(f"{where} must be an object with a 'url'")
    unknown = sorted(str(k) for k in image if k not in _IMAGE_URL_KEYS)
    if unknown:
        raise InvalidMessageError(f"{where} has unknown field(s) {', '.join(unknown)}; allowed: url, detail, format")
    url = image.get("url")
    if not isinstance(url, str) or not url:
        raise InvalidMessageError(f"{where}.url must be a non-empty string")
    detail = image.get("detail")
    if detail is not None and detail not in _DETAILS:
        raise InvalidMessageError(f"{where}.detail must be one of {', '.join(_DETAILS)}")
    media = image.get("format")
    if media is not None and (not isinstance(media, str) or has_lone_surrogate(media)):
        raise InvalidMessageError(f"{where}.format must be a string (a media type)")
    if len(url) > limits.max_image_url_chars:
        raise MessageTooLargeError(
            f"{where}.url has {len(url)} characters; the limit is {limits.max_image_url_chars} (max_image_url_chars)"
        )
    stored = {key: image[key] for key in ("url", "detail", "format") if key in image}
    if url.startswith("data:"):
        found = _DATA_URL.match(url)
        if found is None or _BASE64.fullmatch(url, found.end()) is None:
            raise InvalidMessageError(f"{where}.url is a data: URL but not 'data:image/<type>;base64,<base64>'")
        if len(url) > limits.stored_data_url_chars:
            stored["url"] = found.group(0)
            stored["omitted"] = {"chars": len(url), "sha256": hashlib.sha256(url.encode("ascii")).hexdigest()}
        return stored
    if not url.startswith(("https://", "http://")) or has_lone_surrogate(url) or any(c.isspace() for c in url):
        raise InvalidMessageError(f"{where}.url must be an http(s) URL or a data:image/…;base64 URL")
    return stored


# --- transcript entries --------------------------------------------------------------------


def new_message_id() -> str:
    """``msg_`` and 12 random hex digits: unique within any conversation, short in the record every turn rewrites."""
    return f"msg_{uuid.uuid4().hex[:12]}"


def timestamp() -> float:
    """Now, to the millisecond: finer is noise, and every digit is in the record each turn rewrites."""
    return round(now(), 3)


def make_entry(
    role: str,
    text: str,
    *,
    id: str | None = None,
    at: float | None = None,
    metadata: dict[str, Any] | None = None,
    parts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A transcript entry: the role key first (the seed's shape), then an id and a time, then what is given."""
    entry: dict[str, Any] = {role: text, "id": id or new_message_id(), "at": timestamp() if at is None else at}
    if metadata:
        entry["metadata"] = metadata
    if parts:
        entry["parts"] = parts
    return entry


def entry_role(entry: Mapping[str, Any]) -> str:
    """The entry's role: its one role key (an entry of a format to come without one reads as its first key)."""
    for role in ROLES:
        if role in entry:
            return role
    return next((str(key) for key in entry if key not in FIELDS), "unknown")


def entry_text(entry: Mapping[str, Any]) -> str:
    text = entry.get(entry_role(entry), "")
    return text if isinstance(text, str) else str(text)


def entry_images(entry: Mapping[str, Any]) -> int:
    parts = entry.get("parts")
    if not isinstance(parts, list):
        return 0
    return sum(1 for part in parts if isinstance(part, Mapping) and part.get("type") == "image_url")


def entry_view(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The entry as ``get_conversation_history`` gives it: the same keys for every message, JSON-ready, a copy.

    ``id`` and ``at`` are None for a message stored before messages had them; ``parts`` is None for plain text.
    """
    metadata = entry.get("metadata")
    parts = entry.get("parts")
    return {
        "role": entry_role(entry),
        "text": entry_text(entry),
        "id": entry.get("id"),
        "at": entry.get("at"),
        "metadata": copy_json(metadata) if isinstance(metadata, dict) else {},
        "parts": copy_json(parts) if isinstance(parts, list) else None,
    }


__all__ = [
    "DEFAULT_MAX_IMAGES",
    "DEFAULT_MAX_IMAGE_URL_CHARS",
    "DEFAULT_MAX_METADATA_BYTES",
    "DEFAULT_STORED_DATA_URL_CHARS",
    "MessageLimits",
    "ROLES",
    "UserMessage",
    "check_message",
    "check_metadata",
    "entry_images",
    "entry_role",
    "entry_text",
    "entry_view",
    "make_entry",
    "new_message_id",
]
