"""Reading a reply while it streams: the decision first, then the message's characters.

The reply schema puts ``intent``, ``flow`` and ``transition`` before ``message``,
and constrained decoders write properties in schema order. So once the
``message`` key appears at the top level, everything the engine decides on has
arrived: ``StreamedReply`` parses that prefix as the decision, and from then on
decodes the message string's characters as they come (escapes included, an
unfinished escape held back). A model that writes ``message`` first gives no
early decision; the caller then waits for the whole reply, as without streaming.
"""

from __future__ import annotations

import json
from typing import Any

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class StreamedReply:
    """Feed raw text chunks; read ``decision`` once known and ``take_message()`` as it grows."""

    def __init__(self) -> None:
        self.text = ""
        self.decision: dict[str, Any] | None = None
        self.message_first = False
        self.message_done = False
        self._scan = 0  # next character of ``text`` the structure scanner looks at
        self._start: int | None = None  # index of the top-level object's "{"
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._string_start = 0
        self._last_string: str | None = None  # the last complete string at depth 1 (a key, when ':' follows)
        self._message_at: int | None = None  # index of the first character inside the message string
        self._decoded = 0  # characters of the message (raw index) already decoded
        self._message: list[str] = []
        self._taken = 0

    def feed(self, chunk: str) -> None:
        self.text += chunk
        if self._message_at is None:
            self._find_message()
        if self._message_at is not None and not self.message_done:
            self._decode()

    @property
    def message(self) -> str:
        """The message decoded so far."""
        return "".join(self._message)

    def take_message(self) -> str:
        """The message characters decoded since the last call."""
        text = self.message
        new, self._taken = text[self._taken :], len(text)
        return new

    # --- the structure, up to the message key --------------------------------------------------

    def _find_message(self) -> None:
        text = self.text
        index = self._scan
        while index < len(text):
            char = text[index]
            if self._start is None:
                if char == "{":
                    self._start, self._depth = index, 1
                index += 1
                continue
            if self._in_string:
                if self._escape:
                    self._escape = False
                elif char == "\\":
                    self._escape = True
                elif char == '"':
                    self._in_string = False
                    if self._depth == 1:
                        self._last_string = text[self._string_start : index + 1]
            elif char == '"':
                self._in_string, self._string_start = True, index
            elif char in "{[":
                self._depth += 1
                self._last_string = None
            elif char in "}]":
                self._depth -= 1
                self._last_string = None
            elif char == ":" and self._depth == 1 and self._last_string is not None:
                if self._key(self._last_string) == "message":
                    value = self._value_start(index + 1)
                    if value is None:
                        self._scan = index  # the opening quote has not arrived: look again from the colon
                        return
                    self._on_message_key(self._key_start(index), value)
                    self._scan = len(text)
                    return
                self._last_string = None
            elif not char.isspace() and char != ",":
                self._last_string = None
            index += 1
        self._scan = index

    @staticmethod
    def _key(raw: str) -> str | None:
        try:
            key = json.loads(raw)
        except ValueError:
            return None
        return key if isinstance(key, str) else None

    def _key_start(self, colon: int) -> int:
        return self.text.rindex('"', 0, self.text.rindex('"', 0, colon))

    def _value_start(self, after: int) -> int | None:
        """Index just inside the message string's opening quote, or None if it has not arrived yet."""
        index = after
        while index < len(self.text) and self.text[index].isspace():
            index += 1
        if index >= len(self.text):
            return None
        if self.text[index] != '"':
            return -1  # not a string: no streaming of this message
        return index + 1

    def _on_message_key(self, key_start: int, value_start: int) -> None:
        assert self._start is not None
        prefix = self.text[self._start : key_start].rstrip().rstrip(",") + "}"
        try:
            decision = json.loads(prefix)
        except ValueError:
            decision = None
        if not isinstance(decision, dict) or "transition" not in decision and "target_state" not in decision:
            self.message_first = True  # the decision comes after the message (or never): wait for the whole reply
            return
        if value_start < 0:
            self.message_first = True
            return
        self.decision = decision
        self._message_at = self._decoded = value_start

    # --- the message string ----------------------------------------------------------------------

    def _decode(self) -> None:
        text = self.text
        index = self._decoded
        out = self._message
        while index < len(text):
            char = text[index]
            if char == '"':
                self.message_done = True
                index += 1
                break
            if char != "\\":
                out.append(char)
                index += 1
                continue
            if index + 1 >= len(text):
                break  # an escape cut by the chunk boundary: wait for the rest
            kind = text[index + 1]
            if kind in _ESCAPES:
                out.append(_ESCAPES[kind])
                index += 2
                continue
            if kind != "u":
                out.append(kind)  # invalid escape: keep the character, as lenient parsers do
                index += 2
                continue
            if index + 6 > len(text):
                break
            code = int(text[index + 2 : index + 6], 16) if _is_hex(text[index + 2 : index + 6]) else 0xFFFD
            if 0xD800 <= code < 0xDC00:
                if index + 12 > len(text):
                    break
                low_text = text[index + 8 : index + 12]
                if text[index + 6 : index + 8] == "\\u" and _is_hex(low_text) and 0xDC00 <= int(low_text, 16) < 0xE000:
                    out.append(chr(0x10000 + ((code - 0xD800) << 10) + (int(low_text, 16) - 0xDC00)))
                    index += 12
                    continue
                code = 0xFFFD
            elif 0xDC00 <= code < 0xE000:
                code = 0xFFFD
            out.append(chr(code))
            index += 6
        self._decoded = index


def _is_hex(text: str) -> bool:
    return len(text) == 4 and all(c in "0123456789abcdefABCDEF" for c in text)


def reply_text(response: Any) -> str:
    """A parsed reply written back as JSON in schema order (decision first), for interfaces that cannot stream."""
    obj: dict[str, Any] = {}
    if getattr(response, "intent", None):
        obj["intent"] = response.intent
    if getattr(response, "flow", None):
        obj["flow"] = response.flow
    obj["transition"] = {
        "target_state": response.transition.target_state,
        "context_update": response.transition.context_update,
    }
    obj["message"] = response.message
    return json.dumps(obj, ensure_ascii=False)


__all__ = ["StreamedReply", "reply_text"]
