"""The one interface the engine's drivers call: a request in, an ``LLMResult`` out, sync and async."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import Literal

from llm_fsm._threads import run_blocking
from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult

ResponseFormatMode = Literal["auto", "json_schema", "json_object", "schema_object", "none"]
"""How structured output is requested.

- ``json_schema``: ``{"type": "json_schema", "json_schema": {...}}`` (OpenAI, Gemini,
  Anthropic via litellm, Ollama ≥ 0.5).
- ``json_object``: plain JSON mode; the schema is only in the prompt.
- ``schema_object``: ``{"type": "json_object", "schema": {...}}``, for llama-cpp-python's server.
- ``none``: no ``response_format``; the prompt alone asks for JSON.
- ``auto``: the best one litellm says the model supports.
"""


_REPLAY_CHUNK = 64
"""Characters per chunk when a whole reply is replayed as a stream."""


class LLMInterface(ABC):
    """What the engine needs from a model: one request in, one parsed reply out.

    Implementers override ``send_request``; they may also override
    ``asend_request`` (the default runs ``send_request`` in a worker thread)
    and ``complete``/``acomplete`` when they can report more than the reply
    (attempts, raw outputs). The engine calls ``complete`` so every
    implementation gets an explain record, however little it knows.
    """

    @abstractmethod
    def send_request(self, request: LLMRequest) -> LLMResponse:
        """The model's parsed reply; raises ``LLMResponseError`` (or a child) when there is none."""

    async def asend_request(self, request: LLMRequest) -> LLMResponse:
        """Async twin; a thread of the library's I/O pool keeps a blocking implementation from stalling the loop.

        Not the loop's default pool: it is small and the host application's (see ``llm_fsm._threads``).
        """
        return await run_blocking(self.send_request, request)

    def complete(self, request: LLMRequest) -> LLMResult:
        """``send_request`` plus how it went; override to report retries."""
        return LLMResult(response=self.send_request(request))

    async def acomplete(self, request: LLMRequest) -> LLMResult:
        return LLMResult(response=await self.asend_request(request))

    async def astream(self, request: LLMRequest) -> AsyncIterator[str | LLMResult]:
        """The raw reply as it arrives (text chunks), then the validated ``LLMResult`` as the last item.

        ``FSMManager.astream_message`` reads the chunks to decide early and stream the message. This
        default cannot stream: it waits for ``acomplete`` and replays its reply, written in schema order,
        in a few chunks. Interfaces whose provider streams override it (``LiteLLMInterface`` does).
        """
        from llm_fsm.llm._streaming import reply_text

        result = await self.acomplete(request)
        text = reply_text(result.response)
        for start in range(0, len(text), _REPLAY_CHUNK):
            yield text[start : start + _REPLAY_CHUNK]
        yield result

    @property
    def reads_images(self) -> bool:
        """True when the interface sends ``request.user_content`` (content parts with images) to a model that
        reads them.

        False by default: an interface that only sends ``user_message`` would drop the images without a word,
        so the manager refuses a message with images (``UnsupportedContentError``) before the turn starts.
        """
        return False

    @property
    def sends_reply_schema(self) -> bool:
        """True when every call hands the model ``request.response_schema`` (structured output).

        The engine then leaves the format example out of the prompt: the model
        reads the shape from the schema. An interface that sends only the
        system prompt keeps the default, and its prompts show the example.
        """
        return False
