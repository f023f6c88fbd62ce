"""The application's side of actions: a registry of functions, and calling one with its timeout.

A definition's states declare *which* action runs *when* (``llm_fsm.definition.ActionDeclaration``); the
application registers the function under that name::

    manager.actions.register("lookup_order", lookup_order)       # sync or async

    @manager.actions.register("check_slot")
    async def check_slot(date: str, party_size: int) -> dict: ...

The function is called with the declared inputs as keyword arguments (and, when it takes a parameter
named ``call``, an ``ActionCall`` with the conversation id, the state and an idempotency key). It returns
a mapping (or a pydantic model) whose fields the declaration's ``outputs`` copy into the context, or
``HandOff(reason)`` to give the conversation to a person.

Whatever the function does — raise, hang past ``timeout_s``, return garbage — comes back to the engine as
an ``ActionResult``, never as an exception, so the declaration's ``on_error`` decides what happens. A
sync function runs on the library's I/O pool (so a timeout can be kept); a function that outlives its
timeout is abandoned, not killed: keep backends' own timeouts shorter. Sync functions run on a pool of their
own (``MAX_ACTION_WORKERS`` threads), so hung backends cannot starve the store's I/O.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol, TypeVar, overload

from llm_fsm.definition._actions import mcp_tool_of
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._actions import ActionCall, ActionResult, CallAction, HandOff, registered_names
from llm_fsm.errors import ActionNotRegisteredError, UsageError

ActionFunction = Callable[..., Any] | Callable[..., Awaitable[Any]]

MAX_ACTION_WORKERS = 32
"""Threads for sync action functions. Their own pool, not the library's I/O pool: a backend that hangs past
its timeout keeps its thread (a thread cannot be killed), and thirty-two hung calls must not leave the store
without a thread to load and save with."""

_executor: ThreadPoolExecutor | None = None
_guard = threading.Lock()


def action_executor() -> ThreadPoolExecutor:
    """The pool sync actions run on, created on first use."""
    global _executor
    if _executor is None:
        with _guard:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=MAX_ACTION_WORKERS, thread_name_prefix="llm_fsm-action")
    return _executor


_F = TypeVar("_F", bound=Callable[..., Any])
_A = TypeVar("_A")
_T = TypeVar("_T")


MAX_CALLS_PER_ACTION = 8
"""Calls of one sync action whose threads are still busy (running, or hung past their timeout) before the next
call of it fails at once as ``busy``: one hung backend may take a quarter of the pool, never all of it, so
the other actions keep their threads."""


class ThreadSlots:
    """The pool threads one registered function (an action, a retriever) keeps busy, bounded: a call that finds
    them all taken fails at once as ``busy`` rather than queueing behind a hung backend."""

    __slots__ = ("_count", "in_flight")

    def __init__(self) -> None:
        self.in_flight = 0
        self._count = threading.Lock()

    def enter(self, bound: int) -> bool:
        """Take one of the slots, or say there is none free."""
        with self._count:
            if self.in_flight >= bound:
                return False
            self.in_flight += 1
            return True

    def leave(self) -> None:
        with self._count:
            self.in_flight -= 1

    def wait_for(self, run: Callable[[_A], _T], argument: _A, timeout: float) -> _T | None:
        """``run(argument)`` on the pool, once a slot is taken (``enter``): its result, or None past ``timeout``.

        ``run`` frees the slot itself when it ends (a hung call keeps it until then); a call that never started
        is cancelled and its slot freed here, on a timeout or when this thread is interrupted while waiting.
        """
        future = action_executor().submit(run, argument)
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            if future.cancel():
                self.leave()
            return None
        except BaseException:  # this thread interrupted while waiting: not the call's failure
            if future.cancel():
                self.leave()
            raise

    async def await_for(self, run: Callable[[_A], _T], argument: _A, timeout: float) -> _T | None:
        """``wait_for`` from async code: the event loop is never blocked on the pool, and a cancelled turn (a
        shutdown) frees the slot of a call that never started, as an interrupted thread does."""
        import asyncio

        future = action_executor().submit(run, argument)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        except TimeoutError:
            if future.cancel():
                self.leave()
            return None
        except BaseException:  # the turn itself cancelled: not the call's failure
            if future.cancel():
                self.leave()
            raise


class _Registered(ThreadSlots):
    __slots__ = ("function", "is_async", "takes_call")

    def __init__(self, function: ActionFunction) -> None:
        super().__init__()
        self.function = function
        self.is_async = inspect.iscoroutinefunction(function)
        try:
            self.takes_call = "call" in inspect.signature(function).parameters
        except (TypeError, ValueError):  # a builtin without a signature
            self.takes_call = False

    def arguments(self, effect: CallAction) -> dict[str, Any]:
        return {**effect.arguments, "call": effect.call} if self.takes_call else dict(effect.arguments)

    def run_guarded(self, arguments: dict[str, Any]) -> _Outcome:
        """On a pool thread: call the function and keep whatever it raises as data, then free the slot."""
        try:
            if self.is_async:
                return _Outcome(_run_coroutine(self.function, arguments))
            return _Outcome(self.function(**arguments))
        except BaseException as exc:  # noqa: BLE001 - SystemExit or KeyboardInterrupt from a backend is its failure
            return _Outcome(error=exc)
        finally:
            self.leave()

    async def await_guarded(self, arguments: dict[str, Any]) -> _Outcome:
        """An async function, with whatever it raises kept as data — except the cancellation of the turn itself
        (a timeout, a shutdown), which must go on cancelling."""
        import asyncio

        try:
            return _Outcome(await self.function(**arguments))
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            return _Outcome(error=exc)  # the action raised CancelledError itself: its failure, not ours
        except BaseException as exc:  # noqa: BLE001
            return _Outcome(error=exc)


class _Outcome:
    """What an action function did, carried out of its thread or task without raising there."""

    __slots__ = ("error", "value")

    def __init__(self, value: Any = None, *, error: BaseException | None = None) -> None:
        self.value = value
        self.error = error

    def result(self, started: float) -> ActionResult:
        if self.error is not None:
            return _failed(self.error, started)
        try:
            value = _readable(self.value)
        except Exception as exc:  # noqa: BLE001 - a result that cannot be read is the action's failure
            return _failed(exc, started, what="its result could not be read: ")
        return ActionResult(value=value, duration_ms=_ms(started))


def _readable(value: Any) -> Any:
    """The result as plain data, read here where a failure is the action's: a mapping (or a pydantic model's
    dump) whose reading raises must fail the action, not the turn that reads its outputs later."""
    if isinstance(value, HandOff):
        return value
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump(mode="json")
        return dict(dumped) if isinstance(dumped, Mapping) else dumped
    return value


class ActionSource(Protocol):
    """Functions for a family of names the application does not register one by one: ``llm_fsm.mcp.MCPTools``
    answers ``mcp:SERVER/TOOL`` for every tool of its configured servers."""

    def resolve(self, name: str) -> ActionFunction | None:
        """The function for action ``name``, or None when the name is not this source's."""

    def close(self) -> None:
        """Release what the functions hold (connections, processes)."""


class ActionRegistry:
    """Functions by the names definitions call them."""

    def __init__(self, actions: dict[str, ActionFunction] | None = None) -> None:
        self._functions: dict[str, _Registered] = {}
        self._sources: list[ActionSource] = []
        self._resolved: dict[str, _Registered] = {}
        for name, function in (actions or {}).items():
            self.register(name, function)

    def attach(self, source: ActionSource) -> ActionRegistry:
        """Take the functions ``source`` resolves for names no function is registered under (``--mcp CONFIG``).

        A resolved function is kept, so its calls share one bound on busy threads as a registered one's do.
        """
        self._sources.append(source)
        return self

    def close(self) -> None:
        """Close the attached sources (their servers' sessions and processes)."""
        for source in self._sources:
            source.close()

    def _lookup(self, name: str) -> _Registered | None:
        found = self._functions.get(name)
        if found is not None:
            return found
        found = self._resolved.get(name)
        if found is None:
            for source in self._sources:
                function = source.resolve(name)
                if function is not None:
                    found = self._resolved.setdefault(name, _Registered(function))
                    break
        return found

    @overload
    def register(self, name: str) -> Callable[[_F], _F]: ...

    @overload
    def register(self, name: str, function: _F) -> _F: ...

    def register(self, name: str, function: Any = None) -> Any:
        """Register ``function`` under ``name`` (or use as a decorator: ``@registry.register("name")``).

        Registering a name again replaces the function (tests stub actions this way).
        """
        if not isinstance(name, str) or not name:
            raise UsageError("an action is registered under a non-empty name")

        def add(fn: _F) -> _F:
            if not callable(fn):
                raise UsageError(f"action {name!r}: {fn!r} is not callable")
            self._functions[name] = _Registered(fn)
            return fn

        return add if function is None else add(function)

    def unregister(self, name: str) -> None:
        self._functions.pop(name, None)
        self._resolved.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._functions or (isinstance(name, str) and self._lookup(name) is not None)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._functions))

    def __len__(self) -> int:
        return len(self._functions)

    def names(self) -> list[str]:
        return sorted(self._functions)

    def get(self, name: str) -> ActionFunction | None:
        """The function registered under ``name`` (``fsm-lint --actions`` compares its parameters with the inputs
        a definition declares)."""
        found = self._lookup(name)
        return found.function if found is not None else None

    def update(self, other: ActionRegistry) -> None:
        """Take every function and source of ``other`` (``FSMManager(actions=...)`` and ``llm-fsm --actions``)."""
        self._functions.update(other._functions)
        self._sources += [source for source in other._sources if source not in self._sources]
        self._resolved.update(other._resolved)

    def missing(self, definition: FSMDefinition) -> list[str]:
        """The action names ``definition``'s states call that no function is registered for, sorted."""
        return sorted(name for name in registered_names(definition) if self._lookup(name) is None)

    def require(self, definition: FSMDefinition, *, via: str = "") -> None:
        """Raise ``ActionNotRegisteredError`` naming what ``missing`` finds (``via``: how a sub-flow is reached)."""
        missing = self.missing(definition)
        if missing:
            raise ActionNotRegisteredError(
                f"{definition.name!r}{via} calls actions no function is registered for: {', '.join(missing)} "
                "(manager.actions.register(name, function); llm-fsm commands take --actions module:name"
                + ("; mcp:SERVER/TOOL is a tool of a server in the file --mcp CONFIG names)" if _mcp(missing) else ")"),
                action=missing[0],
            )

    def _get(self, effect: CallAction) -> _Registered:
        found = self._lookup(effect.call.name)
        if found is None:
            raise ActionNotRegisteredError(
                f"state {effect.call.state!r} calls action {effect.call.name!r}, but no function is registered "
                f"under that name (manager.actions.register({effect.call.name!r}, function))",
                action=effect.call.name,
                state=effect.call.state,
            )
        return found

    max_calls_per_action = MAX_CALLS_PER_ACTION
    """See ``MAX_CALLS_PER_ACTION``; set on a registry to change it for its actions."""

    def call(self, effect: CallAction) -> ActionResult:
        """Call synchronously, with the timeout; an async function runs in its own event loop on the pool."""
        registered = self._get(effect)
        arguments = registered.arguments(effect)
        started = time.perf_counter()
        if not registered.enter(self.max_calls_per_action):
            return _busy(effect, registered, started)
        outcome = registered.wait_for(registered.run_guarded, arguments, effect.timeout_s)
        if outcome is None:
            return _timed_out(effect, started)
        return outcome.result(started)

    async def acall(self, effect: CallAction) -> ActionResult:
        """Call from async code, with the timeout; a sync function runs on the actions' own pool."""
        import asyncio

        registered = self._get(effect)
        arguments = registered.arguments(effect)
        started = time.perf_counter()
        if registered.is_async:
            try:
                outcome = await asyncio.wait_for(registered.await_guarded(arguments), effect.timeout_s)
            except TimeoutError:
                return _timed_out(effect, started)
            return outcome.result(started)
        if not registered.enter(self.max_calls_per_action):
            return _busy(effect, registered, started)
        waited = await registered.await_for(registered.run_guarded, arguments, effect.timeout_s)
        if waited is None:
            return _timed_out(effect, started)
        return waited.result(started)


def _mcp(names: list[str]) -> bool:
    return any(mcp_tool_of(name) is not None for name in names)


def _run_coroutine(function: Callable[..., Awaitable[Any]], arguments: dict[str, Any]) -> Any:
    import asyncio

    async def run() -> Any:
        return await function(**arguments)

    return asyncio.run(run())


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _timed_out(effect: CallAction, started: float) -> ActionResult:
    return ActionResult(error=f"timed out after {effect.timeout_s:g} s", timed_out=True, duration_ms=_ms(started))


def _busy(effect: CallAction, registered: _Registered, started: float) -> ActionResult:
    return ActionResult(
        error=f"busy: {registered.in_flight} calls of {effect.call.name!r} are still running (a hung backend?)",
        duration_ms=_ms(started),
    )


def _failed(exc: BaseException, started: float, what: str = "") -> ActionResult:
    name = type(exc).__name__
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose message cannot be read still fails as data
        text = "(its message could not be read)"
    text = text if len(text) <= 500 else text[:497] + "..."
    return ActionResult(error=f"{what}{name}: {text}" if text else f"{what}{name}", duration_ms=_ms(started))


def load_registry(spec: str) -> ActionRegistry:
    """``module:attribute`` or ``path/to/file.py:attribute`` → the ``ActionRegistry`` it names (for the CLI).

    The attribute may also be a plain dict of name → function.
    """
    target, attribute, found = import_attribute(spec, "--actions")
    if isinstance(found, ActionRegistry):
        return found
    if isinstance(found, dict) and all(callable(f) for f in found.values()):
        return ActionRegistry(found)
    raise UsageError(f"--actions: {target} has no ActionRegistry (or dict of functions) named {attribute!r}")


def import_attribute(spec: str, option: str) -> tuple[str, str, Any]:
    """``module:attribute`` or ``path/to/file.py:attribute`` → (module, attribute, the attribute's value or None),
    for a CLI ``option`` naming the application's registry; ``UsageError`` (naming the option) when it cannot."""
    import importlib
    import importlib.util
    import sys
    from pathlib import Path

    target, _, attribute = spec.rpartition(":")
    if not target or not attribute:
        raise UsageError(f"{option} takes module:registry or file.py:registry, not {spec!r}")
    try:
        if target.endswith(".py") or "/" in target:
            path = Path(target).resolve()
            if not path.is_file():
                raise UsageError(f"{option}: no file {target}")
            module_name = f"_llm_fsm_actions_{abs(hash(str(path)))}"
            module_spec = importlib.util.spec_from_file_location(module_name, path)
            if module_spec is None or module_spec.loader is None:
                raise UsageError(f"{option}: cannot import {target}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[module_name] = module
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module failed to import: say so, typed
        raise UsageError(f"{option}: importing {target} failed: {type(exc).__name__}: {exc}") from exc
    return target, attribute, getattr(module, attribute, None)


__all__ = ["ActionCall", "ActionFunction", "ActionRegistry", "ActionSource", "ActionResult", "HandOff", "load_registry"]
