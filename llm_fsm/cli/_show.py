"""Records as a person reads them in the terminal: a turn (where it went, why, the actions it ran), the explain
record, the audit trail, and the table of stored conversations."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from llm_fsm.engine._records import TurnRecord


def describe_turn(record: TurnRecord) -> str:
    """One line: where the turn left the conversation, and why."""
    verdict = record.verdict
    if record.state_before == record.state_after:
        where = f"[{record.state_after}]"
    else:
        where = f"[{record.state_before} → {record.state_after}]"
    return f"{where} {verdict.kind}: {verdict.reason}"


def describe_actions(record: TurnRecord) -> list[str]:
    """One line per action the turn ran: which, its outcome and time, and what a failure did."""
    lines = []
    for action in record.actions:
        line = f"  action {action.call} ({action.when} {action.state}): {action.outcome}"
        if action.outcome != "skipped":
            line += f", {action.duration_ms:.0f} ms"
        if action.error:
            line += f" — {action.error}" + (f" → on_error {action.on_error}" if action.on_error else "")
        lines.append(line)
    return lines


def explain_text(record: TurnRecord) -> str:
    """The explain record as indented JSON, for people."""
    return json.dumps(record.model_dump(mode="json"), indent=2, ensure_ascii=False)


def trace_lines(trace: Iterable[Any]) -> list[str]:
    """One line per trace event: time, event, and its data as key=value."""
    import datetime

    lines = []
    for event in trace:
        when = datetime.datetime.fromtimestamp(event.timestamp, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
        details = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in event.data.items())
        lines.append(f"{when}  {event.event:<15} {details}")
    return lines


def conversation_lines(
    summaries: Iterable[Any], usages: Sequence[Any] | None = None, modes: Sequence[str] | None = None
) -> list[str]:
    """A table: id, status, state, user, room, (calls, tokens, cost,) (mode,) definition; ``-`` for no user or room.

    mode: ``bot``, or ``human`` while a person has the conversation (handed off).
    """
    summaries = list(summaries)
    rows: list[tuple[Any, ...]] = [
        (s.conversation_id, s.status, s.current_state, s.user_id or "-", s.room_id or "-", s.fsm_id) for s in summaries
    ]
    if not rows:
        return []
    header: tuple[str, ...] = ("conversation", "status", "state", "user", "room", "definition")
    if usages is not None:
        header = (*header[:5], "calls", "tokens", "cost", header[5])
        rows = [(*row[:5], u.calls, f"{u.tokens:,}", _cost(u), row[5]) for row, u in zip(rows, usages, strict=True)]
    if modes is not None:
        header = (*header[:-1], "mode", header[-1])
        rows = [(*row[:-1], mode, row[-1]) for row, mode in zip(rows, modes, strict=True)]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header) - 1)]
    return [
        "  ".join(str(value).ljust(width) for value, width in zip(row[:-1], widths, strict=True)) + "  " + str(row[-1])
        for row in [header, *rows]
    ]


def _cost(usage: Any) -> str:
    """Dollars of the calls litellm has a price for; '?' marks calls it has none for (local models)."""
    if usage.calls and usage.calls_without_price == usage.calls:
        return "?"
    return f"${usage.cost_usd:.4f}" + ("+?" if usage.calls_without_price else "")
