"""litellm itself at our edge: imported quietly on first use, and its exceptions read as ours.

Apart from ``LiteLLMInterface`` because telling a provider's failures apart (credentials, an unknown model, a refused
``response_format``, a rate limit) is a table of litellm's exception types and phrases, not part of calling it.
"""

from __future__ import annotations

import os
from typing import Any

from llm_fsm.errors import FSMError, LLMConfigurationError, LLMProviderError


def _litellm() -> Any:
    """Import litellm on first use and quieten it; it must not print into our users' terminals.

    litellm fetches its model price list from the network at import unless told
    to use the copy it ships; offline machines then wait for retries. We use the
    shipped copy unless the user chose otherwise.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:  # pragma: no cover - litellm is a declared dependency
        raise LLMConfigurationError("litellm is not installed; install it with `pip install litellm`") from exc
    litellm.suppress_debug_info = True
    return litellm


def provider_error(exc: Exception, model: str, detail: str, raw_outputs: list[str]) -> FSMError:
    """A provider failure as one of our errors, with a message a person can act on.

    ``detail`` is the provider's message with the caller's secrets already masked.
    """
    name = type(exc).__name__
    lowered = detail.lower()
    errors = _litellm_exceptions()

    def is_a(*names: str) -> bool:
        return _is_a(exc, errors, *names)

    if is_a("AuthenticationError", "PermissionDeniedError"):
        return LLMConfigurationError(
            f"{model}: the provider refused the credentials ({name}). Check the api_key "
            f"you passed or the provider's environment variable. Provider said: {detail}"
        )
    if is_a("LiteLLMUnknownProvider") or "llm provider not provided" in lowered:
        return LLMConfigurationError(
            f"{model}: litellm does not know which provider serves this model. Prefix it "
            "with the provider, e.g. 'openai/...', 'anthropic/...', 'ollama/...'."
        )
    if is_a("NotFoundError"):
        return LLMConfigurationError(
            f"{model}: the provider does not know this model ({name}). Provider said: {detail}"
        )
    if _looks_like_missing_key(lowered):
        return LLMConfigurationError(
            f"{model}: no API key. Pass api_key=... or set the provider's environment "
            f"variable (e.g. OPENAI_API_KEY, ANTHROPIC_API_KEY). Provider said: {detail}"
        )
    if is_a("ContextWindowExceededError"):
        message = f"{model}: the prompt is longer than the model's context window"
        retryable = False
    elif is_a("ContentPolicyViolationError"):
        message = f"{model}: the provider refused the content (content policy)"
        retryable = False
    elif is_a("RateLimitError"):
        message = f"{model}: rate limited by the provider; try again later"
        retryable = True
    elif is_a("Timeout") or isinstance(exc, TimeoutError):
        message = f"{model}: the provider did not answer in time"
        retryable = True
    elif is_a("APIConnectionError") or isinstance(exc, ConnectionError):
        message = f"{model}: could not reach the provider (check api_base and the network)"
        retryable = True
    elif is_a("ServiceUnavailableError", "InternalServerError", "BadGatewayError"):
        message = f"{model}: the provider failed ({name}); try again later"
        retryable = True
    else:
        message = f"{model}: the provider call failed ({name})"
        retryable = False
    return LLMProviderError(
        f"{message}. Provider said: {detail}" if detail else message,
        provider_error=name,
        retryable=retryable,
        raw_outputs=list(raw_outputs),
    )


def is_connection_error(exc: Exception) -> bool:
    """Whether the provider could not be reached at all (a local model's server may have stopped)."""
    return _is_a(exc, _litellm_exceptions(), "APIConnectionError") or isinstance(exc, ConnectionError)


def _is_a(exc: Exception, errors: Any, *names: str) -> bool:
    return any(isinstance(exc, cls) for cls in (getattr(errors, n, None) for n in names) if cls)


def _litellm_exceptions() -> Any:
    return _litellm().exceptions


_SHAPE_ERRORS = (
    "BadRequestError",
    "UnsupportedParamsError",
    "UnprocessableEntityError",
    "InternalServerError",
)

_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "grammar")


def _rejects_request_shape(exc: Exception) -> bool:
    """Did the provider refuse our ``response_format`` (as opposed to credentials, size or content)?

    Only errors that name the format count, so an unrelated bad request is
    reported at once instead of silently weakening structured output. Some
    servers answer an unsupported format with a 500, so server errors count too.
    """
    errors = _litellm_exceptions()
    not_shape = tuple(
        cls
        for cls in (
            getattr(errors, n, None)
            for n in ("ContextWindowExceededError", "ContentPolicyViolationError", "LiteLLMUnknownProvider")
        )
        if cls
    )
    if not_shape and isinstance(exc, not_shape):
        return False
    text = str(exc).lower()
    if _looks_like_missing_key(text) or "llm provider not provided" in text:
        return False
    if not any(word in text for word in _FORMAT_WORDS):
        return False
    return _is_a(exc, errors, *_SHAPE_ERRORS)


def _looks_like_missing_key(lowered: str) -> bool:
    return any(
        phrase in lowered
        for phrase in (
            "missing credentials",
            "api_key client option must be set",
            "no api key",
            "api key not found",
            "missing api key",
            "api_key is required",
        )
    )
