"""``llm-fsm test``: run conversation scripts, print per-turn results and coverage.

An I/O edge over ``llm_fsm.scripting``: it prints PASS/FAIL per turn (with the
explain record of every failing turn), a summary and the coverage table, and
writes JUnit XML for CI. Exit codes: 0 everything passed, 1 a failure or
coverage under ``--min-coverage``, 2 unreadable input (a script, a definition
or a recording), no script found (or none matching ``-k``), a model that is not
configured, or a usage error. Never a traceback.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import click

from llm_fsm.cli._app import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    EXIT_UNREADABLE,
    GuardedCommand,
    _fail,
    action_registry,
    actions_option,
    mcp_option,
    recordings_note,
    retrievers_option,
)
from llm_fsm.scripting._runner import ConversationResult, TurnResult
from llm_fsm.scripting._scripts import shown_message
from llm_fsm.scripting._suite import SuiteReport, display_path, run_suite

EXIT_PASSED, EXIT_FAILED = EXIT_CLEAN, EXIT_FINDINGS


def _explain_lines(result: TurnResult) -> list[str]:
    from llm_fsm.cli._show import explain_text

    if result.record is None:
        return []
    return ["explain record:", *("  " + line for line in explain_text(result.record).splitlines())]


def _route(turn: TurnResult) -> str:
    record = turn.record
    operator, application = turn.turn.spec.operator, turn.turn.spec.application
    if record is None and operator is not None and turn.error is None:
        return f"[{turn.state}] operator {operator.action}"
    if record is None and application is not None and turn.error is None:
        return f"[{turn.state}] application sets {', '.join(application.context)}"
    if record is None and turn.turn.spec.wait is not None and turn.error is None:
        return f"[{turn.state}] waited {turn.turn.spec.wait}, no timer fired"
    if record is None:
        return f"[{turn.state}]" if turn.state else ""
    from llm_fsm.cli._show import turn_path

    return f"{turn_path(record)} {record.verdict.kind}"


def format_result(result: ConversationResult, *, verbose: bool = False) -> list[str]:
    """The lines printed for one conversation."""
    conversation = result.conversation
    status = "PASS" if result.passed else "FAIL"
    lines = [f"{status} {conversation.label}"]
    if verbose and result.opening is not None:
        lines.append(f"       opening: {result.opening}")
    for turn in result.turns:
        where = f"  (line {turn.turn.line})" if turn.turn.line else ""
        if turn.skipped and not turn.failures:
            lines.append(f"  SKIP turn {turn.turn.index}  not run{where}")
            continue
        mark = "PASS" if turn.passed else "FAIL"
        lines.append(f"  {mark} turn {turn.turn.index}  {_route(turn)}{where if not turn.passed else ''}".rstrip())
        if verbose:
            spec = turn.turn.spec
            said = f"user: {shown_message(spec.user)}"
            if spec.operator is not None:
                said = f"operator: {spec.operator.action}"
            elif spec.application is not None:
                said = f"application: {json.dumps(spec.application.context, ensure_ascii=False, default=str)}"
            elif spec.wait is not None:
                said = f"wait: {spec.wait}"
            lines.append(f"       {said}")
            if turn.reply is not None:
                lines.append(f"       reply: {turn.reply}")
        if not turn.passed:
            lines.extend("       " + failure for failure in turn.failures)
            lines.extend("       " + line for line in _explain_lines(turn))
    for failure in result.failures:
        lines.append(f"  FAIL {failure}")
    for note in result.notes:
        lines.append(f"  NOTE {note}")
    return lines


def summary(report: SuiteReport) -> str:
    total = len(report.results)
    failed = len(report.failed)
    turns = sum(len(r.turns) for r in report.results)
    failed_turns = sum(1 for r in report.results for t in r.turns if not t.passed)
    text = (
        f"{total} conversation{'s' if total != 1 else ''}: {total - failed} passed, {failed} failed; "
        f"{turns} turn{'s' if turns != 1 else ''}, {failed_turns} failed"
    )
    if report.errors:
        text += f"; {len(report.errors)} unreadable input{'s' if len(report.errors) != 1 else ''}"
    return text


# --- JUnit XML ----------------------------------------------------------------------------------


def junit_xml(report: SuiteReport) -> bytes:
    """One testcase per conversation; unreadable inputs as testcases with an error."""
    suite = ET.Element("testsuite", name="llm-fsm test")
    failures = errors = 0
    seconds = 0.0
    for result in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=result.conversation.script.display,
            name=result.conversation.name,
            time=f"{result.seconds:.3f}",
        )
        seconds += result.seconds
        if not result.passed:
            failures += 1
            problems = [f"turn {t.turn.index}: {f}" for t in result.turns for f in t.failures] + list(result.failures)
            failure = ET.SubElement(
                case, "failure", message=problems[0] if problems else "failed", type="AssertionError"
            )
            failure.text = "\n".join(format_result(result))
    for error in report.errors:
        errors += 1
        case = ET.SubElement(suite, "testcase", classname=str(getattr(error, "file", None) or "llm-fsm"), name="load")
        element = ET.SubElement(case, "error", message=str(error).splitlines()[0], type=type(error).__name__)
        element.text = str(error)
    suite.set("tests", str(len(report.results) + len(report.errors)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("time", f"{seconds:.3f}")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document


# --- the command ---------------------------------------------------------------------------------


def _percentage(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not 0 <= value <= 100:
        raise click.BadParameter("must be between 0 and 100")
    return value


@click.command("test", cls=GuardedCommand)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--model",
    "-m",
    default=None,
    help="Run against this live model (litellm name, or 'local') instead of the scripts' answers.",
)
@click.option("--temperature", type=float, default=None, help="Sampling temperature for --model.")
@click.option(
    "--junit-xml",
    "junit_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write JUnit XML here (one testcase per conversation).",
)
@click.option(
    "--min-coverage",
    type=float,
    default=None,
    callback=_percentage,
    help="Fail when a definition's transition coverage (percent) is below this.",
)
@click.option(
    "--record",
    "record_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Save every model request and answer, one JSON file per conversation, in this folder.",
)
@click.option(
    "--replay",
    "replay_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Answer from recordings in this folder; report conversations whose route changed.",
)
@click.option(
    "--coverage/--no-coverage", "show_coverage", default=True, show_default=True, help="Print the coverage table."
)
@click.option(
    "--match",
    "-k",
    "match",
    default=None,
    metavar="TEXT",
    help="Run only conversations whose 'script::name' contains TEXT.",
)
@actions_option
@retrievers_option
@mcp_option
@click.option("--verbose", "-v", is_flag=True, help="Also print each user message and reply.")
@click.pass_context
def test_command(
    ctx: click.Context,
    paths: tuple[str, ...],
    model: str | None,
    temperature: float | None,
    junit_path: str | None,
    min_coverage: float | None,
    record_dir: str | None,
    replay_dir: str | None,
    show_coverage: bool,
    match: str | None,
    actions: str | None,
    retrievers: str | None,
    mcp: str | None,
    verbose: bool,
) -> None:
    """Run conversation scripts (*.conv.yaml) against their definitions.

    PATHS are scripts, definitions (their scripts are found beside them and in
    conversations/) or folders (searched recursively). By default the model's
    answers come from the scripts, so runs are offline and deterministic.

    \b
    Examples:
      llm-fsm test definitions/ --min-coverage 100
      llm-fsm test definitions/conversations/coffee_order.conv.yaml -v
      llm-fsm test definitions/ --model gpt-4o-mini --record recordings/
      llm-fsm test definitions/ --replay recordings/ --junit-xml report.xml
      llm-fsm test definitions/ -k coffee_order --model local
      llm-fsm test definitions/ --retrievers definitions/retrievers.py:registry
    """
    # an error that stops the run (a model that is not configured, a JUnit file that cannot be written)
    # reaches the guard, which applies the CLI's exit-code policy
    ctx.exit(
        _run(
            paths,
            model,
            temperature,
            junit_path,
            min_coverage,
            record_dir,
            replay_dir,
            show_coverage,
            match,
            verbose,
            actions,
            retrievers,
            mcp,
        )
    )


def _run(
    paths: tuple[str, ...],
    model: str | None,
    temperature: float | None,
    junit_path: str | None,
    min_coverage: float | None,
    record_dir: str | None,
    replay_dir: str | None,
    show_coverage: bool,
    match: str | None,
    verbose: bool,
    actions: str | None = None,
    retrievers: str | None = None,
    mcp: str | None = None,
) -> int:
    if model and replay_dir:
        click.echo("error: --replay answers from recordings; it cannot be combined with --model", err=True)
        return EXIT_UNREADABLE
    if model and model.startswith("scripted:"):
        _fail("--model scripted:FILE is for chat and run; llm-fsm test answers from each script's model: by default")
        return EXIT_UNREADABLE
    llm: Any = None
    label = "scripted"
    if model:
        from llm_fsm.cli.chat import make_llm

        llm = make_llm(model, temperature=temperature)
        label = model

    def show(result: ConversationResult) -> None:
        for line in format_result(result, verbose=verbose):
            click.echo(line)

    registry = action_registry(actions, mcp)
    found = None
    if retrievers:
        from llm_fsm.runtime._retrievers import load_retrievers

        found = load_retrievers(retrievers)
    report = run_suite(
        paths,
        llm=llm,
        model_label=label,
        record_dir=record_dir,
        replay_dir=replay_dir,
        on_result=show,
        match=match,
        actions=registry,
        retrievers=found,
    )
    for error in report.errors:
        click.echo(f"ERROR {error}", err=True)
    for note in recordings_note([display_path(p) for p in report.skipped_recordings]):
        click.echo(f"NOTE {note}")
    if not report.errors and not report.selected:  # nothing ran: a wrong path or filter, never a pass
        if not report.scripts:
            _fail(
                f"no conversation scripts (*.conv.yaml) found in: {', '.join(paths)} "
                "(a definition's scripts are looked for beside it and in conversations/)"
            )
        else:
            _fail(f"no conversation of the {report.scripts} script(s) found matches -k {match!r}")
        return EXIT_UNREADABLE
    click.echo("")
    click.echo(summary(report))
    if report.recordings and record_dir:
        click.echo(
            f"recorded {len(report.recordings)} conversation{'s' if len(report.recordings) != 1 else ''} in"
            f" {record_dir}"
        )
    below = report.coverage.below(min_coverage) if min_coverage is not None else []
    if show_coverage or below:
        click.echo("")
        click.echo(report.coverage.table())
    for coverage in below:
        click.echo(
            f"coverage of {coverage.file} is {coverage.transition_percent:.1f}% of transitions, "
            f"below --min-coverage {min_coverage:g}"
        )
    if junit_path:
        Path(junit_path).parent.mkdir(parents=True, exist_ok=True)
        Path(junit_path).write_bytes(junit_xml(report))
    if report.errors:
        return EXIT_UNREADABLE
    if report.failed or below:
        return EXIT_FAILED
    return EXIT_PASSED


__all__ = ["format_result", "junit_xml", "summary", "test_command"]
