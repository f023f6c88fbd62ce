"""The model a command talks to: ``--model`` (else ``$LLM_FSM_MODEL``) as a litellm model, or ``scripted:FILE``,
replies played from a file with no key and no network; and ``--show-prompt``'s wrapper that prints each
system prompt before it is sent."""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import click

from llm_fsm.engine._records import LLMRequest
from llm_fsm.errors import DefinitionError, LLMConfigurationError

MODEL_ENV = "LLM_FSM_MODEL"


class _PromptEcho:
    """Wraps an LLM interface to show every system prompt before it is sent (``--show-prompt``)."""

    def __init__(self, inner: Any, echo: Any) -> None:
        self._inner = inner
        self._echo = echo

    def complete(self, request: LLMRequest) -> Any:
        self._echo(click.style(f"--- system prompt ({request.purpose}) ---", dim=True))
        self._echo(request.system_prompt)
        self._echo(click.style("--- end of prompt ---", dim=True))
        complete = getattr(self._inner, "complete", None)
        return complete(request) if callable(complete) else self._inner.send_request(request)

    def send_request(self, request: LLMRequest) -> Any:
        result = self.complete(request)
        return getattr(result, "response", result)

    @property
    def sends_reply_schema(self) -> bool:
        """The wrapped model's answer: the prompt shown must be the prompt it is sent."""
        return bool(getattr(self._inner, "sends_reply_schema", False))


SCRIPTED_PREFIX = "scripted:"


def make_llm(model: str | None, *, temperature: float | None = None, **kwargs: Any) -> Any:
    """A LiteLLMInterface for ``model`` (or ``$LLM_FSM_MODEL``); ``scripted:FILE`` replays replies from a file.

    Keys come from the environment as litellm reads them."""
    model = model or os.environ.get(MODEL_ENV)
    if not model:
        raise LLMConfigurationError(
            f"no model configured: pass --model (e.g. gpt-4o-mini, anthropic/claude-3-5-haiku-latest, "
            f"ollama/llama3.2, local, scripted:replies.yaml) or set {MODEL_ENV}"
        )
    if model.startswith(SCRIPTED_PREFIX):
        return ReplyFileModel.from_file(model.removeprefix(SCRIPTED_PREFIX))
    from llm_fsm.llm._litellm import LiteLLMInterface

    if temperature is not None:
        kwargs["temperature"] = temperature
    return LiteLLMInterface(model=model, **kwargs)


def missing_provider_keys(model: str) -> list[str]:
    """The API key variables litellm says ``model``'s provider needs and the environment lacks; [] when none.

    Asked of ``litellm.validate_environment`` (no network), so a server started without its key refuses to
    start instead of answering every turn with a provider error. Only the names of keys count: litellm also
    lists base URLs, API versions and cloud projects, which have defaults or other sources (Ollama's
    localhost, AWS profiles, Google's application credentials), so refusing on them would refuse working
    set-ups. Scripted and ``local`` models need no key.
    """
    from llm_fsm.llm._litellm import _is_local_name

    if model.startswith(SCRIPTED_PREFIX) or _is_local_name(model):
        return []
    from llm_fsm.llm._litellm_errors import _litellm

    try:
        answer = _litellm().validate_environment(model=model)
    except Exception:  # litellm could not tell (a provider it does not know): the first call will say
        return []
    return [str(name) for name in answer.get("missing_keys", []) if "API_KEY" in str(name)]


class ReplyFileModel:
    """``--model scripted:FILE``: the model's answers come from a file, in order. No key, no model, no network.

    FILE is a YAML or JSON list of replies, or a conversation script
    (``*.conv.yaml``) whose first conversation's ``opening:`` and ``model:``
    answers are replayed. Replies take the forms of a script's ``model:``
    (a plain string: stay and say this; ``{target_state, context_update,
    message}``; ``{intent: confirm, message}``; ``{raw: text}``), and the first
    answers the conversation's opening. The engine's second, "regenerate"
    call does not take a reply: it gets the script's ``regenerate:`` when there
    is one, else the turn's message again, as in ``llm-fsm test``.

    Each conversation replays the file from its start (by the request's ``conversation_id``): a server with
    a scripted model serves many conversations at once, and one conversation must not take another's
    replies. The most recent ``MAX_CONVERSATIONS`` are remembered, so a demo server running for days stays
    bounded; a conversation forgotten meanwhile starts the file again.
    """

    MAX_CONVERSATIONS = 10_000

    reads_images = True
    """It stands in for the model the replies were written for: a message with images is taken, and answered
    from the file like any other."""

    def __init__(self, steps: list[tuple[Any, Any]], *, source: str) -> None:
        self.steps = steps  # (reply, regenerate reply or None), both as script_reply returns them
        self.source = source
        self._replays: OrderedDict[str | None, _Replay] = OrderedDict()  # by conversation id, least recent first
        self._lock = threading.Lock()  # a server calls the model from several threads

    @classmethod
    def from_file(cls, path: str) -> ReplyFileModel:
        from pydantic import ValidationError

        from llm_fsm.definition._documents import format_path, parse_text
        from llm_fsm.errors import ScriptError
        from llm_fsm.loading import read_capped
        from llm_fsm.scripting._scripts import (
            MAX_SCRIPT_BYTES,
            MAX_SCRIPT_VALUES,
            ModelReply,
            is_script_file,
            load_script,
        )

        if not path:
            raise ScriptError("scripted: needs a file of replies, e.g. --model scripted:replies.yaml")
        if is_script_file(path):
            conversation = load_script(path).conversations[0]
            steps: list[tuple[Any, Any]] = [(conversation.opening.as_reply(), None)]
            for turn in conversation.turns:
                if turn.spec.model is not None:
                    regenerate = turn.spec.regenerate.as_reply() if turn.spec.regenerate is not None else None
                    steps.append((turn.spec.model.as_reply(), regenerate))
            return cls(steps, source=path)
        raw = read_capped(path, max_bytes=MAX_SCRIPT_BYTES, what="reply file", error=ScriptError, not_found=ScriptError)
        try:
            fmt = "json" if path.lower().endswith(".json") else "yaml"
            document = parse_text(raw, file=path, fmt=fmt, max_containers=MAX_SCRIPT_VALUES, kind="reply file")
        except DefinitionError as exc:  # the shared parser speaks of definitions; this is a reply file
            raise ScriptError(exc.message, file=path, path=exc.path, line=exc.line) from None
        if not isinstance(document.data, list) or not document.data:
            raise ScriptError("a reply file is a non-empty list of model replies (or a *.conv.yaml script)", file=path)
        steps = []  # a list of replies: the opening first, then one per message
        for index, item in enumerate(document.data):
            try:
                steps.append((ModelReply.model_validate(item).as_reply(), None))
            except ValidationError as exc:
                problem = exc.errors()[0]
                where = (index, *problem["loc"])
                unknown = problem["type"] == "extra_forbidden"
                raise ScriptError(
                    f"unknown key {where[-1]!r}" if unknown else problem["msg"].removeprefix("Value error, "),
                    file=path,
                    path=format_path(where),
                    line=document.line_for(where),
                ) from None
        return cls(steps, source=path)

    def send_request(self, request: LLMRequest) -> Any:
        return self.complete(request).response

    def complete(self, request: LLMRequest) -> Any:
        from llm_fsm.engine._records import LLMResult
        from llm_fsm.errors import LLMScriptExhaustedError
        from llm_fsm.llm.fakes import to_response

        replay = self._replay(request.conversation_id)
        if request.purpose == "regenerate" and replay.current is not None:
            regenerate = replay.current[1]
            reply = regenerate if regenerate is not None else {"target_state": None, "message": replay.message or "…"}
        else:
            if replay.used >= len(self.steps):
                raise LLMScriptExhaustedError(
                    f"the script {self.source} has no reply left for this conversation ({replay.used} used)"
                )
            replay.current = self.steps[replay.used]
            replay.used += 1
            reply = replay.current[0]
        response = to_response(reply, request)
        if request.purpose != "regenerate":
            replay.message = response.message
        raw = reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        return LLMResult(response=response, attempts=1, raw_outputs=(raw,), response_format="scripted")

    def _replay(self, conversation_id: str | None) -> _Replay:
        """Where ``conversation_id`` is in the file (a new conversation at its start)."""
        with self._lock:
            replay = self._replays.get(conversation_id)
            if replay is None:
                replay = self._replays[conversation_id] = _Replay()
                if len(self._replays) > self.MAX_CONVERSATIONS:
                    self._replays.popitem(last=False)
            else:
                self._replays.move_to_end(conversation_id)
            return replay


@dataclass
class _Replay:
    """One conversation's place in a reply file."""

    used: int = 0
    """Replies taken (regenerate calls take none)."""
    current: tuple[Any, Any] | None = None
    """The step last taken: its reply and its regenerate reply (or None)."""
    message: str | None = None
    """The message of the last reply, said again by a regenerate call the file has no reply for."""


_model_option = click.option(
    "--model",
    "-m",
    help=f"litellm model name, 'local', or 'scripted:FILE' (replies from a YAML/JSON list or a *.conv.yaml "
    f"script: no key, no model) (default: ${MODEL_ENV}).",
)
