"""Calling the application's hooks, sync or async: the runtime's side of ``llm_fsm.engine._hooks``.

The engine says which hooks a turn calls and what their results mean (``check_result``); calling them is I/O
(an async hook needs an event loop), so it lives with the runtime and the pure core imports no asyncio.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable
from typing import Any

from llm_fsm.engine._hooks import HookEvent, HookFunction, check_result
from llm_fsm.errors import HookError


def run_sync(name: str, functions: list[HookFunction], event: HookEvent) -> dict[str, Any]:
    """Call hooks from synchronous code; async hooks run to completion in a private event loop."""
    merged: dict[str, Any] = {}
    for function in functions:
        try:
            result = function(event)
            if inspect.isawaitable(result):
                result = asyncio.run(_await(result))
        except HookError:
            raise
        except Exception as exc:  # noqa: BLE001 - any application error becomes a typed HookError
            raise HookError(name, exc) from exc
        merged.update(check_result(name, result))
    return merged


async def run_async(name: str, functions: list[HookFunction], event: HookEvent) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for function in functions:
        try:
            result = function(event)
            if inspect.isawaitable(result):
                result = await result
        except HookError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise HookError(name, exc) from exc
        merged.update(check_result(name, result))
    return merged


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


__all__ = ["run_async", "run_sync"]
