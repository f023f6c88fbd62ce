"""What keeps one client from costing the server more than its share: body limits, a rate limit, a last catch.

All three are plain ASGI or plain Python, so they hold for every route, streaming included.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from starlette.exceptions import HTTPException

from llm_fsm.server._errors import ApiError, api_error_for, logger

DEFAULT_MAX_BODY_BYTES = 64 * 1024
"""A message of the manager's 20,000 characters is at most 80 kB of UTF-8; 64 KiB covers any real one
with its JSON around it (a longer message is refused by the manager as message_too_large anyway)."""

Scope = dict[str, Any]
Message = dict[str, Any]


async def send_error(send: Any, error: ApiError) -> None:
    """Answer with the JSON error body (for middleware, which runs outside the framework's handlers)."""
    body = json.dumps(error.body()).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in (error.headers or {}).items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def body_too_large(limit: int) -> ApiError:
    return ApiError(413, "body_too_large", f"the request body is larger than {limit} bytes")


class BodyTooLarge(HTTPException):
    """Raised from inside the route's body read: the framework re-raises HTTP exceptions as they are
    (any other exception there becomes its generic 400), and the app's handler answers with the 413 body."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, body_too_large(limit).message)
        self.limit = limit


class BodyLimitMiddleware:
    """Refuse request bodies over ``max_bytes``: by Content-Length before reading, or while a chunked body arrives.

    A declared length over the limit is answered at once (nothing is read). A body without one is
    counted as it arrives; the chunk that crosses the limit raises ``ApiError`` inside the route's
    body read, which the app's handler answers with the same 413.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await send_error(send, ApiError(400, "invalid_request", "Content-Length is not a number"))
                    return
                if declared > self.max_bytes:
                    await send_error(send, body_too_large(self.max_bytes))
                    return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message: Message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        await self.app(scope, counted, send)


class CatchAllMiddleware:
    """The last line: an exception no handler took becomes a logged 500 with a generic JSON body.

    Starlette's own last handler answers too, but then re-raises to the server; here the
    exception ends with the log line, so a test client and uvicorn alike see only the 500.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:  # the promised no-traceback guarantee
            error = api_error_for(exc)
            if started:  # too late for a status: the client sees a cut response
                logger.error("error after the response started: %s", error.message)
                return
            await send_error(send, error)


class RateLimiter:
    """A token bucket per key: ``per_minute`` requests a minute on average, bursts up to ``burst``.

    In memory, so per worker process: with N workers behind a load balancer a key may make up to
    N times the rate (docs/server.md says so). Buckets of keys idle for long are dropped lazily.
    """

    def __init__(self, per_minute: float, burst: int | None = None, *, clock: Any = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(burst if burst is not None else max(1, int(per_minute)))
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key → (tokens, last refill time)
        self._guard = threading.Lock()

    def take(self, key: str) -> float:
        """Spend one token for ``key``: 0.0 when allowed, else the seconds until one is available."""
        now = self.clock()
        with self._guard:
            tokens, last = self._buckets.get(key, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                self._prune(now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate if self.rate > 0 else 60.0

    def _prune(self, now: float) -> None:
        if len(self._buckets) > 10_000:  # full buckets carry no state worth keeping
            refill = self.capacity / self.rate if self.rate > 0 else float("inf")
            for key, (_, last) in list(self._buckets.items()):
                if now - last > refill:
                    del self._buckets[key]


__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "BodyLimitMiddleware",
    "BodyTooLarge",
    "Message",
    "Scope",
    "body_too_large",
    "CatchAllMiddleware",
    "RateLimiter",
    "send_error",
]
