"""The application's side of retrieval: a registry of retrievers by name, and asking one with its timeout.

A definition's states declare *what* to look up (``retrieve: {retriever: docs, ...}``); the application registers
the retriever under that name::

    manager = FSMManager(retrievers={"docs": FTSRetriever("index.db")})
    manager.retrievers.register("faq", my_async_retriever, timeout_s=2)

A retriever has ``retrieve(query, *, k)`` or ``aretrieve(query, *, k)`` (or both: the async driver prefers the
latter) and answers snippets (``llm_fsm.retrieval.Snippet``). Whatever it does — raise, hang past its timeout,
answer something else, or not be registered — comes back to the engine as a ``RetrievalResult`` with ``error``
set, never as an exception, so the declaration's ``on_error`` decides. A sync retriever runs on the actions' pool
(so a timeout can be kept) and is abandoned, not killed, when it outlives it; at most
``MAX_CALLS_PER_RETRIEVER`` calls of one retriever may be busy at once, so a hung index cannot take the pool.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._retrieval import CallRetriever, RetrievalResult
from llm_fsm.engine._snippets import AsyncRetriever, Retriever, Snippet
from llm_fsm.errors import UsageError
from llm_fsm.runtime._actions import ThreadSlots, import_attribute

DEFAULT_RETRIEVER_TIMEOUT_S = 5.0
MAX_CALLS_PER_RETRIEVER = 8
"""Calls of one retriever whose threads are still busy before the next fails at once as ``busy`` (see actions'
``MAX_CALLS_PER_ACTION``: the pool is shared)."""
MAX_SNIPPET_CHARS = 100_000
"""A snippet's text is cut here on arrival: the declared budget is smaller still, and the tape keeps what came."""


class _Registered(ThreadSlots):
    __slots__ = ("retriever", "timeout_s")

    def __init__(self, retriever: Any, timeout_s: float) -> None:
        super().__init__()
        self.retriever = retriever
        self.timeout_s = timeout_s

    def run_guarded(self, effect: CallRetriever) -> RetrievalResult:
        """On a pool thread: ask, keep whatever is raised as data, then free the slot."""
        started = time.perf_counter()
        try:
            if isinstance(self.retriever, Retriever):
                answer = self.retriever.retrieve(effect.query, k=effect.k)
            else:
                answer = asyncio.run(_awaited(self.retriever, effect))
            return _result(answer, started)
        except Exception as exc:  # noqa: BLE001 - a retriever's failure is data for on_error
            return _failed(exc, started)
        finally:
            self.leave()


async def _awaited(retriever: AsyncRetriever, effect: CallRetriever) -> Any:
    return await retriever.aretrieve(effect.query, k=effect.k)


class RetrieverRegistry:
    """Retrievers by the names definitions use (``FSMManager(retrievers=...)``, ``manager.retrievers``)."""

    def __init__(
        self, retrievers: Mapping[str, Any] | None = None, *, timeout_s: float = DEFAULT_RETRIEVER_TIMEOUT_S
    ) -> None:
        self.timeout_s = _positive(timeout_s)
        """The timeout of retrievers registered without their own."""
        self._registered: dict[str, _Registered] = {}
        for name, retriever in (retrievers or {}).items():
            self.register(name, retriever)

    def register(self, name: str, retriever: Any, *, timeout_s: float | None = None) -> None:
        """Register ``retriever`` (a ``Retriever``, an ``AsyncRetriever`` or both) under ``name``."""
        if not isinstance(retriever, (Retriever, AsyncRetriever)):
            raise UsageError(
                f"retriever {name!r} has neither retrieve(query, *, k) nor aretrieve(query, *, k): "
                f"got {type(retriever).__name__}"
            )
        self._registered[name] = _Registered(
            retriever, _positive(timeout_s if timeout_s is not None else self.timeout_s)
        )

    def update(self, other: RetrieverRegistry) -> None:
        self._registered.update(other._registered)

    def get(self, name: str) -> Any:
        found = self._registered.get(name)
        return found.retriever if found is not None else None

    def __contains__(self, name: object) -> bool:
        return name in self._registered

    def __iter__(self) -> Iterator[str]:
        return iter(self._registered)

    def __len__(self) -> int:
        return len(self._registered)

    def missing(self, definition: FSMDefinition) -> list[str]:
        """The retriever names ``definition`` (a state's ``retrieve`` or its own) asks that none is registered
        under, sorted. Not refused as missing actions are: a turn that asks one follows its ``on_error``."""
        declared = [definition.retrieve, *(state.retrieve for state in definition.states.values())]
        return sorted({d.retriever for d in declared if d is not None} - self._registered.keys())

    def call(self, effect: CallRetriever) -> RetrievalResult:
        """Ask from a thread, with the timeout (on the pool; an async-only retriever in its own event loop)."""
        started = time.perf_counter()
        registered = self._registered.get(effect.name)
        if registered is None:
            return _unregistered(effect)
        if not registered.enter(MAX_CALLS_PER_RETRIEVER):
            return _busy(effect, registered, started)
        result = registered.wait_for(registered.run_guarded, effect, registered.timeout_s)
        return result if result is not None else _timed_out(registered, started)

    async def acall(self, effect: CallRetriever) -> RetrievalResult:
        """Ask from async code, with the timeout; a sync-only retriever runs on the pool."""
        started = time.perf_counter()
        registered = self._registered.get(effect.name)
        if registered is None:
            return _unregistered(effect)
        retriever = registered.retriever
        if isinstance(retriever, AsyncRetriever):
            try:
                answer = await asyncio.wait_for(retriever.aretrieve(effect.query, k=effect.k), registered.timeout_s)
            except TimeoutError:
                return _timed_out(registered, started)
            except Exception as exc:  # noqa: BLE001 - a retriever's failure is data for on_error
                return _failed(exc, started)
            return _result(answer, started)
        if not registered.enter(MAX_CALLS_PER_RETRIEVER):
            return _busy(effect, registered, started)
        result = await registered.await_for(registered.run_guarded, effect, registered.timeout_s)
        return result if result is not None else _timed_out(registered, started)


def load_retrievers(spec: str) -> RetrieverRegistry:
    """``module:attribute`` or ``path/to/file.py:attribute`` → the ``RetrieverRegistry`` it names (for the CLI's
    ``--retrievers``); the attribute may also be a dict of name → retriever."""
    target, attribute, found = import_attribute(spec, "--retrievers")
    if isinstance(found, RetrieverRegistry):
        return found
    if isinstance(found, dict) and found:
        return RetrieverRegistry(found)
    raise UsageError(f"--retrievers: {target} has no RetrieverRegistry (or dict of retrievers) named {attribute!r}")


def _positive(timeout_s: float) -> float:
    if not timeout_s > 0:
        raise UsageError(f"a retriever's timeout_s must be above 0 seconds, not {timeout_s!r}")
    return float(timeout_s)


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _result(answer: Any, started: float) -> RetrievalResult:
    """The answer as snippets; anything that is not a list of ``Snippet`` is a failure, not a crash later."""
    if not isinstance(answer, (list, tuple)) or not all(isinstance(s, Snippet) for s in answer):
        return RetrievalResult(
            error=f"the retriever answered {type(answer).__name__}, not a list of Snippet", duration_ms=_ms(started)
        )
    snippets = tuple(
        s if len(s.text) <= MAX_SNIPPET_CHARS else Snippet(s.id, s.text[:MAX_SNIPPET_CHARS], s.source, s.score)
        for s in answer
    )
    return RetrievalResult(snippets=snippets, duration_ms=_ms(started))


def _failed(exc: Exception, started: float) -> RetrievalResult:
    return RetrievalResult(error=f"{type(exc).__name__}: {exc}"[:500], duration_ms=_ms(started))


def _timed_out(registered: _Registered, started: float) -> RetrievalResult:
    return RetrievalResult(
        error=f"timed out after {registered.timeout_s:g} s", timed_out=True, duration_ms=_ms(started)
    )


def _busy(effect: CallRetriever, registered: _Registered, started: float) -> RetrievalResult:
    return RetrievalResult(
        error=f"busy: {registered.in_flight} calls of {effect.name!r} are still running (a hung index?)",
        duration_ms=_ms(started),
    )


def _unregistered(effect: CallRetriever) -> RetrievalResult:
    return RetrievalResult(
        error=f"state {effect.state!r} retrieves from {effect.name!r}, but no retriever is registered under that name"
    )


__all__ = ["DEFAULT_RETRIEVER_TIMEOUT_S", "MAX_CALLS_PER_RETRIEVER", "RetrieverRegistry", "load_retrievers"]
