"""Records as a person reads them in the terminal: a turn (where it went, why, the actions it ran), the explain
record, the audit trail, and the table of stored conversations."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llm_fsm.engine._records import ConditionResult, ContextChange, LLMCallRecord, RetrievalRecord, TurnRecord


def describe_turn(record: TurnRecord) -> str:
    """One line: where the turn left the conversation, and why."""
    return f"{turn_path(record)} {record.verdict.kind}: {record.verdict.reason}"


def turn_path(record: TurnRecord) -> str:
    """``[before → after]``, ``[state]`` for a stay; a turn that chained names every state it passed through.

    The verdict's reason is about the first move: ``[greeting → billing_issues]`` under "proposal
    'premium_support' is eligible" read as a contradiction, and a chain back to where it started as a stay."""
    if record.chained:
        states = [record.state_before, record.verdict.target_state, *(c.target_state for c in record.chained)]
        return "[" + " → ".join(states) + "]"
    if record.state_before == record.state_after:
        return f"[{record.state_after}]"
    return f"[{record.state_before} → {record.state_after}]"


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


def explain_lines(record: TurnRecord, conversation_id: str) -> list[str]:
    """The explain record as a person reads it, top to bottom in the order the turn ran: the message, what the
    model made of it, each value written (stored or refused, and why), each transition considered with each
    condition, the verdict (the line ``chat`` prints), what was chained, the actions, the model calls, the reply."""
    lines = [f"turn {record.index} of conversation {conversation_id}, {_when(record)}"]
    if record.message_id is not None:
        lines.append(f"message id: {record.message_id}")
    if (record.flow_before, record.flow_after) != ("root", "root"):
        lines.append(f"flow: {record.flow_before} → {record.flow_after}")
    if record.timer is not None:  # nobody wrote: a state's timer fired, and the model proposed nothing
        lines.append(f"timer: {record.timer} fired, no message from the user")
    else:
        lines.append(f"user: {record.user_message}")
        proposal = f"proposed {record.proposal}" if record.proposal else "proposed no move"
        lines.append(f"model: {proposal} (intent {record.intent})")
    if record.retrieval is not None:  # looked up before the model was asked
        lines += _retrieval_lines(record.retrieval)
    if record.context_changes:
        lines.append("context:")
        lines += [f"  {change.key} = {_value(change.value)}: {_outcome(change)}" for change in record.context_changes]
    if record.evaluations:
        lines.append(f"transitions from {record.state_before}:")
        for evaluation in record.evaluations:
            kind = "guarded" if evaluation.guarded else "judgment"
            if evaluation.global_index is not None:
                kind += f", global_transitions[{evaluation.global_index}]"
            verdict = "eligible" if evaluation.eligible else "not eligible"
            lines.append(f"  → {evaluation.target_state} (priority {evaluation.priority}, {kind}): {verdict}")
            lines += [f"      {'✓' if c.holds else '✗'} {c.description}{_unmet(c)}" for c in evaluation.conditions]
    lines.append(
        "verdict: "
        + describe_turn(record.model_copy(update={"state_after": record.verdict.target_state, "chained": []}))
    )
    lines += [f"then: → {chained.target_state} ({chained.kind}): {chained.reason}" for chained in record.chained]
    if record.actions:
        lines += ["actions:", *describe_actions(record)]
    if record.llm_calls:
        lines.append("model calls: " + ", ".join(_call(call) for call in record.llm_calls))
    lines.append(f"reply: {record.reply}")
    return lines


def _retrieval_lines(retrieval: RetrievalRecord) -> list[str]:
    """What the state's retrieve looked up, what the prompt held and what the reply cited (or why nothing)."""
    asked = f"retrieval: {retrieval.retriever}" + (f" for {_value(retrieval.query)}" if retrieval.query else "")
    if retrieval.skipped is not None:
        return [f"{asked}: not asked ({retrieval.skipped})"]
    if retrieval.error is not None:
        return [f"{asked}: failed ({retrieval.error}), on_error {retrieval.on_error}"]
    lines = [f"{asked}: {len(retrieval.snippets)} snippets, {retrieval.duration_ms:.0f} ms"]
    for snippet in retrieval.snippets:
        lines.append(f"  [{snippet.id}] {snippet.source} ({snippet.chars} characters)")
        text = snippet.text  # what the model was shown (explain reads it from the turn's inputs), cut for a line
        shown = "" if text is None else ": " + _value(text if len(text) <= _TEXT_SHOWN else text[:_TEXT_SHOWN] + "…")
        lines.append(f"      score {snippet.score:.2f}{shown}")
    lines.append("  cited: " + (", ".join(retrieval.cited) if retrieval.cited else "none"))
    return lines


_TEXT_SHOWN = 300
"""Characters of a snippet's text ``explain`` prints (``--format json`` has it whole)."""


def _when(record: TurnRecord) -> str:
    import datetime

    started = datetime.datetime.fromtimestamp(record.started_at, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{started}, {(record.finished_at - record.started_at) * 1000:.0f} ms"


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _outcome(change: ContextChange) -> str:
    if change.applied:
        previous = f" (was {_value(change.previous)})" if change.previous is not None else ""
        words = change.repaired
        read = f" (written {_value(words.written)}, read as {words.rule})" if words is not None else ""
        found = change.grounded_by
        if found is not None and found.kind == "dontcare":  # "dontcare" is no value of the key: any of them is
            read += f" (any value: the user said {_value(found.expression)})"
        return f"{change.reason}{previous}{read}{_extracted(change)}"
    return f"refused ({change.rule}): {change.reason}" if change.rule else f"dropped: {change.reason}"


def _extracted(change: ContextChange) -> str:
    """How the engine's extractors read a value from the user's message: filled, or repaired (what the model wrote)."""
    done = change.extracted
    if done is None or done.rule == "ask":
        return ""
    written = f"written {_value(done.written)}, " if done.rule == "repair" else ""
    verb = "repaired" if done.rule == "repair" else "filled"
    return f" ({written}{verb} from {_value(done.expression)}, characters {done.start}-{done.end} of the message)"


def _unmet(condition: ConditionResult) -> str:
    """Why a condition does not hold, in the words of the verdict's reason; nothing for one that holds."""
    if condition.holds:
        return ""
    detail = []
    if condition.missing_keys:
        detail.append("missing " + ", ".join(condition.missing_keys))
    if condition.logic_missing_vars:
        detail.append("rule reads missing " + ", ".join(condition.logic_missing_vars))
    if condition.error:
        detail.append(condition.error)
    elif not detail:
        detail.append("rule is false")
    return ": " + "; ".join(detail)


def _call(call: LLMCallRecord) -> str:
    details = [f"{call.attempts} attempt{'s' if call.attempts != 1 else ''}"]
    if call.model:
        details.append(call.model)
    tokens = call.usage.get("prompt_tokens", 0) + call.usage.get("completion_tokens", 0)
    if tokens:
        details.append(f"{tokens:,} tokens")
    if call.cost_usd is not None:
        details.append(f"${call.cost_usd:.4f}")
    if call.error:
        details.append(f"error: {call.error}")
    return f"{call.purpose} ({', '.join(details)})"


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


def provenance_lines(values: Mapping[str, Any]) -> list[str]:
    """Each value and where it came from; a value read from words quotes their message with the words in «»."""
    lines: list[str] = []
    for key, found in values.items():
        lines.append(f"{key} = {_value(found.value)}  ← {origin_text(found.origin)}")
        quote = found.quote
        if quote is not None:
            lines.append(f"    {quote.message} ({quote.role}): {quote.before}«{quote.inside}»{quote.after}")
    return lines


def origin_text(origin: Any) -> str:
    """Who wrote a value, and when, in words (``engine._provenance.Origin``)."""
    if origin is None:
        return "unknown (stored before origins were kept)"
    when = "at the opening" if origin.turn == 0 else f"turn {origin.turn}" if origin.turn else "between turns"
    by = {
        "model": "the model" + (", from an offer the user accepted" if origin.source == "assistant" else ""),
        "extractor": f"the extractors ({origin.rule})",
        "application": f"the application ({origin.hook})",
        "action": f"action {origin.call}",
        "operator": f"operator {origin.actor}",
        "flow": f"flow {origin.flow}",
        "migration": "a migration",
    }.get(origin.by, origin.by)
    read = f", read as {origin.rule}" if origin.by == "model" and origin.rule else ""
    return f"{by}{read}, {when}"


def _cost(usage: Any) -> str:
    """Dollars of the calls litellm has a price for; '?' marks calls it has none for (local models)."""
    if usage.calls and usage.calls_without_price == usage.calls:
        return "?"
    return f"${usage.cost_usd:.4f}" + ("+?" if usage.calls_without_price else "")
