"""The two engines of ``live.py``, each playing one scripted conversation against the shared local server.

Both are counted at the same place: every HTTP call to the model through
litellm's ``completion`` (ours: ``litellm.completion`` in this process; the
original: the ``completion`` its llm module imported, wrapped inside its own
venv by ``baseline/original_driver.py``). So "LLM calls" includes openings,
our engine's second "regenerate" call and re-asks after an invalid reply, and
the original's fallback calls; tokens are what llama-server reports in each
response's ``usage`` (SmolLM2's own tokenizer). When a response carries no
usage, its texts are counted with o200k_base instead and the report says so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import yaml
from live_scoring import ConversationOutcome, Goal
from original_env import (
    BASELINES,
    BaselineUnavailable,
    DriverSession,
    installed_version,
)

from llm_fsm import local
from llm_fsm.engine._records import TurnRecord
from llm_fsm.llm._litellm import LiteLLMInterface
from llm_fsm.manager import FSMManager
from llm_fsm.scripting._scripts import ScriptConversation

# --- the server, shared by both engines ------------------------------------------------------


@contextlib.contextmanager
def private_home(shared: bool) -> Iterator[Path]:
    """An ``LLM_FSM_HOME`` of our own, so a ``llm-fsm local stop`` elsewhere cannot end our server mid-run.

    It borrows the built binary and assembled models of the usual home by
    symlink; only the server's state, key and log files are private.
    """
    usual = local.home_dir()
    if shared:
        yield usual
        return
    home = Path(tempfile.mkdtemp(prefix="llm_fsm_live_"))
    for name in ("bin", "models"):
        if (usual / name).exists():
            (home / name).symlink_to(usual / name)
    previous = os.environ.get("LLM_FSM_HOME")
    os.environ["LLM_FSM_HOME"] = str(home)  # LiteLLMInterface("local") resolves through it
    try:
        yield home
    finally:
        if previous is None:
            os.environ.pop("LLM_FSM_HOME", None)
        else:
            os.environ["LLM_FSM_HOME"] = previous
        shutil.rmtree(home, ignore_errors=True)


@dataclasses.dataclass
class Server:
    model: str
    kwargs: dict[str, Any]
    label: str


@contextlib.contextmanager
def shared_server(model: str, *, home: Path, threads: int | None, keep: bool) -> Iterator[Server]:
    """Start the local server once (or reuse one already running in ``home``); stop it if we started it."""
    spec = local.parse_local_model_name(model)
    already = local.running_server(spec, home)
    state = already or local.start(spec.key, home=home, threads=threads)
    threads_used = _threads_of(state.command)
    label = f"{state.runtime}, {threads_used} thread(s), {'reused' if already else 'started'} pid {state.pid}"
    try:
        yield Server(model=model, kwargs=local.resolve_local_model(model, home=home, start_server=False), label=label)
    finally:
        if already is None and not keep:
            local.stop(spec.key, home=home)


def _threads_of(command: tuple[str, ...]) -> str:
    for flag in ("--threads", "--n_threads"):
        if flag in command:
            return command[command.index(flag) + 1]
    return "?"


# --- counting calls in this process ------------------------------------------------------------

TEXT_HEAD = 400
"""Characters of each model output kept in the report, to see what went wrong."""


class CallCounter:
    """Wraps ``litellm.completion`` while installed: one record per HTTP call, with its usage."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._real: Any = None

    def install(self) -> None:
        import litellm

        if self._real is not None:
            return
        self._real = litellm.completion
        counter = self

        def counting_completion(*args: Any, **kwargs: Any) -> Any:
            record: dict[str, Any] = {"usage": None}
            counter.calls.append(record)
            response = counter._real(*args, **kwargs)
            usage = getattr(response, "usage", None)
            prompt = getattr(usage, "prompt_tokens", None)
            completion = getattr(usage, "completion_tokens", None)
            try:
                text = response.choices[0].message.content or ""
            except (AttributeError, IndexError):
                text = ""
            record["text_head"] = text[:TEXT_HEAD]
            if isinstance(prompt, int) and isinstance(completion, int):
                record["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion}
            else:
                record["messages"] = kwargs.get("messages")
                record["completion_text"] = text
            return response

        litellm.completion = counting_completion

    def uninstall(self) -> None:
        import litellm

        if self._real is not None:
            litellm.completion = self._real
            self._real = None

    def take(self) -> list[dict[str, Any]]:
        taken, self.calls = self.calls, []
        return taken


def add_costs(outcome: ConversationOutcome, calls: list[dict[str, Any]]) -> None:
    """Calls and tokens of some model calls into ``outcome``; o200k for calls without usage."""
    for call in calls:
        outcome.calls += 1
        outcome.outputs.append(call.get("text_head") or call.get("error") or "")
        usage = call.get("usage")
        if usage:
            outcome.prompt_tokens += int(usage["prompt_tokens"])
            outcome.completion_tokens += int(usage["completion_tokens"])
            continue
        if call.get("error"):
            continue  # the request failed: nothing was generated and nothing reported
        from tokens_util import count_tokens, tokenizer_name

        outcome.token_source = f"server where reported, else {tokenizer_name()}"
        for message in call.get("messages") or []:
            outcome.prompt_tokens += count_tokens(str(message.get("content", "")))
        outcome.completion_tokens += count_tokens(call.get("completion_text") or "")


# --- our engine --------------------------------------------------------------------------------


class OursEngine:
    """Our FSMManager with ``LiteLLMInterface(<local model>)``, one fresh manager per conversation."""

    name = "ours"

    def __init__(self, model: str, options: Mapping[str, Any]) -> None:
        self.llm = LiteLLMInterface(model, **dict(options))
        self.counter = CallCounter()
        self.counter.install()

    def close(self) -> None:
        self.counter.uninstall()

    def play(self, conversation: ScriptConversation, goal: Goal) -> ConversationOutcome:
        outcome = ConversationOutcome(engine=self.name, label=goal.label, user_turns=len(conversation.turns))
        manager = FSMManager(llm_interface=self.llm, store="memory://")
        self.counter.take()
        try:
            conversation_id, opening = manager.start_conversation(
                str(conversation.script.definition_path), conversation.initial_context
            )
            outcome.replies.append(opening)
        except Exception as exc:  # noqa: BLE001 - any failure ends the conversation: recorded, not raised
            outcome.error = f"opening: {type(exc).__name__}: {exc}"[:600]
            add_costs(outcome, self.counter.take())
            return outcome.judge(goal)
        add_costs(outcome, self.counter.take())
        for turn in conversation.turns:
            if manager.get_instance(conversation_id).ended:
                break
            started = time.perf_counter()
            try:
                outcome.replies.append(manager.process_message(conversation_id, turn.spec.user))
            except Exception as exc:  # noqa: BLE001 - a failed turn is a result, not a crash of the benchmark
                outcome.error = f"turn {turn.index}: {type(exc).__name__}: {exc}"[:600]
                outcome.turns_failed += 1
            outcome.turn_seconds.append(time.perf_counter() - started)
            outcome.turns_played += 1
            add_costs(outcome, self.counter.take())
            outcome.states.append(manager.get_instance(conversation_id).current_state)
            if outcome.error:
                break
        instance = manager.get_instance(conversation_id)
        outcome.final_state, outcome.ended = instance.current_state, instance.ended
        outcome.data = json.loads(json.dumps(dict(instance.context.data), default=repr))
        outcome.written_at = written_at(instance.turns)
        return outcome.judge(goal)


def written_at(records: Sequence[TurnRecord]) -> dict[str, int]:
    """Each key path → the last turn (1-based) that stored a value under it or above it.

    The benchmark installs no handlers, so every value a turn stored came from the model (directly, or
    through a sub-flow's outputs, which the sub-flow grounded when the model wrote them).
    """
    found: dict[str, int] = {}
    for record in records:
        for change in record.context_changes:
            if change.applied:
                found[change.key] = record.index
    return found


# --- the original, in its own venv -------------------------------------------------------------


class OriginalEngine:
    """llm-fsm 0.1.1's FSMManager and LiteLLMInterface, driven in its venv (``original_driver.py``, op ``live``).

    The original reads JSON definitions only; a YAML definition is handed to it
    as the same document converted to JSON (same content, nothing else changed).
    """

    name = "original"

    def __init__(self, server: Server, options: Mapping[str, Any], scratch: Path) -> None:
        self.litellm = {
            "model": server.kwargs["model"],
            "api_base": server.kwargs["api_base"],
            "api_key": server.kwargs["api_key"],
            **dict(options),
        }
        self.scratch = scratch
        self.session = DriverSession(BASELINES["original"], timeout=3600.0)
        self.version: str | None = None
        self._converted: dict[Path, str] = {}

    def __enter__(self) -> Self:
        self.session.__enter__()
        self.version = installed_version(BASELINES["original"])
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.session.__exit__(*exc_info)

    def _definition_for(self, path: Path) -> str:
        if path.suffix.lower() == ".json":
            return str(path)
        if path not in self._converted:
            target = self.scratch / f"{path.stem}-{len(self._converted)}.json"
            with path.open(encoding="utf-8") as handle:
                target.write_text(json.dumps(yaml.safe_load(handle), ensure_ascii=False), encoding="utf-8")
            self._converted[path] = str(target)
        return self._converted[path]

    def play(self, conversation: ScriptConversation, goal: Goal) -> ConversationOutcome:
        outcome = ConversationOutcome(engine=self.name, label=goal.label, user_turns=len(conversation.turns))
        job = {
            "op": "live",
            "definition_path": self._definition_for(conversation.script.definition_path),
            "user_turns": [t.spec.user for t in conversation.turns],
            "initial_context": conversation.initial_context,
            "litellm": self.litellm,
        }
        try:
            answer = self.session.request(job)
        except BaselineUnavailable as exc:
            # the driver process died (or hung past its timeout): a failed conversation, then a fresh driver
            outcome.error = f"driver: {exc}"[:600]
            self.session.__exit__(None, None, None)
            self.session = DriverSession(BASELINES["original"], timeout=self.session.timeout)
            self.session.__enter__()
            return outcome.judge(goal)
        add_costs(outcome, (answer.get("opening") or {}).get("calls") or [])
        for turn in answer["turns"]:
            if "skipped" in turn:
                continue
            outcome.turns_played += 1
            outcome.turn_seconds.append(float(turn["seconds"]))
            outcome.states.append(turn.get("state"))
            outcome.turns_failed += 1 if "error" in turn else 0
            add_costs(outcome, turn.get("calls") or [])
        outcome.error = answer.get("error")
        outcome.final_state, outcome.ended = answer.get("final_state"), answer.get("ended")
        outcome.data = answer.get("data") or {}
        return outcome.judge(goal)
