"""FSMManager: runs conversations turn by turn, with any LLM, on any store.

This is the I/O edge of the engine. It loads a conversation from its store,
drives the pure turn generator (``llm_fsm.engine``) — performing the LLM and hook
calls it asks for — and saves the result with compare-and-set. A turn either
lands whole or not at all: if the model's output cannot be used, a hook fails,
or another worker saved first and retries run out, the stored conversation is
exactly what it was.

Turns on one conversation are serialised by a lock per conversation (threads
and asyncio share it); different conversations run concurrently. Across
processes the store's version check does the same job: the losing worker
reloads and runs its turn again on the new version.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from llm_fsm._threads import run_blocking
from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.engine._actions import ActionMemo, CallAction
from llm_fsm.engine._context import apply_update
from llm_fsm.engine._data import (
    DEFAULT_MAX_CONTEXT_BYTES,
    DEFAULT_MAX_HISTORY_SIZE,
    DEFAULT_MAX_MESSAGE_LENGTH,
    has_lone_surrogate,
)
from llm_fsm.engine._hooks import HookFunction, Hooks
from llm_fsm.runtime._hooks import run_async, run_sync
from llm_fsm.engine._instance import Conversation, FSMContext, FSMInstance
from llm_fsm.engine._messages import MessageLimits, UserMessage, check_message, entry_view
from llm_fsm.engine._operator import human_turn
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._records import (
    LLMRequest,
    LLMResponse,
    LLMResult,
    TraceEvent,
    TurnRecord,
    Usage,
)
from llm_fsm.engine._transitions import validate_transition as _validate_transition
from llm_fsm.engine._turn import (
    CallHook,
    CallLLM,
    Decided,
    EngineConfig,
    LoadDefinition,
    LoadFlow,
    TurnOutcome,
    run_opening,
    run_turn,
)
from llm_fsm.engine._values import KeyPolicy
from llm_fsm.errors import (
    ConcurrentUpdateError,
    ConversationEndedError,
    DefinitionChangedError,
    DefinitionError,
    FSMError,
    InvalidMessageError,
    LLMConfigurationError,
    LLMResponseError,
    StateNotFoundError,
    TurnNotFoundError,
    UnsupportedContentError,
    UsageError,
)
from llm_fsm.runtime._actions import ActionFunction, ActionRegistry
from llm_fsm.runtime._loading import load_fsm_definition, resolve_flow_reference
from llm_fsm.runtime._locking import FairLock
from llm_fsm.runtime._operator import OperatorAPI
from llm_fsm.stores import ConversationStore, ConversationSummary, open_store
from llm_fsm.stores.base import Retention, TurnLogStore

if TYPE_CHECKING:
    from llm_fsm.runtime._stream import StreamEvent
    from llm_fsm.telemetry import Telemetry

logger = logging.getLogger(__name__)

DEFAULT_MAX_INPUT_CHARS = 20_000
"""A user message longer than this (a message of content parts: its text parts together) is refused with
MessageTooLargeError before any model call."""

DEFAULT_MAX_CONCURRENT_TURNS = 100
"""Async turns in flight per event loop; more wait in arrival order.

Why a bound: a turn's computation runs on the event loop, so when a thousand model replies land
together the loop would run a thousand turns before anything else got a word in (the host
application's handlers, health checks, our own ticker in benchmarks/async_load.py). A hundred
in flight keep a 50 ms model busy at up to ~2,000 turns/s while the loop stays responsive."""

DefinitionPolicy = Literal["continue", "error"]


@dataclass(frozen=True)
class LoadConversation:
    """Effect: load what a turn or a change needs of a conversation (the hot record, on a ``TurnLogStore``)."""

    conversation_id: str
    user_id: str | None
    room_id: str | None
    message_id: str | None = None
    """The turn's message id: a store with a turn log looks up its reply, should it have been answered already."""


@dataclass(frozen=True)
class SaveConversation:
    """Effect: save with compare-and-set (``expected_version`` None: create)."""

    instance: FSMInstance
    expected_version: int | None


_DEFAULT_RETENTION = Retention()

_RECOVERABLE: tuple[type[Exception], ...] = (DefinitionError, ConcurrentUpdateError)
"""Errors thrown back into a generator, which handles them; everything else reaches the caller."""

_T = TypeVar("_T")


class FSMManager(OperatorAPI):
    """Starts conversations and processes their messages (the seed's API, plus stores and async).

    The operator API (force_state, push_flow, pop_flow, set_context, hand_off, post_operator_message,
    resume_bot, and the seed's ``instances`` view) comes from ``OperatorAPI`` (``llm_fsm/runtime/_operator.py``).
    """

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
        on_definition_change: DefinitionPolicy = "continue",
        hooks: Mapping[str, HookFunction | list[HookFunction]] | None = None,
        config: EngineConfig | None = None,
        definition_recheck_seconds: float = 1.0,
        max_concurrent_turns: int = DEFAULT_MAX_CONCURRENT_TURNS,
        telemetry: Telemetry | None = None,
        actions: ActionRegistry | Mapping[str, ActionFunction] | None = None,
        message_limits: MessageLimits | None = None,
    ) -> None:
        self.actions = ActionRegistry()
        """The functions the definitions' actions call, by name (``manager.actions.register(name, fn)``)."""
        if isinstance(actions, ActionRegistry):
            self.actions.update(actions)
        elif actions:
            for name, function in actions.items():
                self.actions.register(name, function)
        self.telemetry = telemetry
        """OpenTelemetry spans and metrics (``llm_fsm.telemetry``); None emits and imports nothing."""
        self.fsm_loader = fsm_loader
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
        self.definition_recheck_seconds = definition_recheck_seconds
        self._definitions: dict[str, tuple[FSMDefinition, float]] = {}
        # definitions handed to start_conversation as objects, by the name their conversations store:
        # no loader could find them again, so this manager keeps them
        self._given_definitions: dict[str, FSMDefinition] = {}
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

    # --- configuration ------------------------------------------------------------

    def add_hook(self, name: str, function: HookFunction) -> HookFunction:
        """Register an application hook (see ``llm_fsm.engine.HookEvent``); usable as a decorator factory's target."""
        return self.hooks.register(name, function)

    def _lock_for(self, conversation_id: str) -> FairLock:
        with self._locks_guard:
            lock = self._locks.get(conversation_id)
            if lock is None:
                lock = FairLock()
                self._locks[conversation_id] = lock
            return lock

    # --- definitions ---------------------------------------------------------------

    def _load_definition(self, fsm_id: str) -> FSMDefinition:
        """The definition for ``fsm_id``, asking the loader again at most every ``definition_recheck_seconds``.

        The default loader notices edited files itself; this keeps a conversation's
        turns from paying for a path resolution and a stat call each time.
        """
        cached = self._cached_definition(fsm_id)
        if cached is not None:
            return cached
        definition = self.fsm_loader(fsm_id)
        self._definitions[fsm_id] = (definition, time.monotonic())
        return definition

    def _cached_definition(self, fsm_id: Any) -> FSMDefinition | None:
        """The definition when no loader call is due (no I/O), else None."""
        if isinstance(fsm_id, FSMDefinition):
            return fsm_id
        given = self._given_definitions.get(fsm_id)
        if given is not None:
            return given
        cached = self._definitions.get(fsm_id)
        if cached is not None and time.monotonic() - cached[1] < self.definition_recheck_seconds:
            return cached[0]
        return None

    async def _aload_definition(self, fsm_id: Any) -> FSMDefinition:
        """``_load_definition`` for the async API: the loader may read files, so it runs on the I/O pool."""
        cached = self._cached_definition(fsm_id)
        if cached is not None:
            return cached
        return await run_blocking(self._load_definition, fsm_id)

    def get_definition(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMDefinition:
        return self._definition_for(self._load(conversation_id, user_id, room_id))

    def _definition_for(self, instance: FSMInstance) -> FSMDefinition:
        return self._checked(instance, self._load_definition(instance.fsm_id))

    def _checked(self, instance: FSMInstance, definition: FSMDefinition) -> FSMDefinition:
        """The definition, if the conversation may run on it (see ``on_definition_change``)."""
        if instance.definition_hash and definition.content_hash != instance.definition_hash:
            if self.on_definition_change == "error":
                raise DefinitionChangedError(
                    f"definition {instance.fsm_id!r} changed since conversation {instance.conversation_id} started "
                    f"(hash {instance.definition_hash} → {definition.content_hash})"
                )
            if instance.current_state not in definition.states:
                raise DefinitionChangedError(
                    f"definition {instance.fsm_id!r} changed and no longer declares state {instance.current_state!r}, "
                    f"where conversation {instance.conversation_id} is"
                )
            logger.warning(
                "definition %s changed since conversation %s started; continuing",
                instance.fsm_id,
                instance.conversation_id,
            )
        return definition

    # --- LLM and hook effects ------------------------------------------------------

    def _llm(self) -> Any:
        if self.llm_interface is None:
            raise LLMConfigurationError("FSMManager has no llm_interface; pass e.g. LiteLLMInterface(model=...)")
        return self.llm_interface

    @staticmethod
    def _as_result(value: Any) -> LLMResult:
        """Interfaces may return an LLMResult (with attempts) or just the response (the seed's API)."""
        if isinstance(value, LLMResult):
            return value
        return LLMResult(response=_as_response(value))

    def _call_llm(self, request: LLMRequest) -> LLMResult:
        if self.telemetry is None:
            return self._call_llm_untraced(request)
        with self.telemetry.model_call(_model_name(self.llm_interface), request.purpose) as call:
            try:
                result = self._call_llm_untraced(request)
            except BaseException as exc:
                call.failed(exc)
                raise
            call.result(result)
            return result

    async def _acall_llm(self, request: LLMRequest) -> LLMResult:
        if self.telemetry is None:
            return await self._acall_llm_untraced(request)
        with self.telemetry.model_call(_model_name(self.llm_interface), request.purpose) as call:
            try:
                result = await self._acall_llm_untraced(request)
            except BaseException as exc:
                call.failed(exc)
                raise
            call.result(result)
            return result

    def _call_llm_untraced(self, request: LLMRequest) -> LLMResult:
        llm = self._llm()
        try:
            complete = getattr(llm, "complete", None)
            return self._as_result(complete(request) if callable(complete) else llm.send_request(request))
        except (LLMResponseError, LLMConfigurationError):
            raise
        except FSMError:
            raise
        except Exception as exc:  # a custom interface's own failure: typed, with the cause kept
            raise LLMResponseError(f"LLM interface failed: {type(exc).__name__}: {exc}") from exc

    async def _acall_llm_untraced(self, request: LLMRequest) -> LLMResult:
        llm = self._llm()
        try:
            acomplete = getattr(llm, "acomplete", None)
            if callable(acomplete):
                return self._as_result(await acomplete(request))
            asend = getattr(llm, "asend_request", None)
            if callable(asend):
                return self._as_result(await asend(request))
            return await run_blocking(self._call_llm, request)  # a sync-only interface: our pool, not the loop's
        except (LLMResponseError, LLMConfigurationError):
            raise
        except FSMError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise LLMResponseError(f"LLM interface failed: {type(exc).__name__}: {exc}") from exc

    def _resolve_flow(self, declaration: FlowDeclaration, parent: FSMDefinition) -> tuple[str, FSMDefinition]:
        """A sub-flow's definition, found exactly where fsm-lint looks (next to the parent's file first)."""
        reference = resolve_flow_reference(declaration.definition, parent.source)
        return reference, self._load_definition(reference)

    # --- the store ---------------------------------------------------------------------

    def _turn_log(self) -> bool:
        """Whether the store keeps a turn log (``TurnLogStore``), asked once per store object."""
        store, answer = self._turn_log_of
        if store is not self.store:
            answer = isinstance(self.store, TurnLogStore)
            self._turn_log_of = (self.store, answer)
        return answer

    def _retention(self) -> Retention | None:
        """The turn log's limits from the engine's configuration; None for the defaults every store applies."""
        config, retention = self._retention_of
        if config is not self.config:
            config = self.config
            retention = Retention(turn_records=config.max_turn_records, message_ids=config.max_processed_message_ids)
            retention = None if retention == _DEFAULT_RETENTION else retention
            self._retention_of = (config, retention)
        return retention

    def _load_args(
        self, user_id: str | None, room_id: str | None, message_id: str | None, whole: bool
    ) -> tuple[str, dict[str, Any]]:
        """Which load, and with what: the hot record unless the whole instance is asked for (or there is no log)."""
        if whole or not self._turn_log():
            return "load", {"user_id": user_id, "room_id": room_id}
        return "load_for_turn", {"user_id": user_id, "room_id": room_id, "message_id": message_id}

    def _save_args(self, expected_version: int | None) -> dict[str, Any]:
        """``retention`` only when it is not the default and the store keeps a log: a store (or a wrapper around
        one) written to the older protocol takes no ``retention``."""
        retention = self._retention() if self._turn_log() else None
        if retention is None:
            return {"expected_version": expected_version}
        return {"expected_version": expected_version, "retention": retention}

    def _load(
        self,
        conversation_id: str,
        user_id: str | None,
        room_id: str | None,
        message_id: str | None = None,
        *,
        whole: bool = False,
    ) -> FSMInstance:
        operation, kwargs = self._load_args(user_id, room_id, message_id, whole)
        instance: FSMInstance = getattr(self.store, operation)(conversation_id, **kwargs)
        return instance

    async def _aload(
        self,
        conversation_id: str,
        user_id: str | None,
        room_id: str | None,
        message_id: str | None = None,
        *,
        whole: bool = False,
    ) -> FSMInstance:
        operation, kwargs = self._load_args(user_id, room_id, message_id, whole)
        instance: FSMInstance = await self._astore(operation, conversation_id, **kwargs)
        return instance

    def _perform(self, effect: Any) -> Any:
        """The synchronous effects other than the LLM and hook calls."""
        if isinstance(effect, Decided):
            return None  # only a streaming driver has someone to tell
        if self.telemetry is not None and isinstance(effect, (LoadConversation, SaveConversation)):
            with self.telemetry.store(*_store_span(effect)):
                return self._perform_io(effect)
        return self._perform_io(effect)

    def _perform_io(self, effect: Any) -> Any:
        if isinstance(effect, LoadConversation):
            logger.debug("load conversation %s", effect.conversation_id)
            return self._load(effect.conversation_id, effect.user_id, effect.room_id, effect.message_id)
        if isinstance(effect, SaveConversation):
            logger.debug(
                "save conversation %s (expected version %s)", effect.instance.conversation_id, effect.expected_version
            )
            return self.store.save(effect.instance, **self._save_args(effect.expected_version))
        if isinstance(effect, CallAction):
            result = self.actions.call(effect)
            if self.telemetry is not None:
                self.telemetry.action(effect, result)
            return result
        if isinstance(effect, LoadFlow):
            return self._resolve_flow(effect.declaration, effect.parent)
        if isinstance(effect, LoadDefinition):
            return self._load_definition(effect.fsm_id)
        raise TypeError(f"unknown effect {effect!r}")  # pragma: no cover - the generators yield only known effects

    async def _astore(self, operation: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call the store's async twin of ``operation``; a store with only the sync protocol runs on the I/O pool."""
        native = getattr(self.store, "a" + operation, None)
        if native is not None:
            return await native(*args, **kwargs)
        return await run_blocking(getattr(self.store, operation), *args, **kwargs)

    async def _aperform(self, effect: Any) -> Any:
        """The async effects; nothing that is pure computation or a cache hit leaves the event loop."""
        if isinstance(effect, Decided):
            return None
        if self.telemetry is not None and isinstance(effect, (LoadConversation, SaveConversation)):
            with self.telemetry.store(*_store_span(effect)):
                return await self._aperform_io(effect)
        return await self._aperform_io(effect)

    async def _aperform_io(self, effect: Any) -> Any:
        if isinstance(effect, LoadConversation):
            logger.debug("load conversation %s", effect.conversation_id)
            return await self._aload(effect.conversation_id, effect.user_id, effect.room_id, effect.message_id)
        if isinstance(effect, SaveConversation):
            logger.debug(
                "save conversation %s (expected version %s)", effect.instance.conversation_id, effect.expected_version
            )
            return await self._astore("save", effect.instance, **self._save_args(effect.expected_version))
        if isinstance(effect, CallAction):
            result = await self.actions.acall(effect)
            if self.telemetry is not None:
                self.telemetry.action(effect, result)
            return result
        if isinstance(effect, LoadFlow):
            reference = resolve_flow_reference(effect.declaration.definition, effect.parent.source)
            return reference, await self._aload_definition(reference)
        if isinstance(effect, LoadDefinition):
            return await self._aload_definition(effect.fsm_id)
        raise TypeError(f"unknown effect {effect!r}")  # pragma: no cover - the generators yield only known effects

    def _drive(self, generator: Generator[Any, Any, _T]) -> _T:
        """Run one of the engine's generators, performing the effects it yields synchronously.

        Errors the generator is written to handle (a sub-flow that cannot load, a
        save that lost the compare-and-set) are thrown back into it; any other
        error ends it and reaches the caller.
        """
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = generator.throw(error) if error is not None else generator.send(value)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            try:
                if isinstance(effect, CallLLM):
                    value = self._call_llm(effect.request)
                elif isinstance(effect, CallHook):
                    functions = self.hooks.get(effect.name)
                    value = run_sync(effect.name, functions, effect.make_event()) if functions else None
                else:
                    value = self._perform(effect)
            except _RECOVERABLE as exc:
                error = exc

    async def _adrive(self, generator: Generator[Any, Any, _T]) -> _T:
        """The asynchronous twin of ``_drive``: same generators, awaited effects."""
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                effect = generator.throw(error) if error is not None else generator.send(value)
            except StopIteration as stop:
                return stop.value
            value, error = None, None
            try:
                if isinstance(effect, CallLLM):
                    value = await self._acall_llm(effect.request)
                elif isinstance(effect, CallHook):
                    functions = self.hooks.get(effect.name)
                    value = await run_async(effect.name, functions, effect.make_event()) if functions else None
                else:
                    value = await self._aperform(effect)
            except _RECOVERABLE as exc:
                error = exc

    # --- starting ------------------------------------------------------------------

    def _new_instance(
        self, fsm_id: Any, definition: FSMDefinition, user_id: str | None, room_id: str | None
    ) -> FSMInstance:
        if definition.initial_state not in definition.states:
            raise StateNotFoundError(
                f"initial state {definition.initial_state!r} is not declared in FSM {definition.name!r}"
            )
        return FSMInstance(
            fsm_id=fsm_id if isinstance(fsm_id, str) else definition.name,
            current_state=definition.initial_state,
            context=FSMContext(
                conversation=Conversation(
                    max_history_size=self.max_history_size, max_message_length=self.max_message_length
                )
            ),
            persona=definition.persona,
            flow_name=definition.name,
            user_id=user_id,
            room_id=room_id,
            definition_hash=definition.content_hash,
        )

    def _starting(
        self, fsm_id: Any, initial_context: Mapping[str, Any] | None, user_id: str | None, room_id: str | None
    ) -> Generator[Any, Any, tuple[str, str]]:
        definition = yield LoadDefinition(fsm_id)
        if isinstance(fsm_id, FSMDefinition):
            self._given_definitions[definition.name] = definition
        yield from self._checking_actions(definition)
        instance = self._new_instance(fsm_id, definition, user_id, room_id)
        outcome = yield from run_opening(
            definition, instance, self.prompt_builder, self.config, initial_context, schema_sent=self._schema_sent()
        )
        yield SaveConversation(instance, None)
        return instance.conversation_id, outcome.reply

    def _checking_actions(self, definition: FSMDefinition) -> Generator[Any, Any, None]:
        """Refuse a conversation whose definition, or a sub-flow it can start however deep, calls unregistered
        actions: it would fail mid-way (``ActionRegistry.require``, each sub-flow once).

        A sub-flow that cannot be loaded is skipped here: starting it is refused in the turn that asks for it,
        as before.
        """
        self.actions.require(definition)
        seen: set[str] = set()
        pending = [(definition, "")]
        while pending:
            parent, path = pending.pop()
            declarations = [d for state in parent.states for d in parent.flows_for(state)]
            for declaration in {(d.name, d.definition): d for d in declarations}.values():
                try:
                    reference, child = yield LoadFlow(declaration, parent)
                except DefinitionError:
                    continue
                if reference in seen:
                    continue
                seen.add(reference)
                via = f"{path} → {declaration.name}"
                self.actions.require(child, via=f" (sub-flow {definition.name}{via})")
                pending.append((child, via))

    def start_conversation(
        self,
        fsm_id: str,
        initial_context: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> tuple[str, str]:
        """Create a conversation and return ``(conversation_id, opening message)``.

        ``fsm_id`` is an id or path for the loader, or an ``FSMDefinition``: this manager then keeps
        it under its name for the conversation's later turns (another process needs a loader that
        finds that name).
        """
        return self._drive(self._starting(fsm_id, initial_context, user_id, room_id))

    async def astart_conversation(
        self,
        fsm_id: str,
        initial_context: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> tuple[str, str]:
        async with self._turn_slot():  # the opening is a model call and a turn's worth of work
            return await self._adrive(self._starting(fsm_id, initial_context, user_id, room_id))

    # --- turns ---------------------------------------------------------------------

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
                f"the message carries {user.images} image(s) and {_model_name(llm)} does not read images; send text, "
                "or use a model that reads images (LiteLLMInterface(..., vision=True) for one litellm does not know)"
            )
        return user

    def _turn(
        self,
        conversation_id: str,
        message: UserMessage,
        message_id: str | None,
        user_id: str | None,
        room_id: str | None,
    ) -> Generator[Any, Any, TurnOutcome]:
        """Load, run the turn, save with compare-and-set; on a lost race, run it again on the new version.

        The attempts share one action memo: an action that ran in a lost attempt is not called again.
        """
        memo = ActionMemo()
        for attempt in range(self.max_save_retries + 1):
            instance = yield LoadConversation(conversation_id, user_id, room_id, message_id)
            expected = instance.version
            if message_id is not None and message_id in instance.processed_messages:
                # a retried delivery: answered once
                return TurnOutcome(
                    reply=instance.processed_messages[message_id],
                    state=instance.current_state,
                    ended=instance.ended,
                    mode=instance.mode,
                )
            if instance.ended:
                raise ConversationEndedError(f"conversation {instance.conversation_id} has ended ({instance.status})")
            definition = self._checked(instance, (yield LoadDefinition(instance.fsm_id)))
            if instance.mode == "human":  # a person has it: record the message, call no model and no hook
                outcome = human_turn(definition, instance, message, self.config, message_id=message_id)
                yield Decided(state=outcome.state, verdict="human_mode", ended=False)
            else:
                outcome = yield from run_turn(
                    definition,
                    instance,
                    message,
                    self.prompt_builder,
                    self.config,
                    message_id=message_id,
                    schema_sent=self._schema_sent(),
                    action_memo=memo,
                )
            try:
                yield SaveConversation(instance, expected)
            except ConcurrentUpdateError:
                if attempt == self.max_save_retries:
                    raise
                logger.info("conversation %s changed under us; running the turn again", conversation_id)
                continue
            _log_refusals(conversation_id, outcome)
            return outcome
        raise AssertionError("unreachable")  # pragma: no cover

    def process_message(
        self,
        conversation_id: str,
        message: str | list[dict[str, Any]],
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Run one turn and return the reply. A repeated ``message_id`` returns the stored reply.

        ``message`` is text, or content parts in litellm's format (text and ``image_url`` parts) for a model that
        reads images; the text parts joined by newlines are the text the engine reasons with. ``metadata`` (a small
        JSON object: channel ids, attachments) is stored with the message and returned by
        ``get_conversation_history``. Anything the engine cannot take raises ``InvalidMessageError`` (or a child)
        before any model call, and nothing is saved.

        While a person has the conversation (``hand_off``, or a state declared ``handoff: true``) the message
        is recorded, no model is called and the reply is ``""``: the person answers (``post_operator_message``).
        """
        return self.process_turn(
            conversation_id, message, message_id, user_id=user_id, room_id=room_id, metadata=metadata
        ).reply

    def process_turn(
        self,
        conversation_id: str,
        message: str | list[dict[str, Any]],
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> TurnOutcome:
        """``process_message`` returning the whole outcome: reply, turn record, state reached, ended.

        Saves a server or a channel adapter a second load to learn where the turn went. For a repeated
        ``message_id`` the record is None and the state is the conversation's current one.
        """
        user = self._check_message(message, message_id, metadata)
        with self._lock_for(conversation_id):  # the with statement keeps the weakly registered lock alive
            if self.telemetry is None:
                return self._drive(self._turn(conversation_id, user, message_id, user_id, room_id))
            with self.telemetry.turn(conversation_id) as span:
                outcome = self._drive(self._turn(conversation_id, user, message_id, user_id, room_id))
                self.telemetry.turn_done(span, outcome)
                return outcome

    async def aprocess_message(
        self,
        conversation_id: str,
        message: str | list[dict[str, Any]],
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Run one turn and return the reply, awaiting the conversation's lock without holding a thread.

        Turns on one conversation run in arrival order; a duplicate ``message_id`` waits for the
        first delivery and returns its stored reply, with no second model call.
        """
        outcome = await self.aprocess_turn(
            conversation_id, message, message_id, user_id=user_id, room_id=room_id, metadata=metadata
        )
        return outcome.reply

    async def aprocess_turn(
        self,
        conversation_id: str,
        message: str | list[dict[str, Any]],
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> TurnOutcome:
        """The async twin of ``process_turn``."""
        user = self._check_message(message, message_id, metadata)
        async with self._lock_for(conversation_id), self._turn_slot():  # lock first: a slot never waits for a lock
            if self.telemetry is None:
                return await self._adrive(self._turn(conversation_id, user, message_id, user_id, room_id))
            with self.telemetry.turn(conversation_id) as span:
                outcome = await self._adrive(self._turn(conversation_id, user, message_id, user_id, room_id))
                self.telemetry.turn_done(span, outcome)
                return outcome

    def astream_message(
        self,
        conversation_id: str,
        message: str | list[dict[str, Any]],
        message_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Run one turn and stream it: ``state`` once decided, ``token`` events with the reply's text, ``done``.

        No text of a refused move is ever streamed: the engine decides as soon as the decision part of
        the model's reply has arrived, and streams the message only when it keeps it (otherwise the
        regenerated reply is streamed). The turn runs to its end even if the consumer stops reading; a
        failure raises the same typed errors as ``aprocess_message``, and nothing of the turn is saved.
        Interfaces that cannot stream give the same events once the whole reply is there.
        """
        from llm_fsm.runtime._stream import stream_turn

        user = self._check_message(message, message_id, metadata)
        generator = self._turn(conversation_id, user, message_id, user_id, room_id)
        return stream_turn(self, generator, self._lock_for(conversation_id), self._turn_slot(), conversation_id)

    recoverable_errors = _RECOVERABLE
    """Errors the engine's generators handle themselves (thrown back into them by the drivers)."""

    def _turn_slot(self) -> asyncio.Semaphore:
        """This event loop's bound on async turns in flight (asyncio primitives belong to one loop)."""
        loop = asyncio.get_running_loop()
        slots = self._turn_slots.get(loop)
        if slots is None:
            slots = self._turn_slots.setdefault(loop, asyncio.Semaphore(self.max_concurrent_turns))
        return slots

    # --- reading -------------------------------------------------------------------
    # Each reader has an async twin (``a`` + name) that awaits the store instead of blocking the loop.
    # Only get_instance and explain read the turn log; the others need the hot record alone.

    def get_instance(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        """The stored conversation, turn records and message ids included (a copy: changing it changes nothing)."""
        return self._load(conversation_id, user_id, room_id, whole=True)

    async def aget_instance(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMInstance:
        return await self._aload(conversation_id, user_id, room_id, whole=True)

    def is_conversation_ended(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> bool:
        return self._load(conversation_id, user_id, room_id).ended

    async def ais_conversation_ended(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> bool:
        return (await self._aload(conversation_id, user_id, room_id)).ended

    def get_conversation_data(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> dict[str, Any]:
        """The context data collected so far (a copy)."""
        return self._load(conversation_id, user_id, room_id).context.data

    async def aget_conversation_data(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> dict[str, Any]:
        return (await self._aload(conversation_id, user_id, room_id)).context.data

    def get_current_state(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> str:
        return self._load(conversation_id, user_id, room_id).current_state

    async def aget_current_state(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> str:
        return (await self._aload(conversation_id, user_id, room_id)).current_state

    def get_conversation_history(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The full transcript, oldest first, messages the store archived included.

        One dict per message, with the same keys for every message: ``role`` (``user``, ``assistant`` or
        ``operator``), ``text``, ``id`` (the ``message_id`` a user message came with, a generated ``m<number>``
        otherwise), ``at`` (epoch seconds), ``metadata`` (``{}`` when none was given) and ``parts`` (the content
        parts as stored, None for plain text). ``id`` and ``at`` are None for messages stored before they existed.
        """
        return [entry_view(entry) for entry in self.store.transcript(conversation_id, user_id=user_id, room_id=room_id)]

    async def aget_conversation_history(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[dict[str, Any]]:
        entries = await self._astore("transcript", conversation_id, user_id=user_id, room_id=room_id)
        return [entry_view(entry) for entry in entries]

    def explain(
        self, conversation_id: str, turn: int = -1, *, user_id: str | None = None, room_id: str | None = None
    ) -> TurnRecord:
        """The record of one turn: ``turn=-1`` is the last, a positive number is the turn's index (1-based)."""
        return _turn_record(self._load(conversation_id, user_id, room_id, whole=True), turn)

    async def aexplain(
        self, conversation_id: str, turn: int = -1, *, user_id: str | None = None, room_id: str | None = None
    ) -> TurnRecord:
        return _turn_record(await self._aload(conversation_id, user_id, room_id, whole=True), turn)

    def get_usage(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> Usage:
        """Model calls, tokens and cost of the conversation so far (each turn's calls are in its explain record)."""
        return self._load(conversation_id, user_id, room_id).usage

    async def aget_usage(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> Usage:
        return (await self._aload(conversation_id, user_id, room_id)).usage

    def get_trace(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[TraceEvent]:
        return self._load(conversation_id, user_id, room_id).trace

    async def aget_trace(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> list[TraceEvent]:
        return (await self._aload(conversation_id, user_id, room_id)).trace

    async def aget_definition(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> FSMDefinition:
        instance = await self._aload(conversation_id, user_id, room_id)
        return self._checked(instance, await self._aload_definition(instance.fsm_id))

    def validate_transition(
        self,
        conversation: str | FSMInstance,
        target_state: str,
        conversation_id: str | None = None,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> tuple[bool, str | None]:
        """Could the conversation move to ``target_state`` now? ``(True, None)`` or ``(False, why)``.

        ``conversation`` is a conversation id, like every other method's first argument (an
        ``FSMInstance`` is accepted too, as earlier versions took).
        """
        instance = conversation if isinstance(conversation, FSMInstance) else self._load(conversation, user_id, room_id)
        return self._validated(instance, self._load_definition(instance.fsm_id), target_state)

    async def avalidate_transition(
        self, conversation_id: str, target_state: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> tuple[bool, str | None]:
        instance = await self._aload(conversation_id, user_id, room_id)
        return self._validated(instance, await self._aload_definition(instance.fsm_id), target_state)

    def _validated(
        self, instance: FSMInstance, definition: FSMDefinition, target_state: str
    ) -> tuple[bool, str | None]:
        valid, why = _validate_transition(definition, instance.current_state, target_state, instance.context.data)
        if not valid:
            logger.info(
                "transition %s → %s refused in %s: %s",
                instance.current_state,
                target_state,
                instance.conversation_id,
                why,
            )
        return valid, why

    def list_conversations(
        self, *, user_id: str | None = None, room_id: str | None = None, all_users: bool = False
    ) -> list[ConversationSummary]:
        """Conversations newest first: one user's (in every room, or in ``room_id``), or everyone's.

        Listing every user's conversations is an operator's act, so it must be asked for with
        ``all_users=True``; without a user it is refused rather than silently done.
        """
        scope = _listing_scope(user_id, room_id, all_users)
        return _listed(self.store.list(**scope), user_id, room_id, all_users)

    async def alist_conversations(
        self, *, user_id: str | None = None, room_id: str | None = None, all_users: bool = False
    ) -> list[ConversationSummary]:
        scope = _listing_scope(user_id, room_id, all_users)
        return _listed(await self._astore("list", **scope), user_id, room_id, all_users)

    # --- changing from outside a turn ------------------------------------------------

    def _mutation(
        self, conversation_id: str, user_id: str | None, room_id: str | None, change: Callable[[FSMInstance], None]
    ) -> Generator[Any, Any, FSMInstance]:
        """An application change outside a turn (end, update_context): load, change, compare-and-set, retry."""
        for attempt in range(self.max_save_retries + 1):
            instance = yield LoadConversation(conversation_id, user_id, room_id)
            expected = instance.version
            change(instance)
            try:
                yield SaveConversation(instance, expected)
            except ConcurrentUpdateError:
                if attempt == self.max_save_retries:
                    raise
                continue
            return instance
        raise AssertionError("unreachable")  # pragma: no cover

    def _mutate(
        self, conversation_id: str, user_id: str | None, room_id: str | None, change: Callable[[FSMInstance], None]
    ) -> FSMInstance:
        with self._lock_for(conversation_id):
            return self._drive(self._mutation(conversation_id, user_id, room_id, change))

    async def _amutate(
        self, conversation_id: str, user_id: str | None, room_id: str | None, change: Callable[[FSMInstance], None]
    ) -> FSMInstance:
        async with self._lock_for(conversation_id):
            return await self._adrive(self._mutation(conversation_id, user_id, room_id, change))

    def end_conversation(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> None:
        """Mark the conversation ended; its data stays readable until deleted."""
        self._mutate(conversation_id, user_id, room_id, _end)

    async def aend_conversation(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> None:
        await self._amutate(conversation_id, user_id, room_id, _end)

    def update_context(
        self,
        conversation_id: str,
        updates: Mapping[str, Any],
        *,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> dict[str, Any]:
        """Set context keys as the application (protected keys allowed; ``None`` removes a key).

        Values of declared keys are normalised and checked; an invalid one raises ``ContextValidationError``
        and nothing of the update is kept.
        """
        return self._mutate(conversation_id, user_id, room_id, self._updater(updates)).context.data

    async def aupdate_context(
        self,
        conversation_id: str,
        updates: Mapping[str, Any],
        *,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> dict[str, Any]:
        return (await self._amutate(conversation_id, user_id, room_id, self._updater(updates))).context.data

    def _updater(self, updates: Mapping[str, Any]) -> Callable[[FSMInstance], None]:
        def update(instance: FSMInstance) -> None:
            definition = self._load_definition(instance.fsm_id)
            policy = KeyPolicy(definition) if definition.context_keys else None
            changes = apply_update(
                instance.context.data,
                updates,
                source="application",
                max_bytes=self.config.max_context_bytes,
                policy=policy,
            )
            instance.trace.append(
                TraceEvent(event="context_update", data={"source": "application", "keys": [c.key for c in changes]})
            )

        return update

    def delete_conversation(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> bool:
        return self.store.delete(conversation_id, user_id=user_id, room_id=room_id)

    async def adelete_conversation(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> bool:
        deleted: bool = await self._astore("delete", conversation_id, user_id=user_id, room_id=room_id)
        return deleted


def _model_name(llm: Any) -> str:
    model = getattr(llm, "model", None)
    return model if isinstance(model, str) and model else type(llm).__name__


def _store_span(effect: Any) -> tuple[str, str]:
    if isinstance(effect, LoadConversation):
        return "load", effect.conversation_id
    return "save", effect.instance.conversation_id


def _log_refusals(conversation_id: str, outcome: TurnOutcome) -> None:
    """What the engine refused, at WARNING, with ids and rules only: never the user's text or a value."""
    record = outcome.record
    if record is None or not logger.isEnabledFor(logging.WARNING):
        return
    if record.verdict.kind == "stay_rejected":
        logger.warning(
            "conversation %s: turn %d: %s refused in state %r (%s)",
            conversation_id,
            record.index,
            "proposal " + repr(record.proposal) if record.proposal else f"intent {record.intent!r}",
            record.state_before,
            _without_values(record.verdict.reason),
        )
    refused = [(c.key, c.rule) for c in record.context_changes if not c.applied and c.rule is not None]
    if refused:
        logger.warning(
            "conversation %s: turn %d: values refused: %s",
            conversation_id,
            record.index,
            ", ".join(f"{key} ({rule})" for key, rule in refused),
        )


def _without_values(reason: str) -> str:
    """A verdict's reason names states, transitions and conditions (definition text), not user data."""
    return reason if len(reason) <= 300 else reason[:297] + "..."


def _end(instance: FSMInstance) -> None:
    if instance.status == "active":
        instance.status = "ended"
        instance.trace.append(
            TraceEvent(event="end", data={"state": instance.current_state, "reason": "ended by the application"})
        )


def _turn_record(instance: FSMInstance, turn: int) -> TurnRecord:
    records = instance.turns
    if turn < 0:
        if -turn > len(records):
            raise TurnNotFoundError(
                f"conversation {instance.conversation_id} keeps {len(records)} turn records; {turn} is out of range"
            )
        return records[turn]
    for record in records:
        if record.index == turn:
            return record
    raise TurnNotFoundError(
        f"turn {turn} of conversation {instance.conversation_id} is not kept (only the last {len(records)} are)"
    )


def _listing_scope(user_id: str | None, room_id: str | None, all_users: bool) -> dict[str, Any]:
    """What to ask the store for. Stores match an exact (user, room) pair, or list everything when both are None."""
    if all_users:
        if user_id is not None or room_id is not None:
            raise UsageError("all_users=True lists every conversation; do not also give user_id or room_id")
        return {}
    if user_id is None:
        raise UsageError(
            "list_conversations() needs user_id (that user's conversations) or all_users=True (everyone's, "
            "an operator's listing); room_id alone does not say whose"
        )
    return {"user_id": user_id, "room_id": room_id} if room_id is not None else {}


def _listed(
    summaries: list[ConversationSummary], user_id: str | None, room_id: str | None, all_users: bool
) -> list[ConversationSummary]:
    if all_users or room_id is not None:
        return list(summaries)
    return [s for s in summaries if s.user_id == user_id]  # every room of this user


def _as_response(value: Any) -> LLMResponse:
    if isinstance(value, LLMResponse):
        return value
    try:
        return LLMResponse.model_validate(value)
    except Exception as exc:  # noqa: BLE001
        raise LLMResponseError(f"LLM interface returned {type(value).__name__}, not an LLMResponse: {exc}") from exc


__all__ = ["DEFAULT_MAX_CONCURRENT_TURNS", "DEFAULT_MAX_INPUT_CHARS", "FSMManager"]
