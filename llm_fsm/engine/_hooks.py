"""Application hooks: where the application takes part in a turn.

A hook is any callable, sync or async, taking a ``HookEvent``. It may return a
mapping of context additions (look up a customer's tier, derive a total, hand
back a booking reference); those are applied as *application* updates, which
may set protected keys. A hook that raises stops the turn: nothing of it is
saved and the caller gets ``HookError``.

=======================  ===============================================  =======================
hook                     when                                             typical use
=======================  ===============================================  =======================
``on_start``             a conversation was created, before the opening   seed the context
``before_llm``           a user message arrived, before the model call    add fresh facts
``after_context_update`` the model's update was applied, before deciding  derive keys guards read
``on_transition``        the engine moved to another state                side effects, new keys
``on_end``               a terminal state was reached                     hand results over
=======================  ===============================================  =======================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from llm_fsm.engine._records import Verdict
from llm_fsm.errors import HookError

HookName = Literal["on_start", "before_llm", "after_context_update", "on_transition", "on_end"]
HOOK_NAMES: tuple[str, ...] = ("on_start", "before_llm", "after_context_update", "on_transition", "on_end")

HookResult = Mapping[str, Any] | None
HookFunction = Callable[["HookEvent"], HookResult | Awaitable[HookResult]]


@dataclass(frozen=True)
class HookEvent:
    """What a hook sees. ``data`` is a read-only view: return additions instead of mutating."""

    name: str
    conversation_id: str
    fsm_id: str
    state: str
    data: Mapping[str, Any]
    message: str | None = None
    previous_state: str | None = None
    verdict: Verdict | None = None


@dataclass
class Hooks:
    """A registry of hook functions by hook name, called in registration order."""

    functions: dict[str, list[HookFunction]] = field(default_factory=dict)

    def register(self, name: str, function: HookFunction) -> HookFunction:
        if name not in HOOK_NAMES:
            raise ValueError(f"unknown hook {name!r}; choose one of {', '.join(HOOK_NAMES)}")
        self.functions.setdefault(name, []).append(function)
        return function

    def has(self, name: str) -> bool:
        return bool(self.functions.get(name))

    def get(self, name: str) -> list[HookFunction]:
        return self.functions.get(name, [])


def make_event(name: str, *, data: Mapping[str, Any], **fields: Any) -> HookEvent:
    from llm_fsm.engine._data import copy_json

    return HookEvent(name=name, data=MappingProxyType(copy_json(dict(data))), **fields)


def check_result(name: str, result: Any) -> dict[str, Any]:
    """A hook's return value as context additions; anything but a mapping or None is an error."""
    if result is None:
        return {}
    if isinstance(result, Mapping):
        return dict(result)
    raise HookError(
        name, TypeError(f"a hook must return a mapping of context additions or None, not {type(result).__name__}")
    )


__all__ = ["HOOK_NAMES", "HookEvent", "HookFunction", "HookName", "Hooks"]
