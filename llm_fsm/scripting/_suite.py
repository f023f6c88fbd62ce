"""A test run over many scripts: find, load, run, record or replay, measure coverage.

The Python face of ``llm-fsm test`` (the command only prints what this
returns), so a benchmark or a CI job can run the same suite without a shell.
Unreadable inputs — a script with a typo, a definition that does not load, a
missing recording — are collected as typed errors and the rest still runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llm_fsm.definition._documents import ParsedDocument
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.errors import DefinitionError, FSMError, ScriptError
from llm_fsm.loading import definition_from_document, read_document
from llm_fsm.scripting._coverage import CoverageReport
from llm_fsm.scripting._recording import (
    Recorder,
    ReplayModel,
    check_unique_names,
    compare,
    read_recording,
    write_recording,
)
from llm_fsm.scripting._results import ConversationResult
from llm_fsm.scripting._runner import ROOT_ID, model_for, run_conversation
from llm_fsm.scripting._scripts import Script, ScriptConversation, discover, load_script


def display_path(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    try:
        return os.fspath(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return os.fspath(path)


@dataclass
class SuiteReport:
    results: list[ConversationResult] = field(default_factory=list)
    errors: list[FSMError] = field(default_factory=list)
    coverage: CoverageReport = field(default_factory=CoverageReport)
    recordings: list[Path] = field(default_factory=list)
    skipped_recordings: list[Path] = field(default_factory=list)
    """Recordings found among the paths and skipped (they are not definitions)."""
    scripts: int = 0
    """Script files found under the paths (0: nothing to run, which the CLI treats as a usage error)."""
    selected: int = 0
    """Conversations left to run after ``match``."""

    @property
    def failed(self) -> list[ConversationResult]:
        return [r for r in self.results if not r.passed]

    @property
    def passed(self) -> bool:
        return not self.errors and not self.failed


class _Definitions:
    """Each definition file read once per run, with its line map for coverage locations."""

    def __init__(self) -> None:
        self._loaded: dict[Path, tuple[FSMDefinition, ParsedDocument]] = {}

    def get(self, path: Path) -> tuple[FSMDefinition, ParsedDocument]:
        key = path.resolve()
        if key not in self._loaded:
            document = read_document(key)
            document = replace(document, file=display_path(path))
            self._loaded[key] = (definition_from_document(document), document)
        return self._loaded[key]


def run_suite(
    paths: Sequence[str | os.PathLike[str]],
    *,
    llm: Any = None,
    model_label: str = "scripted",
    record_dir: str | os.PathLike[str] | None = None,
    replay_dir: str | os.PathLike[str] | None = None,
    on_result: Callable[[ConversationResult], None] | None = None,
    match: str | None = None,
    actions: Any = None,
    retrievers: Any = None,
) -> SuiteReport:
    """Run every script under ``paths``.

    ``llm``: None for each script's own answers; an LLM interface shared by all
    conversations (a live model); or a callable conversation → interface.
    ``match`` keeps only conversations whose ``script::name`` label contains
    it (case-insensitive). ``actions`` and ``retrievers`` are the application's registries (the scripts' stubs
    take precedence). ``replay_dir`` takes the answers from recordings instead and reports
    conversations whose route differs from the recorded one.
    """
    report = SuiteReport()
    found = discover(paths)
    report.errors.extend(found.errors)
    report.scripts = len(found.scripts)
    report.skipped_recordings = list(found.recordings)
    definitions = _Definitions()

    def track(path: Path) -> str | None:
        try:
            definition, document = definitions.get(path)
        except DefinitionError as exc:
            report.errors.append(exc)
            return None
        key = os.fspath(path.resolve())
        report.coverage.track(key, definition, file=document.file or display_path(path), document=document)
        return key

    for path in found.definitions:
        track(path)
    scripts: list[Script] = []
    for path in found.scripts:
        try:
            scripts.append(load_script(display_path(path)))
        except ScriptError as exc:
            report.errors.append(exc)
    runnable: list[tuple[ScriptConversation, str]] = []
    for script in scripts:
        key = track(script.definition_path)
        if key is not None:
            runnable.extend(
                (conversation, key)
                for conversation in script.conversations
                if match is None or match.casefold() in conversation.label.casefold()
            )

    report.selected = len(runnable)
    record = Path(record_dir) if record_dir is not None else None
    replay = Path(replay_dir) if replay_dir is not None else None
    if record is not None:
        try:
            check_unique_names([c for c, _ in runnable])
        except ScriptError as exc:
            report.errors.append(exc)
            return report

    for conversation, key in runnable:
        definition, _ = definitions.get(conversation.script.definition_path)
        recording = None
        if replay is not None:
            try:
                recording = read_recording(replay, conversation)
                model: Any = ReplayModel(recording, source=os.fspath(replay))
            except ScriptError as exc:
                report.errors.append(exc)
                continue
        else:
            model = model_for(conversation, llm)
        recorder = Recorder(model) if record is not None else None

        def load_flow(reference: str) -> FSMDefinition:
            return definitions.get(Path(reference))[0]

        result = run_conversation(
            conversation,
            definition,
            recorder or model,
            load_definition=load_flow,
            actions=actions,
            retrievers=retrievers,
        )
        if recording is not None:
            result.failures.extend(f"replay: {line}" for line in compare(recording, result))
            if recording.get("definition_hash") not in (None, definition.content_hash):
                result.notes.append(
                    "the definition changed since this conversation was recorded"
                    + ("; the route did not" if not result.failures else "")
                )
        if recorder is not None and record is not None:
            label = "replay" if replay is not None else model_label
            report.recordings.append(write_recording(record, result, recorder, model=label))
        if result.opening is not None:
            _count(report, result, conversation, key, track)
        report.results.append(result)
        if on_result is not None:
            on_result(result)
    return report


def _count(
    report: SuiteReport,
    result: ConversationResult,
    conversation: ScriptConversation,
    root_key: str,
    track: Callable[[Path], str | None],
) -> None:
    """Attribute each turn to the definition of the flow it ran in (sub-flows have their own files)."""

    def key_for(fsm_id: str | None) -> str | None:
        if fsm_id is None or fsm_id == ROOT_ID:
            return root_key
        return track(Path(fsm_id))

    coverage = report.coverage.definitions
    touched = {root_key}
    coverage[root_key].visit(result.initial_state or coverage[root_key].initial_state)
    for turn in result.turns:
        record = turn.record
        if record is None:
            continue
        before, after = key_for(turn.definition_before), key_for(turn.definition_after)
        for key in {before, after} - {None}:
            assert key is not None
            coverage[key].call([record])  # matches actions by state and name, so the other flow's are ignored
        verdict = record.verdict
        if before is not None:
            touched.add(before)
            if verdict.moved:
                if verdict.transition_index is not None:
                    coverage[before].take(record.state_before, verdict.transition_index)
                if verdict.target_state != record.state_before:  # an action's on_error moves without a transition
                    coverage[before].visit(verdict.target_state)
                # guarded transitions followed in the same turn run in the same flow, and count as taken
                source = verdict.target_state
                for step in record.chained:
                    if step.transition_index is not None:
                        coverage[before].take(source, step.transition_index)
                    if step.target_state != record.state_after:
                        coverage[before].visit(step.target_state)
                    source = step.target_state
        if after is not None and (after != before or record.state_after != record.state_before):
            touched.add(after)
            if not (after == before and verdict.moved and verdict.target_state == record.state_after):
                coverage[after].visit(record.state_after)
    for key in touched:
        coverage[key].conversations += 1


__all__ = ["SuiteReport", "display_path", "run_suite"]
