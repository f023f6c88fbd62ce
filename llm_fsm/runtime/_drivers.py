"""The drivers: run an operation's generator through the performer, and make the waits it needs.

Each driver runs an operation's effects through the performer (``Performer.at_once`` answers most without a
wait; the others' handlers yield waits) and makes the waits. The sync and async drivers below differ only in how
they wait (a call on this thread, or an awaited
coroutine — the interface's or store's own, else the call on the library's I/O pool). The streaming
driver (``_stream.py``) differs in one more thing, how it reads the model. Errors the engine's generators
are written to handle (a sub-flow that cannot load, a save that lost its compare-and-set) are thrown back
into them; any other error ends the operation and reaches the caller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

from llm_fsm._threads import run_blocking
from llm_fsm.errors import ConcurrentUpdateError, DefinitionError
from llm_fsm.runtime._effects import Blocking, ReadRest, Retract, Tell, Wait
from llm_fsm.runtime._performer import WAITS, Handling, Performer

_R = TypeVar("_R")

RECOVERABLE: tuple[type[Exception], ...] = (DefinitionError, ConcurrentUpdateError)
"""Errors thrown back into a generator, which handles them; everything else reaches the caller."""

Operation = Generator[Any, Any, _R]


def run(performer: Performer, operation: Operation[_R]) -> _R:
    """Drive from a thread: each effect through the performer, each wait a call that blocks this thread."""
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                effect = operation.throw(error) if error is not None else operation.send(value)
            except StopIteration as stop:
                result: _R = stop.value
                return result
            value, error = None, None
            try:
                value = performer.at_once(effect)
                if value is WAITS:
                    value = _wait_through(performer.handle(effect))
            except RECOVERABLE as exc:
                value, error = None, exc
    finally:
        performer.close()


def _wait_through(handling: Handling) -> Any:
    """One effect's handler, its waits made on this thread; what it raises, the effect raises."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            wait = handling.throw(error) if error is not None else handling.send(value)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        try:
            if isinstance(wait, Blocking):
                value = wait.call()
            elif isinstance(wait, ReadRest):  # pragma: no cover - only a streamed model call leaves a rest
                raise TypeError("a reply's rest is read only by the streaming driver")
        except BaseException as exc:  # noqa: BLE001 - thrown into the handler, which decides
            error = exc


async def arun(
    performer: Performer, operation: Operation[_R], wait_for: Callable[[Wait], Awaitable[Any]] | None = None
) -> _R:
    """Drive from async code: each wait is awaited, and nothing blocking runs on the event loop.

    ``wait_for`` makes the waits another way (the streaming driver reads the model's stream); the loops, and so
    what is thrown back into the operation, stay these.
    """
    wait_for = wait_for or await_wait
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            try:
                effect = operation.throw(error) if error is not None else operation.send(value)
            except StopIteration as stop:
                result: _R = stop.value
                return result
            value, error = None, None
            try:
                value = performer.at_once(effect)
                if value is WAITS:
                    value = await _await_through(performer.handle(effect), wait_for)
            except RECOVERABLE as exc:
                value, error = None, exc
    finally:
        performer.close()


async def _await_through(handling: Handling, wait_for: Callable[[Wait], Awaitable[Any]]) -> Any:
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            wait = handling.throw(error) if error is not None else handling.send(value)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        try:
            value = await wait_for(wait)
        except BaseException as exc:  # noqa: BLE001
            error = exc


async def await_wait(wait: Wait) -> Any:
    """How async code makes a wait other than a streamed read."""
    if isinstance(wait, Blocking):
        if wait.acall is not None:
            return await wait.acall()
        return await run_blocking(wait.call)
    if isinstance(wait, Tell | Retract):
        return None
    raise TypeError("a reply's rest is read only by the streaming driver")  # pragma: no cover


__all__ = ["RECOVERABLE", "Operation", "arun", "await_wait", "run"]
