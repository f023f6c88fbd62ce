"""``fsm-lint --prove``: each definition that loads is proved after it is linted (docs/prove.md).

Prover findings are diagnostics like lint's (code, file, line, path), with the path of turns that shows them and,
with ``--counterexamples DIR``, the conversation script that replays it (``llm-fsm test DIR``). A lint finding the
prover shows reachable is named in the prover's message ("confirms FSM009").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from llm_fsm.lint._rules import RULES_BY_CODE, Diagnostic

#: lint findings a prover finding can confirm, by the property that shows the same problem reachable
_CONFIRMS = {
    "no_trap": ("FSM009",),
    "progress": ("FSM009", "FSM014", "FSM015", "FSM041", "FSM032"),
    "flows_return": ("FSM021", "FSM022", "FSM023", "FSM024", "FSM025"),
    "no_model_gate": (),
}


@dataclass
class Proved:
    """One file's proof, for the text and JSON outputs."""

    file: str
    report: Any
    diagnostics: list[Diagnostic]
    seconds: float


def prove_roots(
    roots: Sequence[tuple[str, Any]],
    flow_files: Any,
    lint_diagnostics: Sequence[Diagnostic],
    *,
    max_configurations: int,
    counterexamples: str | None,
) -> list[Proved]:
    import time

    from llm_fsm.lint import prove, write_counterexamples

    proved: list[Proved] = []
    for file, definition in roots:
        started = time.perf_counter()
        report = prove(definition, resolve=flow_files, max_configurations=max_configurations)
        seconds = time.perf_counter() - started
        if counterexamples is not None and report.findings:
            write_counterexamples(report, counterexamples, file)
        own = [d for d in lint_diagnostics if d.file == file]
        diagnostics = [_diagnostic(file, finding, flow_files, definition, own) for finding in report.findings]
        proved.append(Proved(file, report, diagnostics, seconds))
    return proved


def _diagnostic(file: str, finding: Any, flow_files: Any, definition: Any, own: list[Diagnostic]) -> Diagnostic:
    rule = RULES_BY_CODE[finding.code]
    line = flow_files.line_for(definition, ("states", finding.state)) if finding.flow is None else None
    confirmed = sorted(
        {
            d.code
            for d in own
            if d.code in _CONFIRMS.get(finding.property, ()) and f".states.{finding.state}" in (d.path + ".")
        }
    )
    message = f"{finding.property}: {finding.message}"
    if finding.flow is not None:
        message += f" (in sub-flow {finding.flow!r})"
    if confirmed:
        message += f"; confirms {', '.join(confirmed)}, reachable"
    turns = len(finding.path)
    hint = f"a path of {turns} turn{'s' if turns != 1 else ''} shows it"
    if finding.counterexample:
        hint += f": llm-fsm test {finding.counterexample}"
    else:
        hint += " (--counterexamples DIR writes it as a script)"
    return Diagnostic(rule.code, rule.name, rule.severity, message, hint, file, f"$.states.{finding.state}", line)


def status_line(proved: Proved) -> str:
    report = proved.report
    parts = []
    for name, result in report.properties.items():
        text = f"{name} {result.status}"
        if result.reason and result.status == "unknown":
            text += f" ({result.reason})"
        parts.append(text)
    scope = f"{report.explored:,} configurations, {report.turns:,} turns, {proved.seconds:.1f} s"
    if not report.complete:
        scope += f", bound {report.bound:,} reached"
    return f"{proved.file}: proof: " + "; ".join(parts) + f" [{scope}]"


def as_json(proved: Proved) -> dict[str, Any]:
    document: dict[str, Any] = proved.report.to_dict()
    document["file"] = proved.file
    document["seconds"] = round(proved.seconds, 3)
    document["findings"] = [
        {**finding, "file": proved.file, "line": diagnostic.line}
        for finding, diagnostic in zip(document["findings"], proved.diagnostics, strict=True)
    ]
    return document


def echo_text(proved: list[Proved], format_text: Any) -> None:
    for one in proved:
        for diagnostic in one.diagnostics:
            click.echo(format_text(diagnostic))
        click.echo(status_line(one))


__all__ = ["Proved", "as_json", "echo_text", "prove_roots", "status_line"]
