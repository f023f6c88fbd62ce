"""``llm-fsm audit verify``, ``llm-fsm replay`` and ``llm-fsm migrate``: the recorded decisions of a store, checked,
replayed against a changed definition, and live conversations moved to it.

All three walk the store a conversation at a time (``audit._walk``): memory stays bounded whatever the store
holds, and a line of progress goes to stderr every two seconds.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from llm_fsm.cli._app import EXIT_FINDINGS, GuardedCommand, GuardedGroup
from llm_fsm.cli._store_options import _store_option, _store_url
from llm_fsm.errors import UsageError

if TYPE_CHECKING:
    from llm_fsm.audit._replay import ReplayReport
    from llm_fsm.definition._migrations import Migrations
    from llm_fsm.definition._model import FSMDefinition
    from llm_fsm.manager import FSMManager

AUDIT_KEY_ENV = "LLM_FSM_AUDIT_KEY"
"""The key of the turn records' hash chain (``EngineConfig.audit_key``), for commands that check it."""

_format_option = click.option(
    "--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True
)
_quiet_option = click.option("--quiet", is_flag=True, help="No progress lines on stderr.")


@click.group("audit", cls=GuardedGroup)
def audit_group() -> None:
    """Check the recorded decisions of stored conversations."""


@audit_group.command("verify", cls=GuardedCommand)
@click.argument("conversation_ids", nargs=-1)
@_store_option
@_format_option
@click.option("--keep-going", is_flag=True, help="Check every conversation (default: stop at the first that fails).")
@click.option(
    "--max-turn-records",
    type=click.IntRange(min=1),
    default=None,
    help="The turn records the conversations were saved keeping (EngineConfig.max_turn_records, default 50): a log "
    "holding fewer, starting after turn 1, had records removed rather than trimmed.",
)
@_quiet_option
def verify_command(
    conversation_ids: tuple[str, ...],
    store: str | None,
    output_format: str,
    keep_going: bool,
    max_turn_records: int | None,
    quiet: bool,
) -> None:
    """Check the hash chain of conversations' turn records and decide every recorded turn again, with the
    definition version it ran on and the answers it was given (no model, no action is called).

    Exits 1 at the first conversation whose record was edited or whose decision comes out differently, naming
    it and the turn; 0 when every conversation checked verifies. With no ids, every conversation of the store.
    Text prints a line per conversation as it is checked; JSON lists the failed conversations and those named,
    with totals. A key for the chain (EngineConfig.audit_key) is read from $LLM_FSM_AUDIT_KEY.

    \b
    Example:
      llm-fsm audit verify --store sqlite:///conversations.db
      llm-fsm audit verify 6f1c2a3e-… --format json
    """
    from llm_fsm.audit._verify import Verification, VerifyTotals, unreadable, verify_instance
    from llm_fsm.audit._walk import Progress, conversations

    manager = _manager(store, max_turn_records)
    progress = Progress(None if quiet else _progress("verify"))
    totals = VerifyTotals()
    listed: list[dict[str, Any]] = []  # JSON: the failed conversations and those named, never the whole store
    named = set(conversation_ids)

    def done(report: Verification) -> None:
        totals.add(report)
        if output_format == "text":
            click.echo(_verification_line(report))
        elif not report.ok or report.conversation_id in named:
            listed.append(report.as_dict())

    def undecodable(summary: Any, error: Exception) -> None:  # a record the store cannot decode: a failed check
        report = unreadable(summary.conversation_id, error)
        report.fsm_id = summary.fsm_id
        done(report)

    versions = None
    for _, instance in conversations(manager.store, ids=list(conversation_ids) or None, unreadable=undecodable):
        if totals.failed and not keep_going:
            break
        versions = manager.versions_for(instance, versions)
        done(verify_instance(instance, versions, config=manager.config, key=manager.config.audit_key))
        progress.tick(instance)
    summary = totals.as_dict()
    if output_format == "json":
        click.echo(json.dumps({"summary": summary, "conversations": listed}, indent=2, ensure_ascii=False))
    else:
        click.echo(
            f"{totals.conversations} conversation(s), {totals.turns} turn record(s): {totals.verified} verified, "
            f"{totals.not_recorded} from before recording, {totals.not_recomputable} not recomputable, "
            f"{totals.failed} conversation(s) failed"
        )
    if totals.failed:
        raise SystemExit(EXIT_FINDINGS)


def _verification_line(report: Any) -> str:
    cid = report.conversation_id
    if report.problem is not None:
        turn = f", turn {report.problem_turn}" if report.problem_turn is not None else ""
        return f"FAILED {cid}{turn}: {report.problem}"
    failure = report.failure
    if failure is not None:
        return f"FAILED {cid}, turn {failure.index} ({failure.status}): {'; '.join(failure.details)}"
    trimmed = f" (records before turn {report.first_kept} trimmed)" if (report.first_kept or 1) > 1 else ""
    return f"ok {cid}: {report.count('verified')} of {len(report.turns)} turn(s) verified{trimmed}"


# --- replay and migrate -------------------------------------------------------------------------------------------

_definition_option = click.option(
    "--definition",
    "definition_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="The changed definition (the candidate).",
)
_migrations_option = click.option(
    "--migrations",
    "migrations_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="A migrations block in a file of its own (default: the definition's own migrations:).",
)
_fsm_id_option = click.option(
    "--fsm-id",
    default=None,
    help="The id the conversations were started with, when the candidate's name changed (default: its name).",
)


@click.command("replay", cls=GuardedCommand)
@_store_option
@_definition_option
@_migrations_option
@_fsm_id_option
@click.option("--since", default=None, help="Only turns since: 7d, 12h, 30m, or a date (2026-11-01).")
@click.option(
    "--max-changed",
    default=None,
    help="Exit 1 when more recorded decisions than this change: 0.5% or 0.005 (default: any number may change).",
)
@_format_option
@_quiet_option
def replay_command(
    store: str | None,
    definition_path: str,
    migrations_path: str | None,
    fsm_id: str | None,
    since: str | None,
    max_changed: str | None,
    output_format: str,
    quiet: bool,
) -> None:
    """Decide every stored turn of a definition's conversations again with a changed definition, calling no model,
    and list the decisions that change and the live conversations it could not hold.

    Exits 1 when an in-flight conversation would be stranded (a state, flow or value the candidate no longer
    declares, and no migration maps it) or more decisions change than --max-changed; 0 otherwise.

    \b
    Example:
      llm-fsm replay --store sqlite:///prod.db --definition loan_v2.yaml
      llm-fsm replay --store redis://localhost:6379/0 --definition loan_v2.yaml --since 7d --max-changed 0.5%
    """
    from llm_fsm.audit._replay import Replayer
    from llm_fsm.audit._versions import Versions
    from llm_fsm.audit._walk import Progress, conversations

    candidate, migrations, flows = _candidate(definition_path, migrations_path)
    limit = _fraction(max_changed) if max_changed is not None else None
    cutoff = _since(since) if since is not None else None
    manager = _manager(store)
    progress = Progress(None if quiet else _progress("replay"))
    versions = Versions(getattr(manager.store, "load_definition_version", None))
    replayer = Replayer(candidate, versions=versions, migrations=migrations, flows=flows, since=cutoff)
    walk = conversations(manager.store, name=candidate.name, fsm_id=fsm_id, unreadable=replayer.unreadable)
    for _, instance in walk:
        manager.versions_for(instance, versions)
        replayer.add(instance)
        report = replayer.report
        progress.tick(instance, f", {report.changed_count:,} changed, {report.stranded_count:,} stranded")
    report = replayer.report
    reasons = report.fails(limit)
    if output_format == "json":
        click.echo(json.dumps({**report.as_dict(), "fails": reasons}, indent=2, ensure_ascii=False))
    else:
        for line in _replay_lines(report, definition_path, reasons):
            click.echo(line)
    if reasons:
        raise SystemExit(EXIT_FINDINGS)


def _replay_lines(report: ReplayReport, path: str, reasons: list[str]) -> list[str]:
    summary = report.summary()
    lines = [
        f"replay of {path} ({report.definition}, version {report.version}): {summary['conversations']} "
        f"conversation(s), {summary['in_flight']} in flight; {summary['turns']} recorded turn(s) decided again",
        f"  {summary['changed']} decision(s) change ({report.changed_ratio:.2%}); {summary['unchanged']} unchanged; "
        f"{summary['not_recorded']} from before recording; {summary['not_recomputable']} not recomputable; "
        f"{summary['unreadable']} conversation(s) unreadable",
    ]
    for change in report.changed:
        lines.append(f"  changed: conversation {change.conversation_id}, turn {change.turn}")
        lines += [f"    {difference}" for difference in change.differences]
        if change.unrecorded:
            lines.append(f"    (rests on answers production never gave: {', '.join(change.unrecorded)})")
    if report.changed_count > len(report.changed):
        lines.append(f"  … and {report.changed_count - len(report.changed)} more changed turn(s) (see --format json)")
    for conversation in report.stranded:
        lines.append(f"  stranded: conversation {conversation.conversation_id} in {conversation.state}")
        lines += [f"    {problem.message}" for problem in conversation.problems]
    lines.append("FAIL: " + "; ".join(reasons) if reasons else "ok: no in-flight conversation is stranded")
    return lines


@click.command("migrate", cls=GuardedCommand)
@_store_option
@_definition_option
@_migrations_option
@_fsm_id_option
@click.option("--dry-run", is_flag=True, help="Say what would move and what could not, and change nothing.")
@_format_option
@_quiet_option
def migrate_command(
    store: str | None,
    definition_path: str,
    migrations_path: str | None,
    fsm_id: str | None,
    dry_run: bool,
    output_format: str,
    quiet: bool,
) -> None:
    """Move the in-flight conversations of a definition to its new version, by its migrations, each with
    compare-and-set (a turn in progress finishes first) and recorded in its trail.

    A conversation the new version cannot hold stays on its own version, unchanged, and is listed; exit 1 then,
    0 when every conversation moved or already ran on it. Text prints a line per conversation as it goes; JSON
    lists those that did not move (stranded, skipped), with totals.

    \b
    Example:
      llm-fsm migrate --store sqlite:///prod.db --definition loan_v2.yaml --dry-run
      llm-fsm migrate --store sqlite:///prod.db --definition loan_v2.yaml --migrations v1_to_v2.yaml
    """
    from llm_fsm.audit._walk import Progress, conversations
    from llm_fsm.engine._migrate import migrate as migrate_instance
    from llm_fsm.errors import ConcurrentUpdateError, ConversationNotFoundError, MigrationError

    candidate, migrations, flows = _candidate(definition_path, migrations_path)
    manager = _manager(store)
    progress = Progress(None if quiet else _progress("migrate"))
    counts = dict.fromkeys(_OUTCOMES, 0)
    listed: list[dict[str, Any]] = []  # JSON: the conversations that did not move, never the whole store

    def done(outcome: dict[str, Any]) -> None:
        counts[outcome["outcome"]] += 1
        if output_format == "text" and outcome["outcome"] != "unchanged":
            problems = "; ".join(p["message"] for p in outcome.get("problems", []))
            click.echo(f"{outcome['outcome']}: {outcome['conversation_id']} in {outcome['state']} {problems}".rstrip())
        elif output_format == "json" and outcome["outcome"] in ("stranded", "skipped"):
            listed.append(outcome)

    def undecodable(summary: Any, error: Exception) -> None:
        message = f"{type(error).__name__}: {error}"
        done(
            {
                "conversation_id": summary.conversation_id,
                "state": summary.current_state,
                "outcome": "skipped",
                "problems": [{"message": message}],
            }
        )

    walk = conversations(manager.store, name=candidate.name, fsm_id=fsm_id, unreadable=undecodable)
    for summary, instance in walk:
        progress.tick(instance)
        if instance.ended:
            continue
        cid = instance.conversation_id
        result = migrate_instance(instance, candidate, migrations, flows=flows)
        outcome: dict[str, Any] = {"conversation_id": cid, "state": instance.current_state}
        if not result.ok:
            outcome |= {"outcome": "stranded", "problems": [p.to_dict() for p in result.problems]}
        elif not result.changes:
            outcome["outcome"] = "unchanged"
        elif dry_run:
            outcome["outcome"] = "would_move"
        else:
            try:
                manager.migrate(
                    cid, candidate, migrations=migrations, flows=flows, user_id=summary.user_id, room_id=summary.room_id
                )
                outcome["outcome"] = "moved"
            except MigrationError as exc:  # it changed under us into something the new version cannot hold
                outcome |= {"outcome": "stranded", "problems": [{"message": str(exc)}]}
            except (ConversationNotFoundError, ConcurrentUpdateError) as exc:
                outcome |= {"outcome": "skipped", "problems": [{"message": f"{type(exc).__name__}: {exc}"}]}
        done(outcome)
    if output_format == "json":
        payload = {"definition": candidate.name, "version": candidate.content_hash, "dry_run": dry_run}
        click.echo(json.dumps({**payload, "summary": counts, "conversations": listed}, indent=2, ensure_ascii=False))
    else:
        moves = ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in counts.items())
        click.echo(f"{candidate.name} version {candidate.content_hash}{' (dry run)' if dry_run else ''}: {moves}")
    if counts["stranded"]:
        raise SystemExit(EXIT_FINDINGS)


_OUTCOMES = ("moved", "would_move", "unchanged", "stranded", "skipped")


# --- shared --------------------------------------------------------------------------------------------------------


def _manager(store: str | None, max_turn_records: int | None = None) -> FSMManager:
    from llm_fsm.engine import EngineConfig
    from llm_fsm.manager import FSMManager
    from llm_fsm.stores import open_store

    key = os.environ.get(AUDIT_KEY_ENV)
    config = EngineConfig(audit_key=key.encode() if key else None)
    if max_turn_records is not None:
        config = dataclasses.replace(config, max_turn_records=max_turn_records)
    return FSMManager(store=open_store(_store_url(store)), config=config)


def _candidate(path: str, migrations_path: str | None) -> tuple[FSMDefinition, Migrations | None, dict[str, Any]]:
    """The candidate, the migrations to apply (its own block unless a file is given) and its sub-flows by name."""
    from llm_fsm.loading import load_fsm_definition, load_migrations, sub_flows

    candidate = load_fsm_definition(Path(path))
    migrations = load_migrations(migrations_path) if migrations_path is not None else candidate.migrations
    flows, missing = sub_flows(candidate)
    if missing:
        click.echo(
            f"warning: sub-flow(s) {', '.join(missing)} of {path} cannot be loaded; turns that need them are "
            "reported as not recomputable",
            err=True,
        )
    return candidate, migrations, flows


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _since(text: str) -> float:
    """``7d`` / ``12h`` / ``30m`` ago, or an ISO date or date-time (UTC when it names no zone), as epoch seconds."""
    match = _DURATION.match(text.strip())
    if match:
        return time.time() - float(match.group(1)) * _SECONDS[match.group(2)]
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--since {text!r}: say 7d, 12h, 30m or a date such as 2026-11-01") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).timestamp()


def _fraction(text: str) -> float:
    """``0.5%`` → 0.005; ``0.005`` → 0.005."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"--max-changed {text!r}: say 0.5% or 0.005") from None
    if not 0 <= value <= 1:
        raise UsageError(f"--max-changed {text!r}: between 0% and 100%")
    return value


def _progress(command: str) -> Any:
    return lambda line: click.echo(f"{command}: {line}", err=True)


__all__ = ["audit_group", "migrate_command", "replay_command", "verify_command"]
