"""What every part of ``FSMManager`` shares: its configuration, its locks and turn slots, and the two ways to
run an operation (``_run`` from a thread, ``_arun`` from async code).

The public methods (in ``_manager.py``, ``_readers.py`` and ``_operator.py``) are one line each way: they
build an operation (``_operations.py``) and hand it to ``_run`` or ``_arun``, which put it through the one
performer. So a sync method and its async twin cannot drift apart: there is no logic in either to drift.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._data import (
    DEFAULT_MAX_CONTEXT_BYTES,
    DEFAULT_MAX_HISTORY_SIZE,
    DEFAULT_MAX_MESSAGE_LENGTH,
    has_lone_surrogate,
)
from llm_fsm.engine._hooks import HookFunction, Hooks
from llm_fsm.engine._messages import MessageLimits, UserMessage, check_message
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._turn import EngineConfig
from llm_fsm.errors import InvalidMessageError, UnsupportedContentError, UsageError
from llm_fsm.runtime._actions import ActionFunction, ActionRegistry
from llm_fsm.runtime._definitions import DefinitionPolicy, DefinitionSource
from llm_fsm.runtime._drivers import arun, run
from llm_fsm.runtime._loading import load_fsm_definition
from llm_fsm.runtime._locking import FairLock
from llm_fsm.runtime._operations import Operation
from llm_fsm.runtime._performer import Ledger, Performer, SaveListener, model_name
from llm_fsm.runtime._retrievers import RetrieverRegistry
from llm_fsm.stores import ConversationStore, open_store
from llm_fsm.stores.base import Retention, TurnLogStore

if TYPE_CHECKING:
    from llm_fsm.telemetry import Telemetry

_R = TypeVar("_R")

DEFAULT_MAX_INPUT_CHARS = 20_000
"""A user message longer than this (a message of content parts: its text parts together) is refused with
MessageTooLargeError before any model call."""

DEFAULT_MAX_CONCURRENT_TURNS = 100
"""Async turns in flight per event loop; more wait in arrival order.

Why a bound: a turn's computation runs on the event loop, so when a thousand model replies land
together the loop would run a thousand turns before anything else got a word in (the host
application's handlers, health checks, our own ticker in benchmarks/async_load.py). A hundred
in flight keep a 50 ms model busy at up to ~2,000 turns/s while the loop stays responsive."""

_DEFAULT_RETENTION = Retention()


class RuntimeBase:
    """The manager's state and its runners; see the module docstring."""

    def __init__(
        self,
        fsm_loader: Callable[[str], FSMDefinition] = load_fsm_definition,
        llm_interface: Any = None,
        prompt_builder: PromptBuilder | None = None,
        max_history_size: int = DEFAULT_MAX_HISTORY_SIZE,
        max_message_length: int = DEFAULT_MAX_MESSAGE_LENGTH,
        *,
        store: ConversationStore | str | None = None,
        strict: bool = False,
        max_context_bytes: int = DEFAULT_MAX_CONTEXT_BYTES,
        max_input_chars: int = DEFAULT_MAX_INPUT_CHARS,
        max_save_retries: int = 3,
        on_definition_change: DefinitionPolicy = "pin",
        hooks: Mapping[str, HookFunction | list[HookFunction]] | None = None,
        config: EngineConfig | None = None,
        definition_recheck_seconds: float = 1.0,
        max_concurrent_turns: int = DEFAULT_MAX_CONCURRENT_TURNS,
        telemetry: Telemetry | None = None,
        actions: ActionRegistry | Mapping[str, ActionFunction] | None = None,
        message_limits: MessageLimits | None = None,
        retrievers: RetrieverRegistry | Mapping[str, Any] | None = None,
    ) -> None:
        self.actions = ActionRegistry()
        """The functions the definitions' actions call, by name (``manager.actions.register(name, fn)``)."""
        if isinstance(actions, ActionRegistry):
            self.actions.update(actions)
        elif actions:
            for name, function in actions.items():
                self.actions.register(name, function)
        self.retrievers = retrievers if isinstance(retrievers, RetrieverRegistry) else RetrieverRegistry(retrievers)
        """The retrievers the definitions' ``retrieve`` names, by name (``manager.retrievers.register(name, r)``)."""
        self.save_listeners: list[SaveListener] = []
        """Called with a ``Saved`` after every successful save of a conversation, whoever made it (a turn, a start,
        an operator change, a timer): how the server's event streams and webhooks learn of this process's saves
        at once. Append to it; a listener must return at once (``runtime/_performer.SaveListener``)."""
        self.telemetry = telemetry
        """OpenTelemetry spans and metrics (``llm_fsm.telemetry``); None emits and imports nothing."""
        self.definitions = DefinitionSource(fsm_loader, definition_recheck_seconds, lambda: self.on_definition_change)
        """The loader, its cache and the definitions given as objects (``start_conversation(definition)``)."""
        self.llm_interface = llm_interface
        self.prompt_builder = prompt_builder or PromptBuilder(max_history_size=max_history_size)
        self.max_history_size = max_history_size
        self.max_message_length = max_message_length
        self.max_input_chars = max_input_chars
        self.message_limits = message_limits or MessageLimits()
        """Images per message, image URL sizes, what of a ``data:`` URL is stored, metadata size."""
        self.max_save_retries = max_save_retries
        self.on_definition_change = on_definition_change
        self.config = config or EngineConfig(max_context_bytes=max_context_bytes, strict=strict)
        self.store: ConversationStore = open_store(store if store is not None else "memory://")
        self._turn_log_of: tuple[object, bool] = (None, False)
        self._retention_of: tuple[object, Retention | None] = (None, None)
        self.hooks = Hooks()
        for name, functions in (hooks or {}).items():
            for function in functions if isinstance(functions, list) else [functions]:
                self.hooks.register(name, function)
        # One FairLock per conversation, shared by threads and coroutines. The registry keeps them weakly,
        # so whoever takes one keeps a reference until it releases it; otherwise it could be collected
        # mid-turn and the next caller would get a fresh, unrelated lock.
        self._locks: weakref.WeakValueDictionary[str, FairLock] = weakref.WeakValueDictionary()
        self._locks_guard = threading.Lock()
        if max_concurrent_turns < 1:
            raise UsageError(f"max_concurrent_turns must be at least 1, not {max_concurrent_turns}")
        self.max_concurrent_turns = max_concurrent_turns
        self._turn_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._background: set[asyncio.Future[None]] = set()  # streamed turns outliving their consumer

    def close(self) -> None:
        """Release what the action functions hold: the sessions of attached MCP servers (their processes exit)."""
        self.actions.close()

    # --- configuration kept under its earlier names -----------------------------------------------------

    @property
    def fsm_loader(self) -> Callable[[str], FSMDefinition]:
        return self.definitions.loader

    @fsm_loader.setter
    def fsm_loader(self, loader: Callable[[str], FSMDefinition]) -> None:
        self.definitions.loader = loader

    @property
    def definition_recheck_seconds(self) -> float:
        return self.definitions.recheck_seconds

    @definition_recheck_seconds.setter
    def definition_recheck_seconds(self, seconds: float) -> None:
        self.definitions.recheck_seconds = seconds

    def add_hook(self, name: str, function: HookFunction) -> HookFunction:
        """Register an application hook (see ``llm_fsm.engine.HookEvent``); usable as a decorator factory's target."""
        return self.hooks.register(name, function)

    # --- what the performer asks of the store, answered once per store object ------------------------------

    def turn_log(self) -> bool:
        """Whether the store keeps a turn log (``TurnLogStore``): a runtime-checkable protocol, slow to ask."""
        store, answer = self._turn_log_of
        if store is not self.store:
            answer = isinstance(self.store, TurnLogStore)
            self._turn_log_of = (self.store, answer)
        return answer

    def retention(self) -> Retention | None:
        """The turn log's limits from the engine's configuration; None for the defaults every store applies."""
        config, retention = self._retention_of
        if config is not self.config:
            config = self.config
            retention = Retention(turn_records=config.max_turn_records, message_ids=config.max_processed_message_ids)
            retention = None if retention == _DEFAULT_RETENTION else retention
            self._retention_of = (config, retention)
        return retention

    # --- locks, slots and spans ----------------------------------------------------------------------------

    def _lock_for(self, conversation_id: str) -> FairLock:
        with self._locks_guard:
            lock = self._locks.get(conversation_id)
            if lock is None:
                lock = FairLock()
                self._locks[conversation_id] = lock
            return lock

    def _turn_slot(self) -> asyncio.Semaphore:
        """This event loop's bound on async turns in flight (asyncio primitives belong to one loop)."""
        loop = asyncio.get_running_loop()
        slots = self._turn_slots.get(loop)
        if slots is None:
            slots = self._turn_slots.setdefault(loop, asyncio.Semaphore(self.max_concurrent_turns))
        return slots

    @contextlib.contextmanager
    def _turn_span(self, conversation_id: str) -> Iterator[Callable[[Any], None]]:
        """The turn's span (when telemetry is on), closed with the outcome the caller hands the function."""
        telemetry = self.telemetry
        if telemetry is None:
            yield _ignore
            return
        with telemetry.turn(conversation_id) as span:
            yield lambda outcome: telemetry.turn_done(span, outcome)

    @contextlib.asynccontextmanager
    async def _async_turn(self, conversation_id: str) -> AsyncIterator[Callable[[Any], None]]:
        """What an async turn runs inside: the conversation's lock, then a turn slot (a slot never waits for a
        lock), then the turn's span."""
        async with self._lock_for(conversation_id), self._turn_slot():
            with self._turn_span(conversation_id) as finished:
                yield finished

    # --- running operations ----------------------------------------------------------------------------------

    def _run(self, operation: Operation[_R], lock: str | None = None, ledger: Ledger | None = None) -> _R:
        """Run an operation from a thread (under the conversation's lock when ``lock`` names it)."""
        performer = Performer(self, ledger)
        if lock is None:
            return run(performer, operation)
        with self._lock_for(lock):  # the with statement keeps the weakly registered lock alive
            return run(performer, operation)

    async def _arun(self, operation: Operation[_R], lock: str | None = None, ledger: Ledger | None = None) -> _R:
        """Run an operation from async code, awaiting the conversation's lock without holding a thread."""
        performer = Performer(self, ledger)
        if lock is None:
            return await arun(performer, operation)
        async with self._lock_for(lock):
            return await arun(performer, operation)

    # --- messages ---------------------------------------------------------------------------------------------

    def _schema_sent(self) -> bool:
        """Whether the LLM interface sends the reply schema itself; prompts then show no format example.

        Asked on every turn: an interface may fall back to plain JSON mode when a
        provider rejects schemas, and from then on the prompt must show the shape.
        """
        return bool(getattr(self.llm_interface, "sends_reply_schema", False))

    def _check_message(self, message: Any, message_id: Any = None, metadata: Any = None) -> UserMessage:
        """Refuse before any model call what no store could keep or the model could not read: nothing is saved."""
        if message_id is not None and (not isinstance(message_id, str) or has_lone_surrogate(message_id)):
            raise InvalidMessageError("message_id must be a string of valid Unicode text")
        user = check_message(message, max_chars=self.max_input_chars, metadata=metadata, limits=self.message_limits)
        llm = self.llm_interface
        if user.images and llm is not None and not getattr(llm, "reads_images", False):
            raise UnsupportedContentError(
                f"the message carries {user.images} image(s) and {model_name(llm)} does not read images; send text, "
                "or use a model that reads images (LiteLLMInterface(..., vision=True) for one litellm does not know)"
            )
        return user


def _ignore(outcome: Any) -> None:
    """The turn span's closer when telemetry is off."""


__all__ = ["DEFAULT_MAX_CONCURRENT_TURNS", "DEFAULT_MAX_INPUT_CHARS", "RuntimeBase"]
