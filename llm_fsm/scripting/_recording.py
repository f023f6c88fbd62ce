"""Record a run's model calls; replay them offline and report where the route changed.

``--record DIR`` wraps the model in a ``Recorder``: every request (system
prompt, user message, purpose, response schema) and every answer (the parsed
reply, the raw outputs, the attempts, or the error) is kept, together with the
route the conversation took — one ``PathStep`` per turn — and where it ended.
One JSON file per script conversation, with a name derived from the script and
the conversation, so the same scripts find the same files again.

``--replay DIR`` answers each call from the recording instead of a model:
deterministic, offline, free. Answers are looked up by (turn, purpose), not by
position, so replaying against an edited definition still works when the engine
now makes a different number of calls; the new route is then compared with the
recorded one, and every difference is reported as a failure.

Recorded answers are replayed as parsed replies, without re-checking them
against the (possibly edited) definition's allowed targets: the engine's
decision rule still refuses anything undeclared, and the report then shows
exactly which turn now goes elsewhere.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llm_fsm import errors as _errors
from llm_fsm.definition._documents import format_path
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult
from llm_fsm.errors import (
    FSMError,
    LLMResponseError,
    LLMScriptExhaustedError,
    ScriptError,
)
from llm_fsm.llm._interface import LLMInterface
from llm_fsm.scripting._results import ConversationResult, PathStep
from llm_fsm.scripting._scripted_model import set_turn
from llm_fsm.scripting._scripts import RECORDING_FORMAT, ScriptConversation

FORMAT = RECORDING_FORMAT
VERSION = 1
MAX_RECORDING_BYTES = 50 * 1024 * 1024

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def _slug(text: str) -> str:
    return _SLUG.sub("-", text).strip("-._").lower()[:60] or "x"


def recording_name(conversation: ScriptConversation) -> str:
    """``<script>--<nn>-<conversation>.json``: stable for the same script and conversation."""
    return f"{_slug(conversation.script.stem)}--{conversation.index:02d}-{_slug(conversation.name)}.json"


def check_unique_names(conversations: Sequence[ScriptConversation]) -> None:
    """Two scripts with the same file name would overwrite each other's recordings."""
    seen: dict[str, ScriptConversation] = {}
    for conversation in conversations:
        name = recording_name(conversation)
        other = seen.get(name)
        if other is not None and other.script.file.resolve() != conversation.script.file.resolve():
            raise ScriptError(
                f"its recording would be named {name!r}, like the one of {other.script.display}; "
                "rename one of the scripts or record them separately",
                file=conversation.script.display,
            )
        seen[name] = conversation


def _complete(llm: Any, request: LLMRequest) -> LLMResult:
    complete = getattr(llm, "complete", None)
    value = complete(request) if callable(complete) else llm.send_request(request)
    if isinstance(value, LLMResult):
        return value
    if isinstance(value, LLMResponse):
        return LLMResult(response=value)
    return LLMResult(response=LLMResponse.model_validate(value))


class Recorder(LLMInterface):
    """Wraps a model and keeps every request and answer, turn by turn."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.turn = 0
        self.calls: list[dict[str, Any]] = []

    def begin_turn(self, index: int) -> None:
        self.turn = index
        set_turn(self.inner, index)

    @property
    def sends_reply_schema(self) -> bool:
        """The wrapped model's answer, so a recorded run sends the prompts an unrecorded one would."""
        return bool(getattr(self.inner, "sends_reply_schema", False))

    def send_request(self, request: LLMRequest) -> LLMResponse:
        return self.complete(request).response

    def complete(self, request: LLMRequest) -> LLMResult:
        entry: dict[str, Any] = {
            "turn": self.turn,
            "purpose": request.purpose,
            "request": {
                "system_prompt": request.system_prompt,
                "user_message": request.user_message,
                "purpose": request.purpose,
                "response_schema": request.response_schema,
            },
        }
        try:
            result = _complete(self.inner, request)
        except FSMError as exc:
            entry["error"] = {
                "type": type(exc).__name__,
                "message": str(exc),
                "raw_outputs": list(getattr(exc, "raw_outputs", []) or []),
            }
            self.calls.append(entry)
            raise
        entry["answer"] = {
            "response": result.response.model_dump(mode="json"),
            "attempts": result.attempts,
            "raw_outputs": list(result.raw_outputs),
            "problems": list(result.problems),
            "response_format": result.response_format,
            "usage": dict(result.usage),
        }
        self.calls.append(entry)
        return result


def recording_document(result: ConversationResult, recorder: Recorder, *, model: str) -> dict[str, Any]:
    conversation = result.conversation
    definition = result.definition
    return {
        "format": FORMAT,
        "version": VERSION,
        "script": conversation.script.display,
        "conversation": conversation.name,
        "index": conversation.index,
        "definition": os.fspath(conversation.script.definition_path),
        "definition_name": definition.name if definition is not None else None,
        "definition_hash": definition.content_hash if definition is not None else None,
        "model": model,
        "initial_context": conversation.initial_context,
        "user_messages": [t.spec.user for t in conversation.turns],
        "calls": recorder.calls,
        "initial_state": result.initial_state,
        "path": [step.to_json() for step in result.path],
        "final_state": result.final_state,
        "ended": result.ended,
    }


def write_recording(directory: Path, result: ConversationResult, recorder: Recorder, *, model: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / recording_name(result.conversation)
    text = json.dumps(recording_document(result, recorder, model=model), indent=2, ensure_ascii=False) + "\n"
    temporary = target.with_suffix(".json.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)  # a reader never sees half a recording
    return target


def read_recording(directory: Path, conversation: ScriptConversation) -> dict[str, Any]:
    path = directory / recording_name(conversation)
    name = os.fspath(path)
    try:
        if path.stat().st_size > MAX_RECORDING_BYTES:
            raise ScriptError(f"larger than the {MAX_RECORDING_BYTES:,}-byte limit for recordings", file=name)
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScriptError(
            f"no recording for {conversation.label} (record it with --record {directory})", file=name
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScriptError(f"cannot read the recording: {exc}", file=name) from None
    except json.JSONDecodeError as exc:
        raise ScriptError(f"not a recording: invalid JSON ({exc.msg})", file=name, line=exc.lineno) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ScriptError(f"not an {FORMAT} file", file=name)
    if data.get("version") != VERSION:
        raise ScriptError(f"recording version {data.get('version')!r} is not supported (expected {VERSION})", file=name)
    for key, kind in (("calls", list), ("path", list), ("user_messages", list)):
        if not isinstance(data.get(key), kind):
            raise ScriptError(f"recording has no valid {key!r}", file=name, path=f"$.{key}")
    return data


class ReplayModel(LLMInterface):
    """Answers from a recording, looked up by (turn, purpose)."""

    def __init__(self, recording: Mapping[str, Any], *, source: str = "recording") -> None:
        self.source = source
        self.turn = 0
        self._answers: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
        self._turn_messages: dict[int, str] = {}
        for position, call in enumerate(recording.get("calls", [])):
            if (
                not isinstance(call, Mapping)
                or not isinstance(call.get("turn"), int)
                or not isinstance(call.get("purpose"), str)
            ):
                raise ScriptError(f"call {position} is malformed", file=source, path=f"$.calls[{position}]")
            self._answers[(call["turn"], call["purpose"])].append(dict(call))

    def begin_turn(self, index: int) -> None:
        self.turn = index

    def send_request(self, request: LLMRequest) -> LLMResponse:
        return self.complete(request).response

    def complete(self, request: LLMRequest) -> LLMResult:
        queue = self._answers.get((self.turn, request.purpose))
        if queue:
            return self._play(queue.pop(0), request)
        if request.purpose == "regenerate":
            # The edited definition now overrides a proposal the recorded run accepted:
            # there is no recorded second answer, so say the turn's message again.
            message = self._turn_messages.get(self.turn, "(regenerated)")
            return LLMResult(
                response=LLMResponse.model_validate({"transition": {"target_state": ""}, "message": message})
            )
        raise LLMScriptExhaustedError(
            f"{self.source} has no {request.purpose} answer for turn {self.turn} "
            "(the recorded conversation ended earlier, or the script gained turns)"
        )

    def _play(self, call: Mapping[str, Any], request: LLMRequest) -> LLMResult:
        if "error" in call:
            error = call["error"] if isinstance(call["error"], Mapping) else {}
            cls = getattr(_errors, str(error.get("type")), None)
            if not (isinstance(cls, type) and issubclass(cls, LLMResponseError)):
                cls = LLMResponseError
            raise cls(str(error.get("message", "recorded failure")), raw_outputs=list(error.get("raw_outputs") or []))
        answer: Mapping[str, Any] = call.get("answer") or {}
        try:
            response = LLMResponse.model_validate(answer["response"])
        except Exception as exc:  # noqa: BLE001 - a hand-edited recording; say where
            raise ScriptError(
                f"recorded answer for turn {self.turn} ({request.purpose}) is malformed: {exc}", file=self.source
            ) from None
        if request.purpose == "turn":
            self._turn_messages[self.turn] = response.message
        return LLMResult(
            response=response,
            attempts=int(answer.get("attempts", 1)),
            raw_outputs=tuple(answer.get("raw_outputs") or ()),
            problems=tuple(answer.get("problems") or ()),
            response_format="replay",
        )


def _declared_at(step: PathStep, definition: FSMDefinition | None) -> str:
    """Where the transition a step took is declared: the state's own list, or ``global_transitions``."""
    index = step.transition_index
    parts: tuple[str | int, ...] = ("states", step.state_before or "", "transitions", index or 0)
    if definition is not None and step.state_before in definition.states and index is not None:
        parts = definition.transition_path(step.state_before, index)
    return format_path(parts)


def _describe(step: PathStep | None, definition_file: str, definition: FSMDefinition | None = None) -> str:
    if step is None:
        return "no turn (the conversation had ended)"
    if step.error:
        return f"failed in {step.state_before}: {step.error}"
    if step.transition_index is None:
        return f"stayed in {step.state_before} ({step.verdict})"
    return f"{step.state_before} → {step.state_after} via {_declared_at(step, definition)} ({step.verdict})"


def compare(recording: Mapping[str, Any], result: ConversationResult) -> list[str]:
    """Every way the replayed route differs from the recorded one, as lines a person can act on."""
    differences: list[str] = []
    recorded_messages = list(recording.get("user_messages", []))
    messages = [t.spec.user for t in result.conversation.turns]
    if recorded_messages != messages:
        first = next(
            (i for i, (a, b) in enumerate(zip(recorded_messages, messages, strict=False)) if a != b),
            min(len(recorded_messages), len(messages)),
        )
        differences.append(
            f"the script changed since it was recorded (user messages differ from turn {first + 1}); record it again"
        )
        return differences
    recorded = [PathStep.from_json(step) for step in recording.get("path", [])]
    now = result.path
    file = os.fspath(result.conversation.script.definition_path)
    changed = []
    for position in range(max(len(recorded), len(now))):
        before = recorded[position] if position < len(recorded) else None
        after = now[position] if position < len(now) else None
        if before is not None and after is not None and before.same_route(after):
            continue
        turn = (before or after).turn  # type: ignore[union-attr]
        now_said, recorded_said = _describe(after, file, result.definition), _describe(before, file, result.definition)
        changed.append(f"turn {turn}: now {now_said}; recorded {recorded_said}")
    if changed:
        differences.append("takes different transitions:")
        differences.extend("  " + line for line in changed)
    if (recording.get("final_state"), bool(recording.get("ended"))) != (result.final_state, result.ended):

        def where(state: Any, ended: bool) -> str:
            return f"{'ended' if ended else 'active'} in {state}"

        differences.append(
            f"ends elsewhere: now {where(result.final_state, result.ended)}; "
            f"recorded {where(recording.get('final_state'), bool(recording.get('ended')))}"
        )
    return differences


__all__ = [
    "FORMAT",
    "Recorder",
    "ReplayModel",
    "check_unique_names",
    "compare",
    "read_recording",
    "recording_document",
    "recording_name",
    "write_recording",
]
