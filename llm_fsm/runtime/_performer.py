"""The one place effects are performed: every driver (sync, async, streaming; the server and the CLI through
them) hands its operation's effects to a ``Performer`` and only makes the waits it gets back.

Each effect has one handler, a small generator written once: what must happen around the I/O (model-call
accounting and its span, error translation, the definition policy, the store's span, the audit trail's
bound, the outcome-unknown rule of a failed save) happens here, and the I/O itself is a ``Blocking`` or
``ReadModel`` wait the driver makes the way its caller waits. A new driver — timers, replay, a protocol
server — gets all of it by performing nothing itself.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from llm_fsm.audit._versions import definition_of, version_document
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._actions import CallAction
from llm_fsm.engine._chain import link
from llm_fsm.engine._hooks import Hooks
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import LLMCallRecord, LLMRequest, LLMResponse, LLMResult
from llm_fsm.engine._retrieval import CallRetriever
from llm_fsm.engine._turn import AwaitMessage, CallHook, CallLLM, Decided, EngineConfig, LoadDefinition, LoadFlow
from llm_fsm.errors import (
    ConcurrentUpdateError,
    DefinitionVersionNotFoundError,
    FSMError,
    LLMConfigurationError,
    LLMResponseError,
    StoreUnavailableError,
    TurnOutcomeUnknownError,
)
from llm_fsm.runtime._actions import ActionRegistry
from llm_fsm.runtime._definitions import DefinitionSource
from llm_fsm.runtime._effects import (
    Blocking,
    LoadActiveDefinition,
    LoadConversation,
    ReadModel,
    ReadRest,
    Retract,
    SaveConversation,
    StoreCall,
    Tell,
    Wait,
)
from llm_fsm.runtime._hooks import run_async, run_sync
from llm_fsm.runtime._retrievers import RetrieverRegistry
from llm_fsm.stores import ConversationStore
from llm_fsm.stores.base import Retention

if TYPE_CHECKING:
    from llm_fsm.telemetry import Telemetry

logger = logging.getLogger(__name__)

Handling = Generator[Wait, Any, Any]


@dataclass(frozen=True)
class Saved:
    """A conversation a save has just written: what a save listener is told (``FSMManager.save_listeners``)."""

    conversation_id: str
    user_id: str | None
    room_id: str | None
    version: int


SaveListener = Callable[[Saved], None]
"""Called after every successful save, on the saving thread or event loop: it must return at once (an event
stream's wake-up, a webhook outbox's note) and may raise nothing that matters (a raise is logged and dropped:
the conversation is saved whatever a listener does)."""


class Parts(Protocol):
    """What the performer uses of the runtime it serves (``FSMManager`` is one)."""

    store: ConversationStore
    llm_interface: Any
    hooks: Hooks
    actions: ActionRegistry
    retrievers: RetrieverRegistry
    telemetry: Telemetry | None
    config: EngineConfig
    definitions: DefinitionSource
    save_listeners: list[SaveListener]

    def turn_log(self) -> bool: ...
    def retention(self) -> Retention | None: ...


@dataclass
class Ledger:
    """Every model call one operation made, attempt by attempt, so none goes unaccounted.

    A turn that loses its compare-and-set runs again on the new version; the calls of the lost attempt were
    spent all the same. The saved attempt adds them to the conversation's usage (and its explain record), so
    budgets count what was spent, whichever worker's save won. Results are kept as they came (records are
    built only for the rare lost call: a record is a validated model, and most turns lose nothing).
    """

    calls: list[tuple[str, LLMResult]] = field(default_factory=list)
    settled: int = 0
    """Calls up to here are in a saved conversation's usage already."""
    attempt_started: int = 0

    def new_attempt(self) -> None:
        self.attempt_started = len(self.calls)

    def lost(self) -> list[LLMCallRecord]:
        """Calls of earlier attempts of this operation that no saved attempt has counted yet."""
        if self.settled == self.attempt_started:
            return []
        return [
            LLMCallRecord.of(purpose, result) for purpose, result in self.calls[self.settled : self.attempt_started]
        ]

    def saved(self) -> None:
        self.settled = len(self.calls)


@dataclass
class _Pending:
    """A streamed model call whose decision came first: its record and span wait for the rest of the reply."""

    index: int
    purpose: str
    result: LLMResult
    span: contextlib.ExitStack
    recorder: Any


class Performer:
    """Performs the effects of one operation (a turn with its attempts, a change, a read)."""

    __slots__ = ("_pending", "ledger", "parts")

    def __init__(self, parts: Parts, ledger: Ledger | None = None) -> None:
        self.parts = parts
        self.ledger = ledger if ledger is not None else Ledger()  # its own: a start calls the model too
        self._pending: _Pending | None = None

    def handle(self, effect: Any) -> Handling:
        """The waits ``effect`` needs; what the generator returns is the effect's answer."""
        handler = _HANDLERS.get(type(effect))
        if handler is None:  # pragma: no cover - the generators yield only known effects
            raise TypeError(f"unknown effect {effect!r}")
        return handler(self, effect)

    def at_once(self, effect: Any) -> Any:
        """The answer of an effect that needs no wait (a hook nobody registered, a cached definition), else
        ``WAITS``: the common case skips a generator per effect, which a turn of a dozen effects notices."""
        kind = type(effect)
        if kind is CallHook:
            return WAITS if self.parts.hooks.get(effect.name) else None
        if kind is LoadDefinition:
            cached = self.parts.definitions.cached(effect.fsm_id)
            if cached is None or (effect.version is not None and cached.content_hash != effect.version):
                return WAITS  # another version is asked for: the handler finds it (held, or the store's)
            return cached
        if kind is LoadActiveDefinition:
            instance = effect.instance
            cached = self.parts.definitions.cached(instance.fsm_id)
            pinned = instance.definition_hash and self.parts.definitions.policy == "pin"
            if cached is None or (pinned and cached.content_hash != instance.definition_hash):
                return WAITS  # pinned to another version than the file's now: the handler finds it
            return self.parts.definitions.checked(instance, cached)
        return WAITS

    # --- the store ----------------------------------------------------------------------------------------

    def _store_wait(self, operation: str, *args: Any, **kwargs: Any) -> Blocking:
        store = self.parts.store
        native = getattr(store, "a" + operation, None)
        return Blocking(
            functools.partial(getattr(store, operation), *args, **kwargs),
            None if native is None else functools.partial(native, *args, **kwargs),
        )

    def _load(self, effect: LoadConversation) -> Handling:
        kwargs: dict[str, Any] = {"user_id": effect.user_id, "room_id": effect.room_id}
        operation = "load"
        if not effect.whole and self.parts.turn_log():
            operation, kwargs["message_id"] = "load_for_turn", effect.message_id
        if self.parts.telemetry is None:
            return (yield self._store_wait(operation, effect.conversation_id, **kwargs))
        with self._store_span("load", effect.conversation_id):
            return (yield self._store_wait(operation, effect.conversation_id, **kwargs))

    def _save(self, effect: SaveConversation) -> Handling:
        instance = effect.instance
        instance.bound_trace(self.parts.config.max_trace_events)  # whatever path wrote it, the trail stays bounded
        link(instance, instance.turns, self.parts.config.audit_key)  # whatever path made them, records are chained
        yield from self._keep_versions(instance)
        kwargs: dict[str, Any] = {"expected_version": effect.expected_version}
        retention = self.parts.retention() if self.parts.turn_log() else None
        if retention is not None:  # a store written to the older protocol takes no ``retention``
            kwargs["retention"] = retention
        with self._store_span("save", instance.conversation_id):  # a nullcontext without telemetry
            try:
                version = yield self._store_wait("save", instance, **kwargs)
            except ConcurrentUpdateError:
                yield Retract()  # the attempt is lost: a client that saw it streaming must forget it
                raise
            except TurnOutcomeUnknownError:
                raise
            except StoreUnavailableError as exc:
                if effect.expected_version is None:
                    raise  # a new conversation: at worst a record nobody knows the id of, never a turn taken twice
                # The write may have reached the store before the connection failed: say so, never "nothing
                # was written", so a caller resends with the same message_id (answered once) instead of anew.
                raise TurnOutcomeUnknownError(
                    f"the store failed while saving conversation {instance.conversation_id}, so whether this change "
                    f"was saved is unknown ({exc}); read the conversation, or resend with the same message_id "
                    "(a message already saved is answered from the store, not run twice)",
                    message_id=effect.message_id,
                ) from exc
        self.ledger.saved()
        if self.parts.save_listeners:
            _tell(
                self.parts.save_listeners, Saved(instance.conversation_id, instance.user_id, instance.room_id, version)
            )
        return version

    def _keep_versions(self, instance: FSMInstance) -> Handling:
        """Store every definition version the conversation runs on that the store may not have yet, before the
        conversation itself: a saved conversation can always be loaded with its own version."""
        store, source = self.parts.store, self.parts.definitions
        if not hasattr(store, "save_definition_version"):
            return  # a store of the older protocol keeps no versions: conversations continue on the current file
        stored = source.stored_in(store)
        for version in _versions_of(instance):
            definition = source.versions.get(version)
            if version in stored or definition is None:
                continue
            yield self._store_wait("save_definition_version", version, version_document(definition))
            stored.add(version)

    def _store_call(self, effect: StoreCall) -> Handling:
        return (yield self._store_wait(effect.operation, *effect.args, **effect.kwargs))

    def _store_span(self, operation: str, conversation_id: str) -> contextlib.AbstractContextManager[None]:
        telemetry = self.parts.telemetry
        return telemetry.store(operation, conversation_id) if telemetry is not None else contextlib.nullcontext()

    # --- definitions ----------------------------------------------------------------------------------------

    def _definition(self, effect: LoadDefinition) -> Handling:
        definition: FSMDefinition = yield from self._load_definition(effect.fsm_id)
        pinned = yield from self._pinned(effect.version, definition, exact=effect.exact)
        return definition if pinned is None else pinned

    def _load_definition(self, fsm_id: Any) -> Handling:
        source = self.parts.definitions
        cached = source.cached(fsm_id)
        if cached is None:
            cached = yield Blocking(functools.partial(source.load, fsm_id))  # the loader may read files: the pool
        return source.remember(cached)

    def _flow(self, effect: LoadFlow) -> Handling:
        reference = self.parts.definitions.flow_reference(effect.declaration, effect.parent)
        return reference, (yield from self._load_definition(reference))

    def _active_definition(self, effect: LoadActiveDefinition) -> Handling:
        instance = effect.instance
        definition: FSMDefinition = yield from self._load_definition(instance.fsm_id)
        pinned = yield from self._pinned(instance.definition_hash, definition)
        return self.parts.definitions.checked(instance, definition) if pinned is None else pinned

    def _pinned(self, version: str | None, current: FSMDefinition, *, exact: bool = False) -> Handling:
        """The version a conversation is pinned to (``on_definition_change="pin"``): the current definition when it
        is that version, else the one the manager holds or the store keeps; None when the policy is another, or
        the version is nowhere (the caller's policy then decides). ``exact``: the version is required whatever
        the policy (DefinitionVersionNotFoundError when nowhere)."""
        source = self.parts.definitions
        if version is None or current.content_hash == version:
            return current
        if source.policy != "pin" and not exact:
            return None
        held = source.versions.get(version)
        if held is not None:
            return held
        store = self.parts.store
        if not hasattr(store, "load_definition_version"):
            if exact:
                raise DefinitionVersionNotFoundError(f"definition version {version}: the store keeps no versions")
            return None
        try:
            document = yield self._store_wait("load_definition_version", version)
        except DefinitionVersionNotFoundError:
            if exact:
                raise
            return None
        source.stored_in(store).add(version)
        return source.remember(definition_of(version, document))

    # --- the model ------------------------------------------------------------------------------------------

    def _llm(self) -> Any:
        llm = self.parts.llm_interface
        if llm is None:
            raise LLMConfigurationError("FSMManager has no llm_interface; pass e.g. LiteLLMInterface(model=...)")
        return llm

    def _model(self, effect: CallLLM) -> Handling:
        request = effect.request
        llm = self._llm()
        telemetry = self.parts.telemetry
        if telemetry is None:
            result = yield from self._read(llm, request, None)
            self.ledger.calls.append((request.purpose, result))
            if result.message_pending:  # its usage comes with the rest of the reply
                self._pending = _Pending(
                    len(self.ledger.calls) - 1, request.purpose, result, contextlib.ExitStack(), None
                )
            return result
        span = contextlib.ExitStack()
        recorder = span.enter_context(telemetry.model_call(model_name(llm), request.purpose))
        with span:
            result = yield from self._read(llm, request, recorder)
            self.ledger.calls.append((request.purpose, result))
            if result.message_pending:  # the usage and the span's end come with the rest of the reply
                self._pending = _Pending(len(self.ledger.calls) - 1, request.purpose, result, span.pop_all(), recorder)
                return result
            recorder.result(result)
            return result

    def _read(self, llm: Any, request: LLMRequest, recorder: Any) -> Handling:
        """The model's reply as an ``LLMResult``; any failure of the interface typed (the one translation)."""
        astream = getattr(llm, "astream", None)
        stream = functools.partial(astream, request) if callable(astream) else None
        try:
            return as_result((yield ReadModel(*_model_calls(llm, request), request=request, stream=stream)))
        except FSMError as exc:
            if recorder is not None:
                recorder.failed(exc)
            raise
        except Exception as exc:  # a custom interface's own failure: typed, with the cause kept
            if recorder is not None:
                recorder.failed(exc)
            raise LLMResponseError(f"LLM interface failed: {type(exc).__name__}: {exc}") from exc

    def _decided(self, effect: Decided) -> Handling:
        return (yield Tell(effect))

    def _rest(self, effect: AwaitMessage) -> Handling:
        pending, self._pending = self._pending, None
        if pending is None:  # pragma: no cover - the engine asks only after a pending result
            raise LLMResponseError("no streamed reply is pending")
        with pending.span:
            text, final = yield ReadRest()
            whole = replace(
                final if final is not None else pending.result,
                response=pending.result.response.model_copy(update={"message": text}),
                message_pending=False,
            )
            self.ledger.calls[pending.index] = (pending.purpose, whole)
            if pending.recorder is not None:
                pending.recorder.result(whole)
        return whole

    # --- the application's code -----------------------------------------------------------------------------

    def _hook(self, effect: CallHook) -> Handling:
        functions = self.parts.hooks.get(effect.name)
        if not functions:
            return None
        event = effect.make_event()
        return (
            yield Blocking(
                functools.partial(run_sync, effect.name, functions, event),
                functools.partial(run_async, effect.name, functions, event),
            )
        )

    def _action(self, effect: CallAction) -> Handling:
        actions = self.parts.actions
        result = yield Blocking(functools.partial(actions.call, effect), functools.partial(actions.acall, effect))
        if self.parts.telemetry is not None:
            self.parts.telemetry.action(effect, result)
        return result

    def _retrieval(self, effect: CallRetriever) -> Handling:
        retrievers = self.parts.retrievers
        result = yield Blocking(functools.partial(retrievers.call, effect), functools.partial(retrievers.acall, effect))
        if self.parts.telemetry is not None:
            self.parts.telemetry.retrieval(effect, result)
        return result

    def close(self) -> None:
        """End what a failed operation left open (a streamed call's span whose rest never came)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.span.close()


WAITS: Any = object()
"""``Performer.at_once``'s answer for an effect that needs its handler (and a wait)."""

_HANDLERS: dict[type[Any], Callable[[Performer, Any], Handling]] = {
    LoadConversation: Performer._load,
    SaveConversation: Performer._save,
    CallLLM: Performer._model,
    CallHook: Performer._hook,
    CallAction: Performer._action,
    CallRetriever: Performer._retrieval,
    LoadDefinition: Performer._definition,
    LoadFlow: Performer._flow,
    LoadActiveDefinition: Performer._active_definition,
    StoreCall: Performer._store_call,
    Decided: Performer._decided,
    AwaitMessage: Performer._rest,
}


def model_name(llm: Any) -> str:
    model = getattr(llm, "model", None)
    return model if isinstance(model, str) and model else type(llm).__name__


def _model_calls(llm: Any, request: LLMRequest) -> tuple[Callable[[], Any], Callable[[], Awaitable[Any]] | None]:
    """How to call this interface from a thread and from async code (None: it has only the sync API)."""
    complete = getattr(llm, "complete", None)
    call = functools.partial(complete if callable(complete) else llm.send_request, request)
    for name in ("acomplete", "asend_request"):
        native = getattr(llm, name, None)
        if callable(native):
            return call, functools.partial(native, request)
    return call, None


def _tell(listeners: list[SaveListener], saved: Saved) -> None:
    for listener in list(listeners):  # a copy: a listener may remove itself
        try:
            listener(saved)
        except Exception:  # noqa: BLE001 - the save stands; a listener's fault is its own
            logger.exception("save listener %r failed for conversation %s", listener, saved.conversation_id)


def as_result(value: Any) -> LLMResult:
    """Interfaces may return an LLMResult (with attempts) or just the response (the seed's API)."""
    if isinstance(value, LLMResult):
        return value
    if isinstance(value, LLMResponse):
        return LLMResult(response=value)
    try:
        return LLMResult(response=LLMResponse.model_validate(value))
    except Exception as exc:  # noqa: BLE001
        raise LLMResponseError(f"LLM interface returned {type(value).__name__}, not an LLMResponse: {exc}") from exc


@contextlib.contextmanager
def closing(performer: Performer) -> Iterator[Performer]:
    try:
        yield performer
    finally:
        performer.close()


def _versions_of(instance: FSMInstance) -> list[str]:
    """The definition versions a conversation runs on: the active flow's and every paused flow's."""
    found = [frame.definition_hash for frame in instance.flow_stack] + [instance.definition_hash]
    return list(dict.fromkeys(version for version in found if version))


__all__ = ["Ledger", "Parts", "Performer", "SaveListener", "Saved", "as_result", "model_name"]
