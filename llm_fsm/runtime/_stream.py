"""Driving a turn while its reply streams, so that no text of a refused move ever reaches the user.

The turn is the engine's ordinary generator (``run_turn``); only the driver differs. It reads the
turn call's stream until the decision part is complete (``llm._streaming.StreamedReply``), hands the
engine a result whose message is still arriving, and lets it decide. If the engine keeps the reply
(``AwaitMessage``), the message's characters are streamed as they come; if it regenerates, the first
stream is dropped unread and the regenerated message is streamed instead. A model that writes the
message before the decision, or an interface that cannot stream, gives the same events after the
whole reply.

The turn runs in a task of its own: a consumer that goes away (a client disconnecting) does not cut
it short, so it is saved whole or, when it fails, not at all.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from llm_fsm.engine._records import LLMRequest, LLMResult
from llm_fsm.engine._reply_schema import allowed_targets_from_schema
from llm_fsm.engine._turn import Decided
from llm_fsm.errors import LLMResponseError, MalformedOutputError
from llm_fsm.llm._parsing import parse_llm_output
from llm_fsm.llm._streaming import StreamedReply
from llm_fsm.runtime._drivers import Operation, arun, await_wait
from llm_fsm.runtime._effects import ReadModel, ReadRest, Retract, Tell, Wait
from llm_fsm.runtime._performer import Performer

logger = logging.getLogger(__name__)

_R = TypeVar("_R")

RETRACTED = (
    "another worker or an operator changed the conversation while this reply was written: discard what was "
    "streamed since the last retract; the turn runs again on the new version"
)


@dataclass(frozen=True)
class StreamEvent:
    """One event of a streamed turn.

    ``token``: ``{"text": ...}``, the next characters of the reply; ``state``: ``{"state", "verdict",
    "ended"}`` once the turn has decided (``verdict`` is the verdict's kind, or ``"duplicate"`` for a
    ``message_id`` answered before); ``retract``: ``{"reason"}`` when the attempt streamed so far lost its
    save to another change (the ``state`` and ``token`` events before it no longer hold; the turn's events
    follow again); ``done``: ``{"reply", "state", "ended", "verdict", "mode"}`` when the
    turn is saved (``{"reply", "duplicate": true}`` for a ``message_id`` answered before). A turn that
    fails raises its typed error from the iterator instead (a server sends it as an ``error`` event).
    """

    event: str
    data: dict[str, Any] = field(default_factory=dict)

    def sse(self) -> str:
        """The event as a server-sent event frame."""
        return f"event: {self.event}\ndata: {json.dumps(self.data, ensure_ascii=False)}\n\n"


@dataclass
class _Pending:
    """A turn call whose decision is known and whose message is still arriving."""

    items: AsyncIterator[str | LLMResult]
    reply: StreamedReply
    final: LLMResult | None = None


class _StreamingDriver:
    """The async driver with one difference: it reads the model's stream (see the module docstring)."""

    def __init__(self, emit: Callable[[StreamEvent], None]) -> None:
        self.emit = emit
        self.pending: _Pending | None = None
        self.streamed = False
        self.decided: Decided | None = None

    async def drive(self, performer: Performer, operation: Operation[_R]) -> _R:
        try:
            return await arun(performer, operation, self._wait)
        finally:
            await self._drop_pending()

    async def _wait(self, wait: Wait) -> Any:
        if isinstance(wait, ReadModel) and wait.request is not None:
            await self._drop_pending()  # a regenerated reply: the first one is never shown
            purpose = wait.request.purpose
            if wait.stream is not None and purpose == "turn":
                return await self._turn_call(wait.stream, wait.request)
            if purpose == "regenerate":
                return await self._streamed_call(wait)
        if isinstance(wait, Tell):
            self.decided = wait.decided
            decided = wait.decided
            self.emit(
                StreamEvent("state", {"state": decided.state, "verdict": decided.verdict, "ended": decided.ended})
            )
            return None
        if isinstance(wait, ReadRest):
            return await self._finish_pending()
        if isinstance(wait, Retract):
            await self._drop_pending()
            if self.decided is not None or self.streamed:
                self.emit(StreamEvent("retract", {"reason": RETRACTED}))
            self.decided, self.streamed = None, False
            return None
        return await await_wait(wait)

    # --- the turn call: decide early --------------------------------------------------------

    async def _turn_call(self, stream: Callable[[], AsyncIterator[Any]], request: LLMRequest) -> LLMResult:
        items: AsyncIterator[str | LLMResult] = stream().__aiter__()
        reply = StreamedReply()
        async for item in items:
            if isinstance(item, LLMResult):
                return item
            reply.feed(item)
            if reply.decision is not None:
                early = _early_response(reply.decision, request)
                if early is not None:
                    self.pending = _Pending(items, reply)
                    return LLMResult(response=early, message_pending=True)
                reply.decision = None  # not a valid decision: wait for the whole reply
        raise LLMResponseError("the model's stream ended without a reply")

    async def _finish_pending(self) -> tuple[str, LLMResult | None]:
        """Stream the rest of the kept reply's message; return it whole, with the call's final result (its
        usage and price, which only the end of the stream reports)."""
        pending = self.pending
        if pending is None:  # pragma: no cover - the engine asks only after a pending result
            raise LLMResponseError("no streamed reply is pending")
        self._send(pending.reply.take_message())
        try:
            async for item in pending.items:
                if isinstance(item, LLMResult):
                    pending.final = item
                    break
                pending.reply.feed(item)
                self._send(pending.reply.take_message())
        finally:
            self.pending = None
        streamed = pending.reply.message
        final = pending.final.response.message if pending.final is not None else None
        if final is not None and final.startswith(streamed) and len(final) > len(streamed):
            self._send(final[len(streamed) :])  # what validation kept beyond the streamed text (rare)
            return final, pending.final
        if not streamed.strip():
            if final:
                self._send(final)
                return final, pending.final
            raise LLMResponseError("the model's streamed reply had no message")
        return streamed, pending.final

    async def _drop_pending(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            close = getattr(pending.items, "aclose", None)
            if callable(close):
                try:
                    await close()
                except Exception:  # noqa: BLE001 - closing a dropped stream must not fail the turn
                    logger.debug("closing a dropped model stream failed", exc_info=True)

    # --- a regenerated reply: stream its message ---------------------------------------------

    async def _streamed_call(self, wait: ReadModel) -> Any:
        if wait.stream is None:
            result = await await_wait(wait)
            message = getattr(getattr(result, "response", None), "message", None)
            self._send(message if isinstance(message, str) else "")
            return result
        reply = StreamedReply()
        async for item in wait.stream():
            if isinstance(item, LLMResult):
                rest = item.response.message
                shown = reply.message
                self._send(rest[len(shown) :] if rest.startswith(shown) else ("" if shown else rest))
                return item
            reply.feed(item)
            self._send(reply.take_message())
        raise LLMResponseError("the model's stream ended without a reply")

    def _send(self, text: str) -> None:
        if text:
            self.streamed = True
            self.emit(StreamEvent("token", {"text": text}))


def _early_response(decision: dict[str, Any], request: LLMRequest) -> Any:
    """The decision part as a reply the engine can decide on (the message still to come), or None."""
    try:
        return parse_llm_output(
            json.dumps({**decision, "message": "..."}),
            allowed_targets_from_schema(request.response_schema),
            strict_targets=False,
        )
    except (MalformedOutputError, TypeError, ValueError):
        return None


async def stream_turn(
    performer: Performer,
    operation: Operation[Any],
    scope: Callable[[], AbstractAsyncContextManager[Callable[[Any], None]]],
    background: set[asyncio.Future[None]],
) -> AsyncIterator[StreamEvent]:
    """Run the turn in its own task and yield its events; a typed error is raised after the events before it.

    ``scope`` is what every turn runs inside (the conversation's lock, the loop's turn slot, the turn's span); it
    gives the function that closes the span with the outcome.
    """
    queue: asyncio.Queue[StreamEvent | BaseException | None] = asyncio.Queue()
    driver = _StreamingDriver(queue.put_nowait)

    async def run() -> None:
        try:
            async with scope() as finished:
                outcome = await driver.drive(performer, operation)
                finished(outcome)
            reply = outcome.reply
            if not driver.streamed:
                driver._send(reply)  # answered before (a duplicate message id), or no streaming was possible
            decided = driver.decided
            done: dict[str, Any] = {"reply": reply}
            if decided is not None and outcome.record is not None:
                done.update(state=decided.state, verdict=decided.verdict, ended=decided.ended, mode=outcome.mode)
            else:  # answered before: its state event said "duplicate"
                done["duplicate"] = True
            queue.put_nowait(StreamEvent("done", done))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, who raises it
            queue.put_nowait(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            queue.put_nowait(None)

    task = asyncio.ensure_future(run())
    background.add(task)
    task.add_done_callback(background.discard)
    while True:
        item = await queue.get()
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


__all__ = ["StreamEvent", "stream_turn"]
