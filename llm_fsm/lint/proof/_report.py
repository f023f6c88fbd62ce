"""What a proof says: each property's status, the findings with their paths, and counterexample scripts.

A finding's path is a list of real turns (the user's words, the model's reply, the actions' results), so it is
also a conversation script: ``script`` writes it in the form ``llm-fsm test`` runs, with the bad configuration as
the last turn's expectations. A property is ``proved`` only when the exploration was complete and exact; a bound
hit, an approximated configuration or a guard the cells cannot decide makes it ``unknown``, with the reason.
"""

from __future__ import annotations

import os
import pathlib
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import yaml

PROPERTIES = ("no_trap", "progress", "no_model_gate", "flows_return")
CODES = {"no_trap": "FSM042", "progress": "FSM043", "no_model_gate": "FSM044", "flows_return": "FSM045"}
Status = Literal["proved", "failed", "unknown"]


@dataclass(frozen=True)
class ProofStep:
    """One turn of a path: what the user said, what the model answered, what the actions gave, where it left."""

    user: str
    model: dict[str, Any]
    actions: dict[str, dict[str, Any]]
    state: str
    stack: tuple[str, ...]
    application: dict[str, Any] | None = None
    """Not a turn: the application wrote these keys between turns (a script's ``application:`` step)."""


@dataclass(frozen=True)
class ProofFinding:
    code: str
    property: str
    state: str
    message: str
    path: tuple[ProofStep, ...]
    flow: str | None = None
    """The sub-flow the state belongs to (None: the root definition)."""
    transition: str | None = None
    """no_model_gate: the target of the transition the model opens."""
    called: str | None = None
    """flows_return: the sub-flow called from ``state`` that does not return."""
    file: str | None = None
    line: int | None = None
    counterexample: str | None = None
    expect: dict[str, Any] = field(default_factory=dict)
    """What the last turn of the path shows (``llm-fsm test`` expectations: state, stack, context, mode)."""
    opening_actions: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class PropertyResult:
    name: str
    status: Status
    reason: str | None = None


@dataclass
class ProofReport:
    """The outcome of ``llm_fsm.lint.prove``."""

    definition: str
    properties: dict[str, PropertyResult]
    findings: list[ProofFinding]
    explored: int
    bound: int
    complete: bool
    turns: int
    reachable: frozenset[tuple[tuple[str, ...], str]]
    states: tuple[str, ...]
    unknown: list[ProofFinding] = field(default_factory=list)
    """Would-be findings the checker could not decide (they rest on an approximation): reported, never failed."""

    def status(self, name: str) -> Status:
        return self.properties[name].status

    @property
    def failed(self) -> bool:
        return any(result.status == "failed" for result in self.properties.values())

    @property
    def state_status(self) -> dict[str, dict[str, str]]:
        """Per state of the root definition, each property's status there: "failed" where a finding names the
        state, "unknown" where the property is unknown, else "proved" (nothing breaks it at this state, even when
        it fails elsewhere: a diagram shows where)."""
        out: dict[str, dict[str, str]] = {}
        for state in self.states:
            out[state] = {
                name: "unknown" if result.status == "unknown" else "proved" for name, result in self.properties.items()
            }
        for finding in self.findings:
            if finding.flow is None and finding.state in out:
                out[finding.state][finding.property] = "failed"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "properties": {name: asdict(result) for name, result in self.properties.items()},
            "findings": [_finding_dict(f) for f in self.findings],
            "unknown": [_finding_dict(f) for f in self.unknown],
            "explored": self.explored,
            "turns": self.turns,
            "bound": self.bound,
            "complete": self.complete,
            "states": self.state_status,
        }

    def script(self, finding: ProofFinding, definition_path: str, *, relative_to: str | None = None) -> dict[str, Any]:
        """The counterexample as a conversation script (docs/testing.md): the path's turns, then expectations
        that state the bad configuration."""
        reference = definition_path
        if relative_to is not None:
            reference = os.path.relpath(os.path.abspath(definition_path), os.path.abspath(relative_to))
        turns: list[dict[str, Any]] = []
        for index, step in enumerate(finding.path):
            turn: dict[str, Any]
            if step.application is not None:
                turn = {"application": {"context": step.application}}
            else:
                turn = {"user": step.user, "model": step.model}
                if step.actions:
                    turn["actions"] = step.actions
            expect: dict[str, Any] = {"state": step.state, "stack": list(step.stack)}
            if index == len(finding.path) - 1:
                expect.update(finding.expect)
            turn["expect"] = expect
            turns.append(turn)
        conversation: dict[str, Any] = {"name": f"{finding.code} {finding.property} at {finding.state}"}
        if finding.opening_actions:
            conversation["actions"] = finding.opening_actions
        conversation["turns"] = turns
        return {"definition": reference, "conversations": [conversation]}


def _finding_dict(finding: ProofFinding) -> dict[str, Any]:
    return {
        "code": finding.code,
        "property": finding.property,
        "state": finding.state,
        "flow": finding.flow,
        "transition": finding.transition,
        "called": finding.called,
        "message": finding.message,
        "file": finding.file,
        "line": finding.line,
        "path": [asdict(step) for step in finding.path],
        "counterexample": finding.counterexample,
    }


class _NoAliases(yaml.SafeDumper):
    """Scripts refuse YAML aliases (alias bombs), and a stub given on two turns is one object: written twice."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", text).strip("_")[:60] or "finding"


def write_counterexamples(
    report: ProofReport, directory: str | os.PathLike[str], definition_path: str
) -> list[pathlib.Path]:
    """Write one ``*.conv.yaml`` per finding into ``directory``; each finding's ``counterexample`` names its file."""
    folder = pathlib.Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[pathlib.Path] = []
    stem = _slug(pathlib.Path(definition_path).stem)
    for number, finding in enumerate(report.findings, 1):
        name = f"{stem}.{number:02d}.{finding.property}.{_slug(finding.state)}.conv.yaml"
        target = folder / name
        document = report.script(finding, definition_path, relative_to=str(folder))
        header = f"# {finding.code} {finding.property}: {finding.message}\n# Run: llm-fsm test {target}\n"
        text = yaml.dump(document, Dumper=_NoAliases, sort_keys=False, allow_unicode=True)
        target.write_text(header + text, encoding="utf-8")
        report.findings[number - 1] = _with_file(finding, str(target))
        written.append(target)
    return written


def _with_file(finding: ProofFinding, path: str) -> ProofFinding:
    values = {name: getattr(finding, name) for name in finding.__dataclass_fields__}
    values["counterexample"] = path
    return ProofFinding(**values)


__all__ = [
    "CODES",
    "PROPERTIES",
    "ProofFinding",
    "ProofReport",
    "ProofStep",
    "PropertyResult",
    "Status",
    "write_counterexamples",
]
