"""One request's attempts at the litellm edge: the messages sent, the reply read, and when to re-ask or give up.

Apart from ``LiteLLMInterface`` because none of it calls litellm: the sync, async and streaming calls all feed the
replies they get to one ``_Exchange``, which decides the same way for each.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.engine._records import LLMRequest, LLMResult
from llm_fsm.engine._reply_schema import CORRECTION_MESSAGE, CORRECTION_STATE, allowed_targets_from_schema
from llm_fsm.errors import MalformedOutputError
from llm_fsm.llm._parsing import parse_llm_output

# the litellm edge's one logger, named as it was before this module was split out of ``_litellm``
logger = logging.getLogger("llm_fsm.llm._litellm")

_SCHEMA_MODES = ("json_schema", "schema_object")
"""Modes in which the reply schema itself reaches the model."""

_ECHO_LIMIT = 2_000  # characters of a bad reply sent back to the model when re-asking


class _Exchange:
    """The messages of one request and its attempts so far; decides when to re-ask and when to give up."""

    def __init__(self, request: LLMRequest, max_retries: int) -> None:
        self.request = request
        self.max_attempts = 1 + max_retries
        self.allowed_targets = allowed_targets_from_schema(request.response_schema)
        # the user's content parts when the message carries images (their text is user_message)
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": request.system_prompt},
            {"role": "user", "content": request.user_content or request.user_message},
        ]
        self.raw_outputs: list[str] = []
        self.problems: list[str] = []
        self.usage: dict[str, int] = {}
        self.started = time.monotonic()

    def accept(self, output: _Output, mode: str) -> LLMResult | None:
        """The result if this output is valid; ``None`` to re-ask; raises when attempts are spent."""
        self.raw_outputs.append(output.text)
        for key, value in output.usage.items():
            self.usage[key] = self.usage.get(key, 0) + value
        try:
            # undeclared proposals go to the engine, which rejects them and records why
            response = parse_llm_output(output.text, self.allowed_targets, strict_targets=False)
        except MalformedOutputError as exc:
            problem = exc.problem
            if output.finish_reason == "length":
                problem = f"the reply was cut off at the length limit ({problem}); keep the message shorter"
        else:
            return LLMResult(
                response=response,
                attempts=len(self.raw_outputs),
                raw_outputs=tuple(self.raw_outputs),
                problems=tuple(self.problems),
                response_format=mode,
                usage=dict(self.usage),
            )
        self.problems.append(problem)
        attempt = len(self.raw_outputs)
        logger.info(
            "invalid model reply (%s, attempt %d of %d): %s",
            self.request.purpose,
            attempt,
            self.max_attempts,
            problem,
        )
        if attempt >= self.max_attempts:
            raise MalformedOutputError(
                f"the model's reply was not valid after {attempt} attempt(s): {problem}",
                raw_outputs=list(self.raw_outputs),
            )
        echoed = output.text if len(output.text) <= _ECHO_LIMIT else output.text[:_ECHO_LIMIT] + "…"
        self.messages.append({"role": "assistant", "content": echoed or "(empty reply)"})
        self.messages.append(
            {"role": "user", "content": correction_message(problem, show_shape=mode not in _SCHEMA_MODES)}
        )
        return None


def correction_message(problem: str, *, show_shape: bool = True) -> str:
    """What the model is told after an invalid reply: the problem, then the shape once more.

    The shape is left out when the call carries the reply schema: the model has
    it already, and small models copy a shown shape's placeholders.
    """
    if not show_shape:
        return f"Your reply was not valid: {problem}. Reply again with only the JSON object of the response schema."
    return (
        f"Your reply was not valid: {problem}. Reply again with only the JSON object, no other text: "
        f'{{"transition": {{"target_state": "{CORRECTION_STATE}", "context_update": {{}}}}, '
        f'"message": "{CORRECTION_MESSAGE}"}}'
    )


@dataclass(frozen=True)
class _Output:
    text: str
    finish_reason: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)


def _output_of(reply: Any) -> _Output:
    """The text of a litellm reply, wherever the provider put it (content, content parts, a tool call)."""
    choices = getattr(reply, "choices", None) or []
    if not choices:
        return _Output(text="")
    choice = choices[0]
    message = getattr(choice, "message", None)
    content: Any = getattr(message, "content", None)
    if isinstance(content, list):  # content parts
        content = "".join(
            part.get("text", "") if isinstance(part, dict) else str(getattr(part, "text", "")) for part in content
        )
    if not content:
        tool_calls = getattr(message, "tool_calls", None) or []
        if tool_calls:
            function = getattr(tool_calls[0], "function", None)
            content = getattr(function, "arguments", None)
    usage: dict[str, int] = {}
    reported = getattr(reply, "usage", None)
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = getattr(reported, key, None)
        if isinstance(value, int):
            usage[key] = value
    cached = getattr(getattr(reported, "prompt_tokens_details", None), "cached_tokens", None)
    if isinstance(cached, int) and cached > 0:
        usage["cached_tokens"] = cached
    return _Output(
        text=content if isinstance(content, str) else "",
        finish_reason=getattr(choice, "finish_reason", None),
        usage=usage,
    )
