"""Conversation test scripts (``*.conv.yaml``): the format, the loader, and finding them.

A script pins down what a definition should do with a given conversation: the
user's messages, what the model answers (for offline runs), and what must be
true after each turn — the state, context values, whether the conversation
ended. ``llm-fsm test`` runs them (``_runner``), measures which declared
transitions they exercised (``_coverage``) and records or replays model
answers (``_recording``).

The format (``_format``, whose names are re-exported here) is strict on purpose:
an unknown key is an error with its path and line, so ``expect: {stat: done}``
fails loudly instead of silently checking nothing. Everything here is parsing
and validation; the file system is touched only to read the script and to
check that its definition exists.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llm_fsm.definition._documents import ParsedDocument, format_path, parse_text
from llm_fsm.errors import DefinitionError, ScriptError
from llm_fsm.loading import read_capped
from llm_fsm.scripting._files import RECORDING_FORMAT, is_recording_file
from llm_fsm.scripting._format import (
    ActionStub,
    ActionStubs,
    ApplicationStep,
    ContextExpectation,
    ConversationSpec,
    Expectation,
    Matcher,
    ModelReply,
    OperatorStep,
    RetrieverStub,
    RetrieverStubs,
    ScriptDocument,
    StubSnippet,
    TransitionReply,
    TurnSpec,
)

SCRIPT_SUFFIXES = (".conv.yaml", ".conv.yml", ".conv.json")
DEFINITION_SUFFIXES = (".json", ".yaml", ".yml")
MAX_SCRIPT_BYTES = 2 * 1024 * 1024

MAX_SCRIPT_VALUES = MAX_SCRIPT_BYTES // 10
"""Values (in JSON: objects and arrays) a script or reply file may hold, counted before any is built: the ratio
definitions have to their byte cap, since 2 MiB of short scalars would compose into several hundred MB."""


def is_script_file(path: str | os.PathLike[str]) -> bool:
    return os.fspath(path).lower().endswith(SCRIPT_SUFFIXES)


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
    retrievers: Mapping[str, Any] = field(default_factory=dict)
    """Stubbed retrievers at the start: the script's, then the conversation's own."""
    language: str | None = None
    """The language the conversation starts in: its own, else the script's (None: the definition's default)."""

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
            retrievers={**(model.retrievers or {}), **(spec.retrievers or {})},
            language=spec.language or model.language,
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
    "ActionStub",
    "ActionStubs",
    "ApplicationStep",
    "ContextExpectation",
    "ConversationSpec",
    "Discovery",
    "Expectation",
    "Matcher",
    "ModelReply",
    "OperatorStep",
    "RetrieverStub",
    "RetrieverStubs",
    "Script",
    "ScriptConversation",
    "ScriptDocument",
    "ScriptTurn",
    "StubSnippet",
    "TransitionReply",
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
