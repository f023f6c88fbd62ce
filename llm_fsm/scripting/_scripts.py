"""Conversation test scripts (``*.conv.yaml``): the format, the loader, and finding them.

A script pins down what a definition should do with a given conversation: the
user's messages, what the model answers (for offline runs), and what must be
true after each turn — the state, context values, whether the conversation
ended. ``llm-fsm test`` runs them (``_runner``), measures which declared
transitions they exercised (``_coverage``) and records or replays model
answers (``_recording``).

The format is strict on purpose: an unknown key is an error with its path and
line, so ``expect: {stat: done}`` fails loudly instead of silently checking
nothing. Everything here is parsing and validation; the file system is touched
only to read the script and to check that its definition exists.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from llm_fsm.definition._documents import ParsedDocument, format_path, parse_text
from llm_fsm.engine._records import Intent, VerdictKind
from llm_fsm.engine._values import Rule
from llm_fsm.errors import DefinitionError, ScriptError
from llm_fsm.llm.fakes import script_reply
from llm_fsm.loading import read_capped
from llm_fsm.scripting._files import RECORDING_FORMAT, is_recording_file

SCRIPT_SUFFIXES = (".conv.yaml", ".conv.yml", ".conv.json")
DEFINITION_SUFFIXES = (".json", ".yaml", ".yml")
MAX_SCRIPT_BYTES = 2 * 1024 * 1024

MAX_SCRIPT_VALUES = MAX_SCRIPT_BYTES // 10
"""Values (in JSON: objects and arrays) a script or reply file may hold, counted before any is built: the ratio
definitions have to their byte cap, since 2 MiB of short scalars would compose into several hundred MB."""


_MATCHER_KEYS = ("equals", "regex", "present", "absent")


def is_script_file(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path).lower().endswith(SCRIPT_SUFFIXES)


# --- the format -----------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Matcher(_Strict):
    """One check on a value: exactly one of ``equals``, ``regex``, ``present``, ``absent``.

    ``present: true`` means collected in the engine's sense (there, and not null
    or empty); ``absent: true`` the opposite. ``regex`` is searched (use ``^…$``
    to anchor) in the value, or in its JSON text when it is not a string.
    """

    equals: Any = None
    regex: str | None = None
    present: bool | None = None
    absent: bool | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Matcher:
        given = [k for k in _MATCHER_KEYS if k in self.model_fields_set]
        if len(given) != 1:
            raise ValueError(
                f"a matcher takes exactly one of {', '.join(_MATCHER_KEYS)}; got {', '.join(given) or 'none'}"
                " (to expect an object value, write {equals: {...}})"
            )
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"invalid regex {self.regex!r}: {exc}") from None
        if "present" in given and self.present is None or "absent" in given and self.absent is None:
            raise ValueError("present/absent take true or false")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in _MATCHER_KEYS if k in self.model_fields_set)


class TransitionReply(_Strict):
    target_state: str | None = Field(default=None, description="Proposed state; null or absent: stay.")
    context_update: dict[str, Any] = Field(default_factory=dict)


class ModelReply(_Strict):
    """A scripted model answer: the flat form, the full form, or ``raw`` model text.

    Flat: ``{target_state, context_update, message}``. Full: ``{transition:
    {target_state, context_update}, message}``. Raw: ``{raw: "text"}`` is
    parsed exactly like a real model's output (to test malformed answers). A
    plain string in a script means ``{message: string}``: stay and say this.
    This model validates a script strictly (unknown keys, a missing message);
    what the forms mean is ``script_reply``'s, shared with ``ScriptedLLM``.
    """

    message: str | None = None
    target_state: str | None = None
    context_update: dict[str, Any] | None = None
    transition: TransitionReply | None = None
    reasoning: str | None = None
    intent: Intent | None = Field(
        default=None, description="continue (default), digression, cancel, start_flow, resume_flow, confirm, deny."
    )
    flow: str | None = Field(default=None, description="The sub-flow to start or resume (with start_flow/resume_flow).")
    raw: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _plain_string(cls, value: Any) -> Any:
        return {"message": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_form(self) -> ModelReply:
        fields = self.model_fields_set
        if self.raw is not None:
            others = fields - {"raw"}
            if others:
                raise ValueError(f"raw takes the whole model output; remove {', '.join(sorted(others))}")
            return self
        if self.transition is not None and fields & {"target_state", "context_update"}:
            raise ValueError("give either transition: {...} or target_state/context_update, not both")
        if not isinstance(self.message, str) or not self.message.strip():
            raise ValueError("a model reply needs a non-empty message (or raw: text)")
        return self

    def as_reply(self) -> dict[str, Any] | str:
        """What the scripted model returns: raw text, or a reply object (``llm_fsm.llm.fakes.script_reply``)."""
        return script_reply(self.model_dump(mode="json", exclude_unset=True))


def _matcher_or_value(value: Any) -> Any:
    """Any mapping is a matcher, so a typo such as ``{regx: ...}`` is an error, not an odd exact value."""
    if not isinstance(value, Mapping):
        return value
    try:
        return Matcher.model_validate(value)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            if error["type"] == "extra_forbidden":
                problems.append(f"unknown matcher key {error['loc'][-1]!r} (use one of {', '.join(_MATCHER_KEYS)})")
            else:
                problems.append(error["msg"].removeprefix("Value error, "))
        raise ValueError("; ".join(problems)) from None


ContextExpectation = Annotated[Any, BeforeValidator(_matcher_or_value)]


def _action_stub(value: Any) -> Any:
    """A stubbed action's answer: the result mapping itself, or ``{raise: "message"}`` to fail."""
    if not isinstance(value, Mapping):
        raise ValueError(
            "an action stub is the result mapping (e.g. {status: shipped}), {raise: message} or {handoff: reason}"
        )
    for special in ("raise", "handoff"):
        if special in value and (len(value) != 1 or not isinstance(value[special], str)):
            raise ValueError(f"{{{special}: text}} takes only its text (a string)")
    return dict(value)


ActionStub = Annotated[dict[str, Any], BeforeValidator(_action_stub)]
ActionStubs = dict[str, ActionStub]
_STUBS_DESCRIPTION = (
    "Stubbed actions: name → the result the action returns (a mapping), {raise: message} to make it fail, or "
    "{handoff: reason} to return HandOff (a person takes over). "
    "Turn-level stubs replace these from that turn on."
)


class Expectation(_Strict):
    """What must hold after a turn. Every field is optional; only what is given is checked."""

    state: str | None = Field(default=None, description="State the conversation is in after the turn.")
    context: dict[str, ContextExpectation] | None = Field(
        default=None,
        description="Context keys (dot paths nest) → an exact value, or a matcher {equals|regex|present|absent}.",
    )
    ended: bool | None = Field(default=None, description="Whether the conversation has ended.")
    stack: list[str] | None = Field(default=None, description="Sub-flow stack, bottom first (flow names).")
    verdict: VerdictKind | None = Field(default=None, description="The engine's verdict kind for the turn.")
    reply: Matcher | None = Field(default=None, description="The reply the user saw (a string is an exact match).")
    error: str | None = Field(
        default=None,
        description="The turn must fail with an llm_fsm error whose class name or message contains this text.",
    )
    refused: dict[str, Rule] | None = Field(
        default=None,
        description=(
            "Context keys the turn refused to store → the rule each broke (format, enum, ungrounded, ...), "
            "as the explain record gives it."
        ),
    )
    masked: list[str] | None = Field(
        default=None,
        description=(
            "Sensitive keys the turn wrote: its explain record must show them masked, and their stored "
            "values must appear nowhere in it."
        ),
    )
    chained: list[str] | None = Field(
        default=None,
        description="States passed through after the turn's move, in order (guarded transitions that already held).",
    )
    mode: Literal["bot", "human"] | None = Field(
        default=None, description="Who has the conversation after the step: the bot, or a person (handed off)."
    )
    called: dict[str, dict[str, ContextExpectation]] | None = Field(
        default=None,
        description=(
            "Actions the turn called → the inputs each was called with (values or matchers; {} for any inputs)."
        ),
    )
    not_called: list[str] | None = Field(default=None, description="Actions the turn must not have called.")

    @field_validator("reply", mode="before")
    @classmethod
    def _reply_string(cls, value: Any) -> Any:
        return {"equals": value} if isinstance(value, str) else value


_OPERATOR_ACTIONS = ("hand_off", "message", "resume", "force_state")


class OperatorStep(_Strict):
    """An operator's act between the user's turns: exactly one of ``hand_off``, ``message``, ``resume``,
    ``force_state`` (see docs/operations.md)."""

    actor: str = Field(default="script", min_length=1, description="Who acts (recorded in the trace).")
    reason: str | None = None
    hand_off: bool | None = Field(default=None, description="true: hand the conversation to a person.")
    message: str | None = Field(default=None, description="The person's reply (post_operator_message).")
    resume: bool | str | None = Field(default=None, description="true: the bot resumes where it was; a state: there.")
    force_state: str | None = Field(default=None, description="Put the conversation in this declared state.")

    @model_validator(mode="after")
    def _exactly_one(self) -> OperatorStep:
        given = [name for name in _OPERATOR_ACTIONS if getattr(self, name) not in (None, False)]
        if len(given) != 1:
            raise ValueError(
                f"an operator step takes exactly one of {', '.join(_OPERATOR_ACTIONS)}; "
                f"got {', '.join(given) or 'none'}"
            )
        return self

    @property
    def action(self) -> str:
        return next(name for name in _OPERATOR_ACTIONS if getattr(self, name) not in (None, False))


class TurnSpec(_Strict):
    user: str | list[dict[str, Any]] | None = Field(
        default=None,
        description=(
            "The user's message: text, or content parts as litellm takes them ([{type: text, text: ...}, "
            "{type: image_url, image_url: {url: ...}}]); or give operator: instead."
        ),
    )
    metadata: dict[str, Any] | None = Field(
        default=None, description="The message's metadata (channel ids, attachments), stored with it."
    )
    operator: OperatorStep | None = Field(
        default=None, description="An operator's act instead of a user message: hand off, post, resume, force."
    )
    model: ModelReply | None = Field(default=None, description="The model's answer in offline runs.")
    regenerate: ModelReply | None = Field(
        default=None,
        description=(
            "The answer to the engine's second call when its verdict differs from the proposal; "
            "default: the turn's message again."
        ),
    )
    actions: ActionStubs | None = Field(default=None, description="Stubs that replace earlier ones from this turn on.")
    expect: Expectation = Field(default_factory=Expectation)

    @model_validator(mode="after")
    def _user_or_operator(self) -> TurnSpec:
        if isinstance(self.user, list) and not self.user:
            raise ValueError("user: as content parts needs at least one part")
        if (self.user is None) == (self.operator is None):
            raise ValueError("a step has either user: (a message) or operator: (an operator's act), not both")
        if self.operator is not None and self.metadata is not None:
            raise ValueError("metadata: belongs to a user message; an operator step has none")
        if self.operator is not None and (self.model is not None or self.regenerate is not None):
            raise ValueError("an operator step calls no model; remove model:/regenerate:")
        return self


class ConversationSpec(_Strict):
    name: str | None = None
    description: str | None = None
    initial_context: dict[str, Any] | None = None
    opening: ModelReply | None = None
    actions: ActionStubs | None = Field(default=None, description=_STUBS_DESCRIPTION)
    turns: list[TurnSpec] = Field(min_length=1)


class ScriptDocument(_Strict):
    """A script file: one conversation (``turns``) or several (``conversations``)."""

    definition: str = Field(description="Path of the definition, relative to this script file.")
    name: str | None = None
    description: str | None = None
    initial_context: dict[str, Any] | None = Field(default=None, description="Default for every conversation.")
    opening: ModelReply | None = Field(default=None, description="Default opening answer for every conversation.")
    actions: ActionStubs | None = Field(default=None, description=_STUBS_DESCRIPTION + " (every conversation)")
    turns: list[TurnSpec] | None = None
    conversations: list[ConversationSpec] | None = None

    @model_validator(mode="after")
    def _turns_or_conversations(self) -> ScriptDocument:
        if (self.turns is None) == (self.conversations is None):
            raise ValueError("a script has either turns: [...] (one conversation) or conversations: [...], not both")
        if self.turns is not None and not self.turns:
            raise ValueError("turns must not be empty")
        if self.conversations is not None and not self.conversations:
            raise ValueError("conversations must not be empty")
        return self


# --- loaded scripts ---------------------------------------------------------------------------

DEFAULT_OPENING = ModelReply(message="Hello! How can I help you today?")


@dataclass(frozen=True)
class ScriptTurn:
    index: int  # 1-based, as in explain records
    spec: TurnSpec
    line: int | None


@dataclass(frozen=True)
class ScriptConversation:
    """One conversation of a script, with the script-level defaults applied."""

    script: Script
    index: int  # 0-based position in the file
    name: str
    initial_context: dict[str, Any] | None
    opening: ModelReply
    turns: tuple[ScriptTurn, ...]
    line: int | None
    actions: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    """Stubbed actions at the start: the script's, then the conversation's own."""

    @property
    def label(self) -> str:
        return f"{self.script.display}::{self.name}"


@dataclass(frozen=True)
class Script:
    file: Path
    display: str  # the path as the user should read it
    definition_path: Path
    document: ScriptDocument
    parsed: ParsedDocument = field(repr=False)
    conversations: tuple[ScriptConversation, ...] = ()

    @property
    def stem(self) -> str:
        name = self.file.name
        for suffix in SCRIPT_SUFFIXES:
            if name.lower().endswith(suffix):
                return name[: -len(suffix)]
        return self.file.stem


def _located(exc: ValidationError, doc: ParsedDocument, file: str) -> ScriptError:
    problems: list[tuple[str, str]] = []
    first_line: int | None = None
    for error in exc.errors():
        loc = tuple(part for part in error["loc"] if not (isinstance(part, str) and part.startswith("function-")))
        path = format_path(loc)
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = f"unknown key {loc[-1]!r}" if loc else "unknown key"
        line = doc.line_for(loc)
        if first_line is None:
            first_line = line
        problems.append((path, message + (f" (line {line})" if line else "")))
    path, message = problems[0]
    return ScriptError(message.rsplit(" (line", 1)[0], file=file, path=path, line=first_line, problems=problems)


def parse_script(text: str | bytes, *, file: str | os.PathLike[str], display: str | None = None) -> Script:
    """Parse and validate a script's text; ``file`` locates the definition and names errors."""
    path = Path(file)
    name = display or os.fspath(file)
    fmt = "json" if path.name.lower().endswith(".json") else "yaml"
    try:
        doc = parse_text(text, file=name, fmt=fmt, max_containers=MAX_SCRIPT_VALUES, kind="script")
    except DefinitionError as exc:  # the shared parser speaks of definitions; this is a script
        raise ScriptError(exc.message, file=name, path=exc.path, line=exc.line) from None
    if not isinstance(doc.data, Mapping):
        raise ScriptError("a script is a mapping with definition: and turns: (or conversations:)", file=name, line=1)
    try:
        model = ScriptDocument.model_validate(doc.data)
    except ValidationError as exc:
        raise _located(exc, doc, name) from None
    definition_path = _resolve_definition(model.definition, path, doc, name)
    script = Script(file=path, display=name, definition_path=definition_path, document=model, parsed=doc)
    object.__setattr__(script, "conversations", tuple(_conversations(script)))
    return script


def _resolve_definition(reference: str, script_file: Path, doc: ParsedDocument, name: str) -> Path:
    candidate = Path(reference).expanduser()
    if not candidate.is_absolute():
        candidate = script_file.parent / candidate
    if candidate.is_file():
        return candidate
    raise ScriptError(
        f"definition {reference!r} not found (looked for {candidate}; paths are relative to the script)",
        file=name,
        path="$.definition",
        line=doc.line_for(("definition",)),
    )


def _conversations(script: Script) -> Iterator[ScriptConversation]:
    model, doc = script.document, script.parsed
    if model.turns is not None:
        specs: list[tuple[tuple[Any, ...], ConversationSpec]] = [
            ((), ConversationSpec(name=model.name, turns=model.turns))
        ]
    else:
        specs = [(("conversations", i), c) for i, c in enumerate(model.conversations or [])]
    seen: set[str] = set()
    for index, (prefix, spec) in enumerate(specs):
        name = spec.name or model.name if prefix == () else spec.name
        name = name or f"conversation {index + 1}"
        if name in seen:
            raise ScriptError(
                f"two conversations are named {name!r}; names identify recordings and JUnit test cases",
                file=script.display,
                path=format_path((*prefix, "name")),
                line=doc.line_for((*prefix, "name")),
            )
        seen.add(name)
        turns = tuple(
            ScriptTurn(index=i + 1, spec=t, line=doc.line_for((*prefix, "turns", i))) for i, t in enumerate(spec.turns)
        )
        yield ScriptConversation(
            script=script,
            index=index,
            name=name,
            initial_context=spec.initial_context if spec.initial_context is not None else model.initial_context,
            opening=spec.opening or model.opening or DEFAULT_OPENING,
            turns=turns,
            line=doc.line_for(prefix) if prefix else 1,
            actions={**(model.actions or {}), **(spec.actions or {})},
        )


def load_script(path: str | os.PathLike[str], *, max_bytes: int = MAX_SCRIPT_BYTES) -> Script:
    """Read a script file; every failure is a located ``ScriptError``."""
    name = os.fspath(path)
    raw = read_capped(name, max_bytes=max_bytes, what="script", error=ScriptError, not_found=ScriptError)
    return parse_script(raw, file=name)


# --- finding scripts --------------------------------------------------------------------------


@dataclass
class Discovery:
    """What ``llm-fsm test PATHS`` will run, and which definitions coverage must account for."""

    scripts: list[Path] = field(default_factory=list)
    definitions: list[Path] = field(default_factory=list)
    """Definition files named on the command line or found in a named folder (coverage targets)."""
    errors: list[ScriptError] = field(default_factory=list)
    recordings: list[Path] = field(default_factory=list)
    """Recordings (``--record``) found among the paths: not definitions, so skipped."""


def _looks_like_definition(path: Path) -> bool:
    """A cheap sniff, so a folder's other JSON/YAML files (data, recordings) are not taken for FSMs."""
    try:
        with path.open("rb") as handle:
            head = handle.read(64 * 1024)
    except OSError:
        return False
    return b"states" in head and b"initial_state" in head


def discover(paths: Sequence[str | os.PathLike[str]]) -> Discovery:
    """Scripts and definitions under ``paths``.

    A script file is taken as is. A folder is searched recursively for
    scripts and for definitions. A definition file brings the scripts next to
    it and in ``conversations/`` beside it that name it as their definition.
    Recordings are listed in ``recordings`` and otherwise skipped.
    """
    found = Discovery()
    scripts: dict[Path, None] = {}
    definitions: dict[Path, None] = {}
    recordings: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if not child.is_file():
                    continue
                if is_script_file(child):
                    scripts.setdefault(child)
                elif is_recording_file(child):
                    recordings.setdefault(child)
                elif child.suffix.lower() in DEFINITION_SUFFIXES and _looks_like_definition(child):
                    definitions.setdefault(child)
        elif path.is_file() and is_script_file(path):
            scripts.setdefault(path)
        elif path.is_file() and is_recording_file(path):
            recordings.setdefault(path)
        elif path.is_file() and path.suffix.lower() in DEFINITION_SUFFIXES:
            definitions.setdefault(path)
            for script in _scripts_beside(path):
                scripts.setdefault(script)
        else:
            found.errors.append(ScriptError("no such file or folder", file=os.fspath(raw)))
    found.scripts = list(scripts)
    found.definitions = list(definitions)
    found.recordings = list(recordings)
    return found


def _scripts_beside(definition: Path) -> Iterable[Path]:
    target = definition.resolve()
    for folder in (definition.parent, definition.parent / "conversations"):
        if not folder.is_dir():
            continue
        for candidate in sorted(folder.iterdir()):
            if not (candidate.is_file() and is_script_file(candidate)):
                continue
            try:
                script = load_script(candidate)
            except ScriptError:
                yield candidate  # let the run report it
                continue
            if script.definition_path.resolve() == target:
                yield candidate


__all__ = [
    "DEFAULT_OPENING",
    "Discovery",
    "Expectation",
    "Matcher",
    "ModelReply",
    "OperatorStep",
    "Script",
    "ScriptConversation",
    "ScriptDocument",
    "ScriptTurn",
    "TurnSpec",
    "RECORDING_FORMAT",
    "discover",
    "is_recording_file",
    "is_script_file",
    "load_script",
    "parse_script",
]


def shown_message(message: str | list[dict[str, Any]] | None) -> str:
    """A script's user message for people: the text, and how many images a message of content parts had."""
    if not isinstance(message, list):
        return message or ""
    texts = [p.get("text", "") for p in message if isinstance(p, dict) and p.get("type") == "text"]
    images = sum(1 for p in message if isinstance(p, dict) and p.get("type") == "image_url")
    text = "\n".join(t for t in texts if isinstance(t, str))
    return f"{text} [{images} image{'s' if images != 1 else ''}]".strip() if images else text
