"""Pages of a conversation listing: the cursor every store reads and writes, and paging over a scan.

Listings are ordered newest first by ``(updated_at, conversation_id)``, the id breaking ties, so the
order is total. A cursor holds the last listed conversation's pair, so the next page starts strictly
after it, wherever that conversation stands now: a conversation started or saved meanwhile is newer
than the cursor and lands before it, never on a later page, and shifts no page. (A conversation
saved while a client pages moves to the front: pages never repeat one, and the moved one is seen on
the next listing from the start.)

The cursor is opaque to clients, base64url of a small JSON object, and checked on the way in: a
cursor that no listing produced is an ``InvalidCursorError`` (HTTP 400 ``invalid_cursor``), never a
query the store has to survive.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from llm_fsm.errors import InvalidCursorError, UsageError
from llm_fsm.stores.base import ConversationSummary

MAX_CURSOR_CHARS = 2048
"""Longer than any cursor a listing makes (ids are capped well below), short enough to refuse unread."""
_REFUSED = "the cursor is not one a listing gave (cursors are opaque: pass next_cursor back)"


@dataclass(frozen=True)
class Position:
    """Where a page ended: the last listed conversation's sort key. Pages resume strictly after it."""

    updated_at: float
    conversation_id: str

    def key(self) -> tuple[float, str]:
        return (self.updated_at, self.conversation_id)


class ConversationPage(list[ConversationSummary]):
    """One page of a listing, newest first, and the cursor of the next page (None: this is the last).

    A list of summaries, so code written when listings returned a plain list keeps working.
    """

    next_cursor: str | None

    def __init__(self, items: Iterable[ConversationSummary] = (), next_cursor: str | None = None) -> None:
        super().__init__(items)
        self.next_cursor = next_cursor

    @property
    def items(self) -> list[ConversationSummary]:
        """The page's summaries as a plain list."""
        return list(self)

    def __repr__(self) -> str:
        return f"ConversationPage({list.__repr__(self)}, next_cursor={self.next_cursor!r})"


def sort_key(summary: ConversationSummary) -> tuple[float, str]:
    """What listings order by, newest first."""
    return (summary.updated_at, summary.conversation_id)


def encode_cursor(summary: ConversationSummary) -> str:
    """The cursor of the page after ``summary`` (the last of a page)."""
    text = json.dumps({"t": summary.updated_at, "c": summary.conversation_id}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> Position:
    """The position a cursor of ``encode_cursor`` holds; InvalidCursorError for anything else."""
    if not isinstance(cursor, str) or not cursor or len(cursor) > MAX_CURSOR_CHARS:
        raise InvalidCursorError(_REFUSED)
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value: Any = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidCursorError(_REFUSED) from None
    if not isinstance(value, dict) or set(value) != {"t", "c"}:
        raise InvalidCursorError(_REFUSED)
    updated, conversation_id = value["t"], value["c"]
    if isinstance(updated, bool) or not isinstance(updated, int | float) or not math.isfinite(updated):
        raise InvalidCursorError(_REFUSED)
    if not isinstance(conversation_id, str) or not conversation_id or "\x00" in conversation_id:
        raise InvalidCursorError(_REFUSED)
    return Position(float(updated), conversation_id)


def check_limit(limit: int | None) -> None:
    """A page holds at least one conversation; None is no limit (the whole listing, as before pages)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UsageError(f"limit must be a positive integer or None, not {limit!r}")


def cut(ordered: list[ConversationSummary], limit: int | None) -> ConversationPage:
    """``ordered`` (newest first, up to ``limit + 1`` summaries) as a page: the extra one says another page exists."""
    if limit is None or len(ordered) <= limit:
        return ConversationPage(ordered)
    page = ordered[:limit]
    return ConversationPage(page, encode_cursor(page[-1]))


def page_of(summaries: Iterable[ConversationSummary], limit: int | None, cursor: str | None) -> ConversationPage:
    """A page of a listing held in memory: what stores without an index (memory, files) and older stores serve."""
    check_limit(limit)
    after = None if cursor is None else decode_cursor(cursor).key()
    ordered = sorted(summaries, key=sort_key, reverse=True)
    if after is not None:
        ordered = [s for s in ordered if sort_key(s) < after]
    return cut(ordered, limit)


def page_filter(user_id: str | None, room_id: str | None, all_rooms: bool, cursor: str | None) -> tuple[str, list[Any]]:
    """The conditions of a page in the SQL stores (joined by AND; "" for none), ``?`` marking their parameters.

    A missing owner is ``IS NULL``, never ``IS ?``: PostgreSQL uses no index for ``IS NOT DISTINCT FROM``.
    The cursor's row comparison is what lets the index seek straight to the page.
    """
    clauses: list[str] = []
    params: list[Any] = []
    owner = [("user_id", user_id)] if all_rooms else []
    if not all_rooms and (user_id is not None or room_id is not None):
        owner = [("user_id", user_id), ("room_id", room_id)]
    for column, value in owner:
        clauses.append(f"{column} IS NULL" if value is None else f"{column} = ?")
        params += [] if value is None else [value]
    if cursor is not None:
        after = decode_cursor(cursor)
        clauses.append("(updated_at, conversation_id) < (?, ?)")
        params += [after.updated_at, after.conversation_id]
    return " AND ".join(clauses), params


class ScanPaging:
    """``list_page`` for a store that lists by reading its records (memory, files): paged after the scan."""

    list: Callable[..., list[ConversationSummary]]

    def list_page(
        self,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        all_rooms: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ConversationPage:
        check_limit(limit)
        if cursor is not None:
            decode_cursor(cursor)  # a bad cursor is refused before the scan
        if all_rooms:
            found = [s for s in self.list() if s.user_id == user_id]
        else:
            found = self.list(user_id=user_id, room_id=room_id)
        return page_of(found, limit, cursor)


__all__ = [
    "ConversationPage",
    "Position",
    "ScanPaging",
    "check_limit",
    "cut",
    "decode_cursor",
    "encode_cursor",
    "page_filter",
    "page_of",
    "sort_key",
]
