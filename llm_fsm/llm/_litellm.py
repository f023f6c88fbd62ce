"""The litellm edge: provider calls, structured-output modes with downgrade, re-asks on malformed replies, local models.

litellm is imported on first use, never at package import. One request's attempts (what is sent, re-asking a
malformed reply) are in ``_litellm_exchange``; importing litellm and reading its exceptions as ours in
``_litellm_errors``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, get_args

from llm_fsm._threads import run_blocking
from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult
from llm_fsm.engine._reply_schema import closed_schema
from llm_fsm.errors import FSMError, LLMConfigurationError, UnsupportedContentError
from llm_fsm.llm._interface import LLMInterface, ResponseFormatMode
from llm_fsm.llm._litellm_errors import _litellm, _rejects_request_shape, is_connection_error, provider_error
from llm_fsm.llm._litellm_exchange import _SCHEMA_MODES, _Exchange, _Output, _output_of
from llm_fsm.llm._litellm_exchange import correction_message as correction_message  # its import path before the split

logger = logging.getLogger(__name__)

_MODES: tuple[str, ...] = get_args(ResponseFormatMode)

_DOWNGRADE = {"json_schema": "json_object", "schema_object": "json_object", "json_object": "none"}


class _Secret:
    """A value that never shows itself in repr, str, logs or ``vars()`` dumps."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "'***'"

    __str__ = __repr__


class LiteLLMInterface(LLMInterface):
    """Any litellm-supported model, with structured output, re-asking and typed errors.

    ``kwargs`` go to ``litellm.completion`` on every call (``temperature``,
    ``max_tokens``, ``api_base``, ``timeout``, ``num_retries`` for provider-level
    retries, ``mock_response`` for tests ...). A ``response_format`` in kwargs
    replaces ours. ``max_retries`` counts extra attempts after a malformed reply.

    ``vision``: whether the model reads images. None (the default) asks litellm's bundled model list
    (``litellm.supports_vision``, offline); a model it does not know, and the ``local`` models (none of the
    catalogue reads images), count as text-only. Pass True for a model litellm does not know that does.
    """

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        enable_json_validation: bool = True,
        max_retries: int = 2,
        *,
        response_format_mode: ResponseFormatMode = "auto",
        vision: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise LLMConfigurationError(
                "a model name is required, e.g. 'gpt-4o-mini', 'anthropic/claude-3-5-haiku-latest' or 'ollama/llama3.2'"
            )
        if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
            raise LLMConfigurationError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if response_format_mode not in _MODES:
            raise LLMConfigurationError(
                f"response_format_mode must be one of {', '.join(_MODES)}; got {response_format_mode!r}"
            )
        if api_key is not None and not isinstance(api_key, str):
            raise LLMConfigurationError("api_key must be a string")
        if vision is not None and not isinstance(vision, bool):
            raise LLMConfigurationError(f"vision must be True, False or None (ask litellm), got {vision!r}")
        self.model = model.strip()
        self._api_key = _Secret(api_key) if api_key else None
        self.enable_json_validation = enable_json_validation
        self.max_retries = max_retries
        self.response_format_mode: ResponseFormatMode = response_format_mode
        self._kwargs = dict(kwargs)
        self.vision = vision
        self._vision_found: bool | None = None  # litellm's answer, asked once
        self._auto_mode: str | None = None  # detected once, lowered if the provider rejects it
        self._route: _Route | None = None  # where calls really go; resolved on first use
        self._route_lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, "
            f"api_key={'<set>' if self._api_key else None}, "
            f"response_format_mode={self.response_format_mode!r}, max_retries={self.max_retries}, "
            f"options={sorted(self._kwargs)})"
        )

    # --- the public calls ----------------------------------------------------------

    def send_request(self, request: LLMRequest) -> LLMResponse:
        return self.complete(request).response

    async def asend_request(self, request: LLMRequest) -> LLMResponse:
        return (await self.acomplete(request)).response

    def complete(self, request: LLMRequest) -> LLMResult:
        self._check_content(request)
        litellm = _litellm()
        exchange = _Exchange(request, self.max_retries)
        while True:
            mode, fmt = self._format_for(request)
            try:
                raw = _output_of(litellm.completion(**self._call_kwargs(exchange.messages, fmt)))
            except Exception as exc:  # litellm raises many unrelated types; all become ours
                if self._downgrade_after(mode, exc):
                    continue
                raise self._translate(exc, exchange.raw_outputs) from None
            result = exchange.accept(raw, mode)
            if result is not None:
                return self._priced(result)

    async def acomplete(self, request: LLMRequest) -> LLMResult:
        self._check_content(request)
        litellm = _litellm()
        if self._route is None:  # may start a local server: not on the event loop
            await run_blocking(self._resolved)
        exchange = _Exchange(request, self.max_retries)
        while True:
            mode, fmt = self._format_for(request)
            try:
                reply = await litellm.acompletion(**self._call_kwargs(exchange.messages, fmt))
                raw = _output_of(reply)
            except Exception as exc:
                if self._downgrade_after(mode, exc):
                    continue
                raise self._translate(exc, exchange.raw_outputs) from None
            result = exchange.accept(raw, mode)
            if result is not None:
                return self._priced(result)

    async def astream(self, request: LLMRequest) -> AsyncIterator[str | LLMResult]:
        """The provider's stream: text chunks as they arrive, then the validated result.

        One streamed attempt; a reply that fails validation is re-asked without streaming (``acomplete``),
        and that result is the last item. A provider that refuses streaming or the format fails over the
        same way, so a caller always ends with a result or a typed error.
        """
        self._check_content(request)
        litellm = _litellm()
        if self._route is None:
            await run_blocking(self._resolved)
        exchange = _Exchange(request, 0)
        mode, fmt = self._format_for(request)
        parts: list[str] = []
        finish: str | None = None
        try:
            stream = await litellm.acompletion(**self._call_kwargs(exchange.messages, fmt), stream=True)
            async for chunk in stream:
                choices = getattr(chunk, "choices", None) or []
                if not choices:
                    continue
                delta = getattr(choices[0], "delta", None)
                text = getattr(delta, "content", None)
                finish = getattr(choices[0], "finish_reason", None) or finish
                if isinstance(text, str) and text:
                    parts.append(text)
                    yield text
        except Exception as exc:  # noqa: BLE001 - any provider failure: the ordinary call decides
            logger.info("streaming from %s failed (%s); asking without streaming", self.model, type(exc).__name__)
            yield await self.acomplete(request)
            return
        try:
            result = exchange.accept(_Output(text="".join(parts), finish_reason=finish), mode)
        except FSMError:
            result = None
        yield self._priced(result) if result is not None else await self.acomplete(request)

    def _priced(self, result: LLMResult) -> LLMResult:
        """The result with its price from litellm's bundled price list (offline; None for unknown models)."""
        usage = result.usage
        cost: float | None = None
        if usage.get("prompt_tokens") or usage.get("completion_tokens"):
            route = self._route
            try:
                prompt_cost, completion_cost = _litellm().cost_per_token(
                    model=route.model if route is not None else self.model,
                    prompt_tokens=usage.get("prompt_tokens", 0),
                    completion_tokens=usage.get("completion_tokens", 0),
                )
                cost = float(prompt_cost) + float(completion_cost)
            except Exception:  # noqa: BLE001 - a model litellm has no price for: the cost is unknown, not an error
                cost = None
        return dataclasses.replace(result, cost_usd=cost, model=self.model)

    # --- images --------------------------------------------------------------------

    @property
    def reads_images(self) -> bool:
        """Whether the model reads images: ``vision`` when given, else litellm's bundled model list (no I/O,
        and no local server started: the ``local`` catalogue's models read text only)."""
        if self.vision is not None:
            return self.vision
        if _is_local_name(self.model):
            return False
        if self._vision_found is None:
            try:
                found = bool(
                    _litellm().supports_vision(
                        model=self.model, custom_llm_provider=self._kwargs.get("custom_llm_provider")
                    )
                )
            except Exception:  # noqa: BLE001 - a model litellm cannot place: not known to read images
                found = False
            self._vision_found = found
        return self._vision_found

    def _check_content(self, request: LLMRequest) -> None:
        """Refuse images for a model that cannot read them before any call (the manager refuses them earlier;
        this guards a direct call)."""
        if request.user_content is not None and not self.reads_images:
            why = (
                "the local models read text only"
                if _is_local_name(self.model) and self.vision is None
                else "litellm's model list does not say it reads images; pass vision=True if it does"
                if self.vision is None
                else "vision=False"
            )
            raise UnsupportedContentError(f"{self.model} does not read images ({why})")

    # --- where calls go ------------------------------------------------------------

    def _resolved(self) -> _Route:
        """The litellm model, extra kwargs, key and format mode actually used, resolved once.

        Resolution is lazy because ``local`` names may start a model server:
        constructing an interface must stay cheap and free of side effects.
        """
        if self._route is None:
            with self._route_lock:
                if self._route is None:
                    self._route = self._make_route()
        return self._route

    def _make_route(self) -> _Route:
        if not _is_local_name(self.model):
            return _Route(self.model, {}, self._api_key, self.response_format_mode)
        from llm_fsm.local import _server

        try:
            resolved = dict(_server.local_litellm_kwargs(self.model))
        except FSMError:
            raise
        except Exception as exc:  # a server that would not start, a missing binary ...
            raise LLMConfigurationError(
                f"{self.model}: the local model could not be started ({type(exc).__name__}: {exc}); "
                "see `llm-fsm local --help`"
            ) from None
        model = str(resolved.pop("model"))
        key = resolved.pop("api_key", None)
        mode = resolved.pop("response_format_mode", "auto")
        extra = {name: value for name, value in resolved.items() if name not in self._kwargs}
        # what the caller passed explicitly wins over what the local server suggests
        return _Route(
            model=model,
            kwargs=extra,
            api_key=self._api_key or (_Secret(key) if isinstance(key, str) and key else None),
            mode=self.response_format_mode if self.response_format_mode != "auto" else mode,
        )

    # --- structured output ---------------------------------------------------------

    @property
    def sends_reply_schema(self) -> bool:
        """Whether the next call carries the reply schema (``json_schema`` or ``schema_object``).

        Answered without I/O for ``local`` models (their servers always take a
        schema, and asking must not start one); other models are looked up in
        litellm's table once, as the first call would. After a provider rejects
        schemas the answer turns False, and prompts show the format again.
        """
        if "response_format" in self._kwargs:
            return False
        if self._route is None and _is_local_name(self.model):
            # llm_fsm.local routes always name a schema mode; knowing that spares starting a server here
            route_mode: str = "json_schema" if self.response_format_mode == "auto" else self.response_format_mode
        else:
            route_mode = self._resolved().mode
        return self._mode_for(route_mode) in _SCHEMA_MODES

    def effective_mode(self, request: LLMRequest) -> str:
        """The structured-output mode the next call for ``request`` will use."""
        return self._format_for(request)[0]

    def _format_for(self, request: LLMRequest) -> tuple[str, dict[str, Any] | None]:
        if "response_format" in self._kwargs:
            return "user", None
        mode = self._mode_for(self._resolved().mode)
        schema = request.response_schema
        if schema and _is_local_name(self.model) and request.context_keys is not None:
            # Small local models need the schema closed to the state's keys, or they invent keys and
            # nest objects until the token limit (docs/local-model.md).
            schema = closed_schema(schema, request.context_keys)
        if mode in ("json_schema", "schema_object") and not schema:
            mode = "json_object"
        if mode == "json_schema":
            return mode, {
                "type": "json_schema",
                "json_schema": {"name": "fsm_response", "schema": schema, "strict": False},
            }
        if mode == "schema_object":
            return mode, {"type": "json_object", "schema": schema}
        if mode == "json_object":
            return mode, {"type": "json_object"}
        return "none", None

    def _mode_for(self, route_mode: str) -> str:
        """The mode calls use on a route: auto is looked up (and may have stepped down), unless validation is off."""
        if self.response_format_mode == "auto" and not self.enable_json_validation:
            return "none"
        return self._detect_mode() if route_mode == "auto" else route_mode

    def _detect_mode(self) -> str:
        """Ask litellm's model table what the model accepts; unknown models get the safest answer."""
        if self._auto_mode is not None:
            return self._auto_mode
        litellm = _litellm()
        target = self._resolved().model
        provider = self._kwargs.get("custom_llm_provider")
        mode = "none"
        try:
            if litellm.supports_response_schema(model=target, custom_llm_provider=provider):
                mode = "json_schema"
        except Exception:  # unknown model or provider: litellm raises instead of answering
            pass
        if mode == "none":
            try:
                params = litellm.get_supported_openai_params(model=target, custom_llm_provider=provider)
            except Exception:
                params = None
            if params and "response_format" in params:
                mode = "json_object"
        self._auto_mode = mode
        logger.debug("structured output for %s: %s", self.model, mode)
        return mode

    def _downgrade_after(self, mode: str, exc: Exception) -> bool:
        """After a provider rejected our auto-chosen response_format, use a weaker one from now on.

        Only for auto mode: a mode the user chose explicitly is theirs to change.
        Returns True when the call should simply be made again.
        """
        if self._resolved().mode != "auto" or mode not in _DOWNGRADE:
            return False
        if not _rejects_request_shape(exc):
            return False
        lower = _DOWNGRADE[mode]
        logger.warning(
            "%s rejected response_format %s (%s); using %s from now on",
            self.model,
            mode,
            type(exc).__name__,
            lower,
        )
        self._auto_mode = lower
        return True

    # --- the call ------------------------------------------------------------------

    def _call_kwargs(self, messages: list[dict[str, Any]], fmt: dict[str, Any] | None) -> dict[str, Any]:
        route = self._resolved()
        kwargs = {**route.kwargs, **self._kwargs}
        kwargs["model"] = route.model
        kwargs["messages"] = messages
        if route.api_key is not None:
            kwargs["api_key"] = route.api_key.reveal()
        if fmt is not None:
            kwargs["response_format"] = fmt
        return kwargs

    def _secrets(self) -> list[str]:
        secrets = [self._api_key.reveal()] if self._api_key else []
        route = self._route
        if route is not None and route.api_key is not None:
            secrets.append(route.api_key.reveal())
        for name, value in self._kwargs.items():
            lowered = name.lower()
            if (
                isinstance(value, str)
                and len(value) >= 6
                and any(word in lowered for word in ("key", "token", "secret", "password"))
            ):
                secrets.append(value)
        return secrets

    def _redact(self, text: str) -> str:
        for secret in self._secrets():
            text = text.replace(secret, "***")
        return text

    def _translate(self, exc: Exception, raw_outputs: list[str]) -> FSMError:
        """A provider failure as one of our errors (``provider_error``), with our secrets masked in its message.

        A ``local`` model that cannot be reached forgets its route, so the next call resolves (and restarts) it.
        """
        if isinstance(exc, FSMError):
            return exc
        detail = self._redact(" ".join(str(exc).split()))[:500]  # before the route, and its key, is forgotten
        if _is_local_name(self.model) and is_connection_error(exc):
            with self._route_lock:
                self._route = None
        return provider_error(exc, self.model, detail, raw_outputs)


@dataclass(frozen=True)
class _Route:
    model: str
    kwargs: dict[str, Any]
    api_key: _Secret | None
    mode: str


def _is_local_name(model: str) -> bool:
    """``local`` and ``local/<model>`` name a model served on this machine by ``llm_fsm.local``."""
    return model == "local" or model.startswith("local/")
