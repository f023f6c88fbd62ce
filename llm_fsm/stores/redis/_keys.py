"""Ids escaped into key segments: no id can contain ``:`` or pose as another key (layout: the package's docstring)."""

from __future__ import annotations

import re


def key_part(value: str | None) -> str:
    """An id as one key segment: ``%`` and ``:`` escaped, ``None`` as ``_`` and a literal ``_`` as ``%5F``.

    Escaped segments never contain ``:``, so a key's segment count says what it
    is, and never start with ``%`` followed by a letter, so ``%all`` is reserved.
    """
    if value is None:
        return "_"
    if value == "_":
        return "%5F"
    return value.replace("%", "%25").replace(":", "%3A")


_ESCAPES = {"%25": "%", "%3A": ":", "%5F": "_"}


def _unescape(part: str) -> str:
    return re.sub(r"%(?:25|3A|5F)", lambda m: _ESCAPES[m.group(0)], part)


def _owner(part: str) -> str | None:
    """A user or room segment back to the id (``_`` is None)."""
    return None if part == "_" else _unescape(part)


def _log_keys(record_key: str) -> tuple[str, str, str]:
    """The turn log's keys beside a record: turns, replies, reply ids."""
    return f"{record_key}:turns", f"{record_key}:replies", f"{record_key}:reply_ids"


def _split_member(member: str) -> tuple[str | None, str | None, str]:
    user, room, cid = member.split(":", 2)
    return _owner(user), _owner(room), _unescape(cid)


EXPIRY_GRACE_SECONDS = 60.0
"""How long past its record's TTL an index entry may stay: the expiry index is scored by the client's clock, the
record expires by the server's, so a client clock ahead of the server's by less than this never unlists a live
conversation."""


def user_index(prefix: str, user_id: str | None) -> str:
    """The zset of one user's conversations in every room (``%rooms`` is no escaped room, so no pair's key)."""
    return f"{prefix}:{key_part(user_id)}:%rooms"


def room_member(conversation_id: str, room_id: str | None) -> str:
    """A conversation in its user's index: ``R:C``."""
    return f"{key_part(room_id)}:{key_part(conversation_id)}"


def _split_room_member(member: str) -> tuple[str | None, str]:
    room, cid = member.split(":", 1)
    return _owner(room), _unescape(cid)
