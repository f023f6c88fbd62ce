"""Turns on the server: each runs to its end in a task of its own, and a streamed one is sent as server-sent events.

A client that goes away (or a streaming response that is cut) does not cancel a turn half way,
so it is saved whole (or, if it fails, not at all) and the next message finds the conversation
consistent. Operator changes run the same way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi.responses import JSONResponse, Response, StreamingResponse

from llm_fsm.server._errors import api_error_for, logger
from llm_fsm.server._models import TurnResult
from llm_fsm.server._protocol import ManagerProtocol, Message

_T = TypeVar("_T")


class TurnRunner:
    """Runs turns in tasks of their own, so that a cancelled request never cuts a turn in the middle."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coroutine: Awaitable[_T]) -> asyncio.Task[_T]:
        task: asyncio.Task[_T] = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # retrieved here, so a turn whose client went away does not fail as "never retrieved"
            logger.debug("turn task ended with %s", type(task.exception()).__name__)

    async def run(self, coroutine: Awaitable[_T]) -> _T:
        """Await the turn; if the awaiting request is cancelled, the turn goes on and lands by itself."""
        return await asyncio.shield(self.spawn(coroutine))

    async def drain(self, timeout: float) -> None:
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=timeout)


@dataclass(frozen=True)
class StreamEvent:
    """One server-sent event: the manager's ``token``, ``state`` and ``done``, or our ``error``."""

    event: str
    data: dict[str, Any]

    def encode(self) -> bytes:
        # JSON never holds a raw newline (they are escaped), so one data: line carries the whole object
        return f"event: {self.event}\ndata: {json.dumps(self.data, ensure_ascii=False)}\n\n".encode()


def with_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """``metadata`` as a keyword only when the client sent some: a manager-like object written before messages had
    metadata keeps working for every other request."""
    return {} if metadata is None else {"metadata": metadata}


async def turn_result(
    manager: ManagerProtocol, conversation_id: str, message_id: str, reply: str, tenant: str, *, duplicate: bool
) -> TurnResult:
    """The turn's reply with where it left the conversation: the turn record kept under its message id."""
    instance = await manager.aget_instance(conversation_id, user_id=tenant)
    record = next((r for r in reversed(instance.turns) if r.message_id == message_id), None)
    return TurnResult(
        conversation_id=conversation_id,
        message_id=message_id,
        reply=reply,
        state=record.state_after if record is not None else instance.current_state,
        ended=instance.ended,
        verdict=record.verdict if record is not None else None,
        mode=instance.mode,
        duplicate=duplicate,
    )


async def _events(
    manager: ManagerProtocol,
    conversation_id: str,
    message: Message,
    message_id: str,
    tenant: str,
    metadata: Mapping[str, Any] | None = None,
) -> AsyncIterator[StreamEvent]:
    """The manager's stream of the turn (``FSMManager.astream_message``), its ``done`` completed.

    ``done`` carries the same object as the JSON endpoint (the full verdict, the message id, ``duplicate``),
    whatever the stream's own ``done`` holds (a duplicate ``message_id`` there says only ``reply``).
    """
    text: list[str] = []
    replayed: TurnResult | None = None
    async for event in manager.astream_message(
        conversation_id, message, message_id=message_id, user_id=tenant, **with_metadata(metadata)
    ):
        name, data = str(event.event), dict(event.data)
        if name == "token":
            text.append(str(data.get("text", "")))
        elif name == "retract":  # the attempt streamed so far lost its save: its text is not the reply
            text.clear()
        elif name == "state" and data.get("verdict") == "duplicate":
            # answered before: the state event says what the first delivery's said, from the turn's stored record
            replayed = await turn_result(manager, conversation_id, message_id, "", tenant, duplicate=True)
            kind = replayed.verdict.kind if replayed.verdict is not None else "duplicate"
            data = {"state": replayed.state, "verdict": kind, "ended": replayed.ended}
        elif name == "done":
            reply = str(data.get("reply", "".join(text)))
            duplicate = bool(data.get("duplicate", False))
            if replayed is not None:
                result = replayed.model_copy(update={"reply": reply})
            else:
                result = await turn_result(manager, conversation_id, message_id, reply, tenant, duplicate=duplicate)
            data = {**data, **result.model_dump(mode="json")}
        yield StreamEvent(name, data)


async def stream_response(
    manager: ManagerProtocol,
    runner: TurnRunner,
    conversation_id: str,
    message: Message,
    message_id: str,
    tenant: str,
    metadata: Mapping[str, Any] | None = None,
) -> Response:
    """Server-sent events of one turn; an error before the first event is an ordinary JSON error response.

    The turn runs in a task of its own that puts events on a queue: a client that disconnects
    cancels only the reading side, and the turn goes on to be saved whole.
    """
    queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()  # unbounded: the producer never waits on a reader

    async def produce() -> None:
        try:
            async for event in _events(manager, conversation_id, message, message_id, tenant, metadata):
                await queue.put(event)
        except Exception as exc:  # noqa: BLE001 - every failure becomes an error event
            error = api_error_for(exc, conversation_id=conversation_id)
            await queue.put(StreamEvent("error", error.body()["error"]))
        finally:
            await queue.put(None)

    runner.spawn(produce())
    first = await queue.get()
    if first is not None and first.event == "error" and "status" in first.data:
        status = int(first.data["status"])
        headers = {"Retry-After": "1"} if status == 503 else None
        return JSONResponse({"error": first.data}, status_code=status, headers=headers)

    async def body() -> AsyncIterator[bytes]:
        event = first
        while event is not None:
            yield event.encode()
            event = await queue.get()

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


__all__ = ["StreamEvent", "TurnRunner", "stream_response", "turn_result", "with_metadata"]
