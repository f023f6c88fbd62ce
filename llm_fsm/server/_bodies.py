"""Request bodies are JSON, whatever their ``Content-Type`` says, and one that cannot be read is one documented error.

curl's ``-d`` declares ``application/x-www-form-urlencoded``, and a first request typed by hand often
declares nothing or ``text/plain``: the body is still the JSON the user wrote, and every route of this
API takes JSON only, so the body is read as JSON. What cannot be read answers 422 ``malformed_json``
with one of three reasons in ``details.reason``, the same on every route:

- ``not_utf8``: JSON between systems is UTF-8 (RFC 8259 §8.1); a UTF-16 or UTF-32 body is refused
  rather than guessed at, as Python's ``json.loads`` of bytes would (a UTF-8 byte order mark is
  ignored, as the RFC allows);
- ``too_deep``: nested deeper than ``MAX_JSON_DEPTH`` (RFC 8259 §9 lets a parser set the limit);
- ``syntax``: not JSON at all, with where it stopped parsing and the declared type.

The check is a plain ASGI middleware inside the body limit, so the framework only ever sees a body
declared ``application/json`` that is valid JSON.
"""

from __future__ import annotations

import json
from typing import Any

from llm_fsm.server._errors import ApiError
from llm_fsm.server._limits import BodyTooLarge, Message, Scope, body_too_large, send_error

MAX_JSON_DEPTH = 64
"""Arrays and objects nested in a body, counting the body's own; the engine keeps values to 32 levels anyway."""

_BOM = b"\xef\xbb\xbf"
_WITHOUT_BODY = frozenset({"GET", "HEAD", "OPTIONS"})


def malformed(reason: str, message: str) -> ApiError:
    return ApiError(422, "malformed_json", f"the request body is not valid JSON: {message}", details={"reason": reason})


def check_json(body: bytes, content_type: str | None) -> None:
    """Raise the ``malformed_json`` error for a body that is not JSON the framework can read as it is."""
    if body.startswith(_BOM):
        body = body[len(_BOM) :]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise malformed("not_utf8", "it is not UTF-8, which JSON over HTTP is (RFC 8259 §8.1)") from None
    if "\x00" in text[:4]:  # never in JSON text; UTF-16 and UTF-32 of ASCII put one in the first four bytes
        raise malformed("not_utf8", "it looks like UTF-16 or UTF-32; JSON over HTTP is UTF-8 (RFC 8259 §8.1)")
    try:
        document = json.loads(text)
    except RecursionError:
        raise _too_deep() from None
    except ValueError as exc:
        declared = f" (sent as Content-Type: {content_type})" if content_type else ""
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise malformed("syntax", f"{where or 'not JSON'}{declared}") from None
    if _deeper_than(document, MAX_JSON_DEPTH):
        raise _too_deep()


def _too_deep() -> ApiError:
    return malformed("too_deep", f"arrays and objects are nested more than {MAX_JSON_DEPTH} levels deep")


def _deeper_than(document: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels (walked without recursion)."""
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class JsonBodyMiddleware:
    """Read a request's whole body (the body limit around it counts it), check it is JSON, hand it on as JSON.

    Requests without a body, and GET, HEAD and OPTIONS, pass untouched.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") in _WITHOUT_BODY:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        try:
            while True:
                message: Message = await receive()
                if message["type"] != "http.request":  # the client went away before the body was whole
                    return
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
        except BodyTooLarge as exc:
            await send_error(send, body_too_large(exc.limit))
            return
        body = b"".join(chunks)
        if body:
            headers = [(name, value) for name, value in scope.get("headers", []) if name != b"content-type"]
            declared = next((v.decode("latin-1") for n, v in scope.get("headers", []) if n == b"content-type"), None)
            try:
                check_json(body, declared)
            except ApiError as error:
                await send_error(send, error)
                return
            headers.append((b"content-type", b"application/json"))
            scope = {**scope, "headers": headers}
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:  # after the body: what the client does next (a disconnect, for a streamed answer)
                later: Message = await receive()
                return later
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


__all__ = ["MAX_JSON_DEPTH", "JsonBodyMiddleware", "check_json"]
