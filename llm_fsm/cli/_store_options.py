"""The options that name a stored conversation: ``--store`` (else ``$LLM_FSM_STORE``), and ``--user`` and
``--room``, the owner a stored conversation answers to. ``chat``, ``run``, ``explain``, ``trace`` and
``conversations`` share them, and the error that says which owner was looked up."""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import click

from llm_fsm.errors import ConversationNotFoundError

STORE_ENV = "LLM_FSM_STORE"


def _store_url(store: str | None) -> str | None:
    """``--store``, else ``$LLM_FSM_STORE``, else None (the default SQLite file)."""
    return store or os.environ.get(STORE_ENV) or None


@dataclass(frozen=True)
class Owner:
    """The user and room a conversation belongs to (``--user`` / ``--room``); stores answer only to the exact pair."""

    user_id: str | None = None
    room_id: str | None = None

    @property
    def kwargs(self) -> dict[str, str | None]:
        return {"user_id": self.user_id, "room_id": self.room_id}

    def describe(self) -> str:
        user = f"user {self.user_id!r}" if self.user_id is not None else "no user"
        room = f"room {self.room_id!r}" if self.room_id is not None else "no room"
        return f"{user} and {room}"

    def options(self) -> str:
        """The flags that name this owner again, for hints."""
        pairs = (("user", self.user_id), ("room", self.room_id))
        return "".join(f" --{flag} {shlex.quote(value)}" for flag, value in pairs if value is not None)


@contextlib.contextmanager
def _looking_up(conversation_id: str, owner: Owner) -> Iterator[None]:
    """Say which user and room a conversation was looked up with when it is not found."""
    try:
        yield
    except ConversationNotFoundError as exc:
        raise ConversationNotFoundError(
            f"{exc} for {owner.describe()} (a conversation answers only to the user and room it was started with; "
            "`llm-fsm conversations` lists each one's user and room: pass them with --user and --room)"
        ) from None


_store_option = click.option(
    "--store",
    help="Store URL: sqlite:///rel.db (sqlite:////abs.db), memory://, redis://host:port/db, file:///dir "
    "(default: $LLM_FSM_STORE, else the user's conversations.db).",
)


def _owner_options(func: Any) -> Any:
    """``--user`` and ``--room``: whose conversation this is (a stored conversation answers only to its own pair)."""
    func = click.option("--room", "room_id", default=None, help="The room the conversation belongs to.")(func)
    return click.option("--user", "user_id", default=None, help="The user the conversation belongs to.")(func)
