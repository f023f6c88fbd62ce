"""Walking a store's conversations for an audit, a replay or a migration: a page at a time, one conversation
loaded whole at a time, so memory stays bounded whatever the store holds, with progress for a person waiting.

The store is used through its protocol (``list_page``, else ``list``; ``load``), so this module imports none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import ConversationNotFoundError, StoreCorruptedError

PAGE = 200
"""Conversations listed per page while walking a store."""


@dataclass
class Progress:
    """Counts so far, reported at most every ``every`` seconds (and once at the end) to ``report``."""

    report: Callable[[str], None] | None = None
    every: float = 2.0
    conversations: int = 0
    turns: int = 0
    _last: float = 0.0

    def tick(self, instance: FSMInstance, note: str = "") -> None:
        self.conversations += 1
        self.turns += len(instance.turns)
        now = time.monotonic()
        if self.report is not None and now - self._last >= self.every:
            self._last = now
            self.report(f"{self.conversations:,} conversations, {self.turns:,} turns{note}")


def root_name(instance: FSMInstance) -> str:
    """The name of the definition a conversation started on (its root flow's), whichever flow is active."""
    if instance.flow_stack:
        return instance.flow_stack[0].flow_name
    return instance.flow_name or instance.fsm_id


def conversations(
    store: Any,
    *,
    name: str | None = None,
    fsm_id: str | None = None,
    ids: list[str] | None = None,
    unreadable: Callable[[Any, StoreCorruptedError], None] | None = None,
) -> Iterator[tuple[Any, FSMInstance]]:
    """(summary, whole conversation) for every conversation of ``store`` whose root definition is ``name`` (or whose
    root id is ``fsm_id``), or exactly the ``ids`` given; newest first. A conversation deleted while the walk runs
    is skipped. One the store cannot decode is handed to ``unreadable`` and the walk goes on (without it, the
    error ends the walk)."""
    for summary in _summaries(store, ids):
        try:
            instance = store.load(summary.conversation_id, user_id=summary.user_id, room_id=summary.room_id)
        except ConversationNotFoundError:
            continue
        except StoreCorruptedError as exc:
            if unreadable is None:
                raise
            unreadable(summary, exc)
            continue
        if ids is None and name is not None and root_name(instance) != name and instance.root_fsm_id != fsm_id:
            continue
        yield summary, instance


def _summaries(store: Any, ids: list[str] | None) -> Iterator[Any]:
    if ids is None:
        yield from _all(store)
        return
    wanted = dict.fromkeys(ids)
    for summary in _all(store):
        if summary.conversation_id in wanted:
            del wanted[summary.conversation_id]
            yield summary
            if not wanted:
                return
    if wanted:
        raise ConversationNotFoundError(f"no conversation {next(iter(wanted))!r} in the store")


def _all(store: Any) -> Iterator[Any]:
    if not hasattr(store, "list_page"):
        yield from store.list()
        return
    cursor = None
    while True:
        page = store.list_page(limit=PAGE, cursor=cursor)
        yield from page
        cursor = page.next_cursor
        if cursor is None:
            return


__all__ = ["PAGE", "Progress", "conversations", "root_name"]
