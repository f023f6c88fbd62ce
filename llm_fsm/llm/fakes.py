"""Stand-in models for testing FSMs without a provider, a key or a network.

``ScriptedLLM`` answers from a list, in order, and remembers what it was
asked, so a test can drive a conversation turn by turn and then check the
prompts the engine built (and, in ``received_parts``, the images it was sent:
both fakes read images unless built with ``reads_images=False``); its replies take the same forms as a conversation
script's ``model:`` answers (``script_reply``). ``FunctionLLM`` computes each
reply from the request, for behaviour that depends on the prompt; what its
function returns is read as a model's output (text is parsed). Both parse
replies with the same rules as a real model, so a malformed reply fails the
same way.
"""

from __future__ import annotations

import inspect
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult
from llm_fsm.engine._reply_schema import allowed_targets_from_schema
from llm_fsm.errors import LLMScriptExhaustedError, MalformedOutputError
from llm_fsm.llm._interface import LLMInterface
from llm_fsm.llm._parsing import parse_llm_output, response_from_object

Reply = LLMResponse | dict[str, Any] | str | BaseException
"""A scripted reply, in the forms of a conversation script's ``model:`` (see ``script_reply``),
an ``LLMResponse``, or an exception to raise."""

_TRANSITION_KEYS = ("transition", "target_state")


def script_reply(reply: Mapping[str, Any] | str) -> dict[str, Any] | str:
    """A scripted answer in the script forms → what a model would have returned.

    The one place these forms are defined; ``ScriptedLLM`` and the ``model:``
    answers of conversation scripts (``llm_fsm.scripting``) both go through it:

    * ``"text"``: stay, and say this;
    * ``{"raw": "text"}``: the model's output verbatim, parsed like a real
      model's (to test malformed answers);
    * a reply object without ``transition`` or ``target_state`` (``{"intent":
      "confirm", "message": …}``): stay, with the rest as given;
    * any other reply object, flat (``{target_state, context_update, message}``)
      or full (``{transition: {…}, message}``): as given.

    Returns a reply object, or raw text for ``to_response`` to parse.
    """
    if isinstance(reply, str):
        return {"transition": {"target_state": None, "context_update": {}}, "message": reply}
    if set(reply) == {"raw"}:
        raw = reply["raw"]
        if not isinstance(raw, str):
            raise TypeError(f"raw takes the model's output as text, got {type(raw).__name__}")
        return raw
    if not any(key in reply for key in _TRANSITION_KEYS):
        return {"target_state": None, **reply}  # the flat form: stay, keeping any context_update given
    return dict(reply)


def to_response(reply: Any, request: LLMRequest | None = None) -> LLMResponse:
    """Turn a reply object or raw model text into an ``LLMResponse`` exactly as the real edge would."""
    allowed = allowed_targets_from_schema(request.response_schema) if request is not None else None
    if isinstance(reply, LLMResponse):
        return reply
    if isinstance(reply, dict):
        try:
            return response_from_object(reply, allowed, strict_targets=False)
        except MalformedOutputError as exc:
            exc.raw_outputs = [repr(reply)]
            raise
    if isinstance(reply, str):
        return parse_llm_output(reply, allowed, strict_targets=False)
    raise TypeError(
        f"a scripted reply must be an LLMResponse, a dict, a string or an exception; got {type(reply).__name__}"
    )


class ScriptedLLM(LLMInterface):
    """Replies from a script, in order; records every request in ``requests``.

    Every model call consumes the next reply: the opening of a conversation
    (``start_conversation`` makes one), each turn, the engine's second
    "regenerate" call when its verdict differs from the proposal, and each
    re-ask. So a conversation of two turns with one refused proposal needs four
    replies.

    Replies take the forms of a conversation script's ``model:`` (``script_reply``):
    a plain string means "stay, and say this"; ``{"raw": text}`` is model output
    parsed as a real model's (to test malformed answers); a reply object without
    a transition (``{"intent": "confirm", "message": …}``) stays; flat and full
    reply objects are parsed with the real model's rules. An ``LLMResponse`` is
    used as is, and an exception is raised when its turn comes (a provider
    failure).

    With ``max_retries`` > 0 a reply that fails to parse consumes the next
    scripted reply as the answer to the re-ask, like ``LiteLLMInterface`` does,
    so tests can exercise recovery and the attempt counts in explain records.
    """

    def __init__(self, replies: Iterable[Reply], *, max_retries: int = 0, reads_images: bool = True) -> None:
        self._replies: deque[Reply] = deque(replies)
        self.max_retries = max_retries
        self.requests: list[LLMRequest] = []
        self._reads_images = reads_images
        self._lock = threading.Lock()

    @property
    def reads_images(self) -> bool:
        """Whether the fake stands for a model that reads images (``reads_images=False``: a text-only one)."""
        return self._reads_images

    @property
    def received_parts(self) -> list[list[dict[str, Any]] | None]:
        """The content parts each request carried (``request.user_content``; None for text), in order."""
        return [request.user_content for request in self.requests]

    def __repr__(self) -> str:
        return f"ScriptedLLM(remaining={self.remaining}, requests={len(self.requests)})"

    @property
    def remaining(self) -> int:
        """Replies not yet used; a finished test can assert this is 0."""
        return len(self._replies)

    def send_request(self, request: LLMRequest) -> LLMResponse:
        return self.complete(request).response

    async def asend_request(self, request: LLMRequest) -> LLMResponse:
        return self.complete(request).response

    async def acomplete(self, request: LLMRequest) -> LLMResult:
        return self.complete(request)

    def complete(self, request: LLMRequest) -> LLMResult:
        with self._lock:
            self.requests.append(request)
            raw_outputs: list[str] = []
            problems: list[str] = []
            while True:
                reply = self._next(len(self.requests))
                if isinstance(reply, BaseException):
                    raise reply
                answer = script_reply(reply) if isinstance(reply, (str, Mapping)) else reply
                raw_outputs.append(answer if isinstance(answer, str) else repr(answer))
                try:
                    response = to_response(answer, request)
                except MalformedOutputError as exc:
                    problems.append(exc.problem)
                    if len(raw_outputs) > self.max_retries:
                        exc.raw_outputs = list(raw_outputs)
                        raise
                    continue
                return LLMResult(
                    response=response,
                    attempts=len(raw_outputs),
                    raw_outputs=tuple(raw_outputs),
                    problems=tuple(problems),
                    response_format="scripted",
                )

    def _next(self, request_number: int) -> Reply:
        if not self._replies:
            raise LLMScriptExhaustedError(
                f"ScriptedLLM ran out of replies at request {request_number}; "
                "the script needs one reply per model call (openings, regenerate calls and re-asks included)"
            )
        return self._replies.popleft()


class FunctionLLM(LLMInterface):
    """Replies computed by ``fn(request)``, which returns an ``LLMResponse``, a dict or raw text.

    ``fn`` may be ``async``; the async calls then await it without a thread.
    Requests are recorded in ``requests`` as with ``ScriptedLLM``.
    """

    def __init__(self, fn: Callable[[LLMRequest], Any], *, reads_images: bool = True) -> None:
        self.fn = fn
        self.requests: list[LLMRequest] = []
        self._reads_images = reads_images
        self._lock = threading.Lock()

    @property
    def reads_images(self) -> bool:
        """Whether the fake stands for a model that reads images (``reads_images=False``: a text-only one)."""
        return self._reads_images

    @property
    def received_parts(self) -> list[list[dict[str, Any]] | None]:
        """The content parts each request carried (``request.user_content``; None for text), in order."""
        return [request.user_content for request in self.requests]

    def __repr__(self) -> str:
        return f"FunctionLLM({getattr(self.fn, '__qualname__', repr(self.fn))})"

    def send_request(self, request: LLMRequest) -> LLMResponse:
        with self._lock:
            self.requests.append(request)
        reply = self.fn(request)
        if inspect.isawaitable(reply):
            close = getattr(reply, "close", None)
            if close is not None:
                close()  # never awaited: close it so Python does not warn
            raise TypeError("FunctionLLM: an async function can only be used through asend_request/acomplete")
        return to_response(reply, request)

    async def asend_request(self, request: LLMRequest) -> LLMResponse:
        with self._lock:
            self.requests.append(request)
        reply = self.fn(request)
        if inspect.isawaitable(reply):
            reply = await reply
        return to_response(reply, request)


__all__ = ["FunctionLLM", "Reply", "ScriptedLLM", "script_reply", "to_response"]
