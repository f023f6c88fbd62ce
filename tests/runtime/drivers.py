"""One facade over every way a conversation is driven, so a behaviour test is written once and run each way.

``sync`` calls ``process_turn`` and the other plain methods; ``async`` their ``a``-twins; ``stream`` runs the
turn through ``astream_message`` (the reply is the ``done`` event's) and everything else as ``async`` does;
``http`` posts to ``llm_fsm.server.create_app`` over httpx's ``ASGITransport``, and ``sse`` does the same with
``Accept: text/event-stream``. Only public methods of the manager are used.

Every driver acts as the same tenant (``USER``), so a test reads the conversation back through the manager
with ``user_id=USER`` whichever way it was driven (the helpers at the bottom). An HTTP error answer is raised
as the library error its code stands for (``HttpFailure`` for a code the table does not know, or a body
that is not the API's JSON), so ``pytest.raises(ConversationEndedError)`` reads the same for every driver.
Operations the server does not expose (``update_context``, ``end_conversation``) skip the test over HTTP.

A test about one seam narrows the drivers, or marks those that fail today, with ``drivers_where``::

    @drivers_where(xfail={"stream": "issue 20 #1: ..."})      # every driver; stream is expected to fail
    @drivers_where(only=("sync", "async"))                    # these drivers alone
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from llm_fsm import FSMManager, TraceEvent, TurnOutcome, TurnRecord
from llm_fsm.definition import FSMDefinition
from llm_fsm.engine import FSMInstance
from llm_fsm.engine._records import Usage
from llm_fsm.errors import (
    ActionError,
    BudgetExceededError,
    ConcurrentUpdateError,
    ContextError,
    ConversationEndedError,
    ConversationNotFoundError,
    DefinitionChangedError,
    FSMError,
    HandoffError,
    InvalidMessageError,
    LLMResponseError,
    MessageTooLargeError,
    OperatorError,
    OperatorFlowError,
    StoreUnavailableError,
    UnknownLanguageError,
    UnknownStateError,
    UnsupportedContentError,
)
from llm_fsm.server import ApiKey, KeyRing, create_app, hash_key

USER = "tenant-1"
"""The tenant every driver acts as (the server's key belongs to it)."""

API_KEY = "runtime-tests-key-0123456789"
KEY_NAME = "desk"
"""The key's name: over HTTP an operator's actor is recorded as ``desk/<actor>``."""

DRIVERS = ("sync", "async", "stream", "http", "sse")
STREAMING = ("stream", "sse")
OVER_HTTP = ("http", "sse")

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

Event = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Sent:
    """What a turn answered, the same for every driver (``verdict`` is the kind, None for a repeated message id
    where the driver does not say)."""

    reply: str
    state: str
    ended: bool
    mode: str
    verdict: str | None
    events: tuple[Event, ...] = field(default=())
    """The streamed events, in order (``stream`` and ``sse`` only)."""

    @property
    def streamed_text(self) -> str:
        """The text a client keeps: the ``token`` events after the last ``retract`` (which withdraws an attempt
        whose save was lost)."""
        text: list[str] = []
        for name, data in self.events:
            if name == "retract":
                text.clear()
            elif name == "token":
                text.append(str(data.get("text", "")))
        return "".join(text)


class HttpFailure(Exception):
    """An HTTP answer that is not one of the API's error codes this facade knows (or not JSON at all)."""

    def __init__(self, status: int, code: str, content_type: str, body: str) -> None:
        super().__init__(f"HTTP {status} ({content_type}) {code}: {body[:300]}")
        self.http_status = status
        self.http_code = code
        self.content_type = content_type


_ERROR_TYPES: dict[str, Callable[[str], FSMError]] = {
    "conversation_not_found": ConversationNotFoundError,
    "conversation_ended": ConversationEndedError,
    "budget_exceeded": BudgetExceededError,
    "message_too_large": MessageTooLargeError,
    "unsupported_content": UnsupportedContentError,
    "invalid_message": InvalidMessageError,
    "store_unavailable": StoreUnavailableError,
    "handoff_conflict": HandoffError,
    "unknown_state": UnknownStateError,
    "unknown_language": UnknownLanguageError,
    "flow_refused": OperatorFlowError,
    "operator_refused": OperatorError,
    "definition_changed": DefinitionChangedError,
    "concurrent_update": ConcurrentUpdateError,
    "invalid_context": ContextError,
    "action_failed": lambda message: ActionError(message, action="(not said over HTTP)"),
    "model_error": LLMResponseError,
}
"""The API's error codes (docs/server.md) → the library error each stands for, made from the answer's message."""


def _raise_api_error(status: int, error: Mapping[str, Any], content_type: str) -> None:
    code = str(error.get("code", ""))
    make = _ERROR_TYPES.get(code)
    if make is None:
        raise HttpFailure(status, code, content_type, json.dumps(dict(error)))
    exc = make(str(error.get("message", code)))
    exc.http_status = status  # type: ignore[attr-defined]  # as HttpFailure has them, for a test that asks
    exc.http_code = code  # type: ignore[attr-defined]
    raise exc


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    return asyncio.run(coroutine)


def _sent(outcome: TurnOutcome) -> Sent:
    verdict = outcome.record.verdict.kind if outcome.record is not None else None
    return Sent(outcome.reply, outcome.state, outcome.ended, outcome.mode, verdict)


class Driver:
    """The ``sync`` driver, and the facade every driver keeps."""

    name = "sync"

    @property
    def streams(self) -> bool:
        return self.name in STREAMING

    @property
    def over_http(self) -> bool:
        return self.name in OVER_HTTP

    def __repr__(self) -> str:
        return f"<driver {self.name}>"

    def start(
        self,
        manager: FSMManager,
        fsm_id: str = "",
        initial_context: Mapping[str, Any] | None = None,
        *,
        language: str | None = None,
    ) -> tuple[str, str]:
        return manager.start_conversation(fsm_id, initial_context, user_id=USER, language=language)

    def send(
        self,
        manager: FSMManager,
        cid: str,
        message: str | list[dict[str, Any]],
        *,
        message_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Sent:
        return _sent(manager.process_turn(cid, message, message_id, user_id=USER, metadata=metadata))

    def update_context(self, manager: FSMManager, cid: str, updates: Mapping[str, Any]) -> dict[str, Any]:
        return manager.update_context(cid, updates, user_id=USER)

    def end(self, manager: FSMManager, cid: str) -> None:
        manager.end_conversation(cid, user_id=USER)

    def set_context(
        self, manager: FSMManager, cid: str, updates: Mapping[str, Any], *, actor: str, reason: str | None = None
    ) -> None:
        manager.set_context(cid, updates, actor=actor, reason=reason, user_id=USER)

    def force_state(self, manager: FSMManager, cid: str, state: str, reason: str, *, actor: str) -> None:
        manager.force_state(cid, state, reason, actor=actor, user_id=USER)

    def hand_off(self, manager: FSMManager, cid: str, reason: str, *, actor: str) -> None:
        manager.hand_off(cid, reason, actor=actor, user_id=USER)

    def resume_bot(self, manager: FSMManager, cid: str, *, actor: str, state: str | None = None) -> None:
        manager.resume_bot(cid, actor=actor, state=state, user_id=USER)

    def post_operator_message(
        self, manager: FSMManager, cid: str, text: str, *, actor: str, message_id: str | None = None
    ) -> None:
        manager.post_operator_message(cid, text, actor=actor, message_id=message_id, user_id=USER)


class AsyncDriver(Driver):
    """Every call through the manager's ``a``-twin, each in an event loop of its own."""

    name = "async"

    def start(
        self,
        manager: FSMManager,
        fsm_id: str = "",
        initial_context: Mapping[str, Any] | None = None,
        *,
        language: str | None = None,
    ) -> tuple[str, str]:
        return _run(manager.astart_conversation(fsm_id, initial_context, user_id=USER, language=language))

    def send(
        self,
        manager: FSMManager,
        cid: str,
        message: str | list[dict[str, Any]],
        *,
        message_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Sent:
        return _sent(_run(manager.aprocess_turn(cid, message, message_id, user_id=USER, metadata=metadata)))

    def update_context(self, manager: FSMManager, cid: str, updates: Mapping[str, Any]) -> dict[str, Any]:
        return _run(manager.aupdate_context(cid, updates, user_id=USER))

    def end(self, manager: FSMManager, cid: str) -> None:
        _run(manager.aend_conversation(cid, user_id=USER))

    def set_context(
        self, manager: FSMManager, cid: str, updates: Mapping[str, Any], *, actor: str, reason: str | None = None
    ) -> None:
        _run(manager.aset_context(cid, updates, actor=actor, reason=reason, user_id=USER))

    def force_state(self, manager: FSMManager, cid: str, state: str, reason: str, *, actor: str) -> None:
        _run(manager.aforce_state(cid, state, reason, actor=actor, user_id=USER))

    def hand_off(self, manager: FSMManager, cid: str, reason: str, *, actor: str) -> None:
        _run(manager.ahand_off(cid, reason, actor=actor, user_id=USER))

    def resume_bot(self, manager: FSMManager, cid: str, *, actor: str, state: str | None = None) -> None:
        _run(manager.aresume_bot(cid, actor=actor, state=state, user_id=USER))

    def post_operator_message(
        self, manager: FSMManager, cid: str, text: str, *, actor: str, message_id: str | None = None
    ) -> None:
        _run(manager.apost_operator_message(cid, text, actor=actor, message_id=message_id, user_id=USER))


class StreamDriver(AsyncDriver):
    """Turns through ``astream_message``; everything else as ``AsyncDriver``."""

    name = "stream"

    def send(
        self,
        manager: FSMManager,
        cid: str,
        message: str | list[dict[str, Any]],
        *,
        message_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Sent:
        async def collect() -> list[Event]:
            stream = manager.astream_message(cid, message, message_id, user_id=USER, metadata=metadata)
            return [(event.event, dict(event.data)) async for event in stream]

        events = tuple(_run(collect()))
        name, done = events[-1]
        assert name == "done", f"a stream that did not raise ends with done, not {events[-1]}"
        if done.get("duplicate"):  # a repeated message id: the stream says only the reply
            instance = manager.get_instance(cid, user_id=USER)
            return Sent(str(done["reply"]), instance.current_state, instance.ended, instance.mode, None, events)
        return Sent(
            str(done["reply"]), str(done["state"]), bool(done["ended"]), str(done["mode"]), str(done["verdict"]), events
        )


class _CurrentManager:
    """Stands for the manager of the request being made, so one app serves every test on the same definitions."""

    def __init__(self) -> None:
        self.manager: FSMManager | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.manager, name)


_APPS: dict[frozenset[tuple[str, str]], tuple[_CurrentManager, Any]] = {}
"""Apps by what they serve, built once (``create_app`` costs about 0.1 s): each request first points the app's
``_CurrentManager`` at the test's manager. Requests are made one at a time, so one pointer per app is enough."""


def _served_key(sources: Mapping[str, str | FSMDefinition]) -> frozenset[tuple[str, str]]:
    return frozenset(
        (served_id, source if isinstance(source, str) else source.content_hash) for served_id, source in sources.items()
    )


class HttpDriver(Driver):
    """Requests to ``create_app(...)`` over httpx's in-process ASGI transport, as the test's manager.

    The app serves the definitions the test starts conversations of; it is shared by the tests that serve the same
    ones (``_APPS``), each request going to the manager the test passed.
    """

    name = "http"

    def __init__(self) -> None:
        self._sources: dict[int, tuple[FSMManager, dict[str, str | FSMDefinition]]] = {}

    def _app(self, manager: FSMManager) -> Any:
        found = self._sources.get(id(manager))
        if found is None:
            raise AssertionError("start a conversation through the driver before sending to it")
        key = _served_key(found[1])
        if key not in _APPS:
            current = _CurrentManager()
            keys = KeyRing([ApiKey(hash_key(API_KEY), USER, frozenset({"read", "write"}), KEY_NAME)])
            _APPS[key] = (current, create_app(current, found[1], keys=keys, rate_limit_per_minute=0))
        current, app = _APPS[key]
        current.manager = manager
        return app

    def _serve(self, manager: FSMManager, fsm_id: str) -> str:
        """The id the app serves ``fsm_id`` under."""
        source: str | FSMDefinition
        if os.path.isfile(fsm_id):
            served_id, source = Path(fsm_id).stem, fsm_id
        else:  # a name the test's loader answers with a definition object
            definition = manager.fsm_loader(fsm_id)
            served_id, source = definition.name, definition
        _, sources = self._sources.setdefault(id(manager), (manager, {}))
        sources[served_id] = source
        return served_id

    async def _request(
        self, manager: FSMManager, path: str, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> httpx.Response:
        transport = httpx.ASGITransport(app=self._app(manager), raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://runtime-tests") as client:
            # encoded here with ASCII escapes (httpx writes raw UTF-8, which cannot carry a lone surrogate)
            return await client.post(
                path,
                content=json.dumps(dict(body)).encode(),
                headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json", **(headers or {})},
            )

    def _post(self, manager: FSMManager, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        response = _run(self._request(manager, path, body))
        return _json_or_raise(response)

    def start(
        self,
        manager: FSMManager,
        fsm_id: str = "",
        initial_context: Mapping[str, Any] | None = None,
        *,
        language: str | None = None,
    ) -> tuple[str, str]:
        served_id = self._serve(manager, fsm_id)
        body = {"definition": served_id, **({"context": dict(initial_context)} if initial_context else {})}
        if language is not None:
            body["language"] = language
        started = self._post(manager, "/v1/conversations", body)
        return str(started["conversation_id"]), str(started["opening"])

    def send(
        self,
        manager: FSMManager,
        cid: str,
        message: str | list[dict[str, Any]],
        *,
        message_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Sent:
        result = self._post(manager, f"/v1/conversations/{cid}/messages", _message_body(message, message_id, metadata))
        return _sent_from_json(result)

    def update_context(self, manager: FSMManager, cid: str, updates: Mapping[str, Any]) -> dict[str, Any]:
        pytest.skip("the server exposes no application update_context (its operator set_context is tested)")

    def end(self, manager: FSMManager, cid: str) -> None:
        pytest.skip("the server exposes no end_conversation")

    def set_context(
        self, manager: FSMManager, cid: str, updates: Mapping[str, Any], *, actor: str, reason: str | None = None
    ) -> None:
        self._post(
            manager, f"/v1/conversations/{cid}/context", {"updates": dict(updates), "actor": actor, "reason": reason}
        )

    def force_state(self, manager: FSMManager, cid: str, state: str, reason: str, *, actor: str) -> None:
        self._post(manager, f"/v1/conversations/{cid}/state", {"state": state, "reason": reason, "actor": actor})

    def hand_off(self, manager: FSMManager, cid: str, reason: str, *, actor: str) -> None:
        self._post(manager, f"/v1/conversations/{cid}/handoff", {"reason": reason, "actor": actor})

    def resume_bot(self, manager: FSMManager, cid: str, *, actor: str, state: str | None = None) -> None:
        self._post(manager, f"/v1/conversations/{cid}/resume", {"actor": actor, "state": state})

    def post_operator_message(
        self, manager: FSMManager, cid: str, text: str, *, actor: str, message_id: str | None = None
    ) -> None:
        body = {"text": text, "actor": actor, **({"message_id": message_id} if message_id is not None else {})}
        self._post(manager, f"/v1/conversations/{cid}/operator-messages", body)


class SseDriver(HttpDriver):
    """``HttpDriver`` whose turns ask for server-sent events."""

    name = "sse"

    def send(
        self,
        manager: FSMManager,
        cid: str,
        message: str | list[dict[str, Any]],
        *,
        message_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Sent:
        body = _message_body(message, message_id, metadata)
        path = f"/v1/conversations/{cid}/messages"
        response = _run(self._request(manager, path, body, {"Accept": "text/event-stream"}))
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            _json_or_raise(response)  # an error before the first event is an ordinary error answer
            raise HttpFailure(response.status_code, "", response.headers.get("content-type", ""), response.text)
        events = tuple(_sse_events(response.text))
        for name, data in events:
            if name == "error":
                _raise_api_error(int(data.get("status", 500)), data, "text/event-stream")
        if not events or events[-1][0] != "done":
            raise HttpFailure(response.status_code, "", "text/event-stream", f"a stream cut before done: {events}")
        return _sent_from_json(events[-1][1], events)


def _message_body(
    message: str | list[dict[str, Any]], message_id: str | None, metadata: Mapping[str, Any] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message}
    if message_id is not None:
        body["message_id"] = message_id
    if metadata is not None:
        body["metadata"] = dict(metadata)
    return body


def _json_or_raise(response: httpx.Response) -> dict[str, Any]:
    content_type = response.headers.get("content-type", "")
    try:
        body = response.json()
    except ValueError:
        raise HttpFailure(response.status_code, "", content_type, response.text) from None
    if response.is_success and isinstance(body, dict):
        return body
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        raise HttpFailure(response.status_code, "", content_type, response.text)
    _raise_api_error(response.status_code, error, content_type)
    raise AssertionError("unreachable")  # pragma: no cover


def _sent_from_json(result: Mapping[str, Any], events: tuple[Event, ...] = ()) -> Sent:
    verdict = result.get("verdict")
    kind = str(verdict["kind"]) if isinstance(verdict, dict) else None
    return Sent(str(result["reply"]), str(result["state"]), bool(result["ended"]), str(result["mode"]), kind, events)


def _sse_events(text: str) -> list[Event]:
    events: list[Event] = []
    for block in text.strip().split("\n\n") if text.strip() else []:
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def make_driver(name: str) -> Driver:
    drivers: dict[str, type[Driver]] = {
        "sync": Driver,
        "async": AsyncDriver,
        "stream": StreamDriver,
        "http": HttpDriver,
        "sse": SseDriver,
    }
    return drivers[name]()


def drivers_where(*, only: Iterable[str] = DRIVERS, xfail: Mapping[str, str] | None = None) -> Callable[[_F], _F]:
    """Parametrise ``driver`` over ``only``, each driver named in ``xfail`` marked strictly expected to fail
    (with that reason): it fails today, and turns into a failure of the suite (XPASS strict) once fixed."""
    failing = dict(xfail or {})
    unknown = set(failing) - set(only)
    if unknown:
        raise ValueError(f"xfail names drivers not run: {sorted(unknown)}")
    params = [
        pytest.param(
            name, id=name, marks=[pytest.mark.xfail(strict=True, reason=failing[name])] if name in failing else []
        )
        for name in only
    ]
    marker: Callable[[_F], _F] = pytest.mark.parametrize("driver", params, indirect=True)
    return marker


# --- reading back (through the manager, whichever driver wrote) ----------------------------------------------------


def instance_of(manager: FSMManager, cid: str) -> FSMInstance:
    return manager.get_instance(cid, user_id=USER)


def state_of(manager: FSMManager, cid: str) -> str:
    return manager.get_current_state(cid, user_id=USER)


def data_of(manager: FSMManager, cid: str) -> dict[str, Any]:
    return manager.get_conversation_data(cid, user_id=USER)


def usage_of(manager: FSMManager, cid: str) -> Usage:
    return manager.get_usage(cid, user_id=USER)


def last_record(manager: FSMManager, cid: str) -> TurnRecord:
    return manager.explain(cid, user_id=USER)


def trace_of(manager: FSMManager, cid: str) -> list[TraceEvent]:
    return manager.get_trace(cid, user_id=USER)


def said(manager: FSMManager, cid: str) -> list[tuple[str, str]]:
    """The transcript as (role, text)."""
    return [(m["role"], m["text"]) for m in manager.get_conversation_history(cid, user_id=USER)]
