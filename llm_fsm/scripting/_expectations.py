"""The checks of a script's ``expect:`` against the conversation after a turn: its state, context, mode,
stack, verdict, reply, and what the turn's explain record shows (refused, masked and chained keys, actions
called). Each check answers in words, for the test report."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._context import _MISSING, get_path, has_value
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._records import TurnRecord
from llm_fsm.engine._values import MASK
from llm_fsm.scripting._scripts import (
    Expectation,
    Matcher,
)


def same_value(actual: Any, expected: Any) -> bool:
    """Equality as JSON sees it: ``true`` is not ``1``, but ``1`` is ``1.0``."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if isinstance(actual, Mapping) and isinstance(expected, Mapping):
        return actual.keys() == expected.keys() and all(same_value(actual[k], expected[k]) for k in actual)
    if isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(same_value(a, e) for a, e in zip(actual, expected, strict=False))
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
        return actual == expected
    return type(actual) is type(expected) and actual == expected


def _show(value: Any) -> str:
    if value is _MISSING:
        return "(missing)"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def match(matcher: Matcher, value: Any, *, collected: bool) -> str | None:
    """None when ``value`` satisfies ``matcher``; else what was expected, in words."""
    kind = matcher.kind
    if kind == "equals":
        ok = value is not _MISSING and same_value(value, matcher.equals)
        return None if ok else f"expected {_show(matcher.equals)}"
    if kind == "regex":
        assert matcher.regex is not None
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        ok = value is not _MISSING and re.search(matcher.regex, text) is not None
        return None if ok else f"expected a match for /{matcher.regex}/"
    if kind == "present":
        return (
            None
            if collected == matcher.present
            else ("expected present" if matcher.present else "expected not present")
        )
    return None if (not collected) == matcher.absent else ("expected absent" if matcher.absent else "expected present")


def flow_stack(instance: FSMInstance) -> list[str] | None:
    """The sub-flow stack as flow names above the root, oldest first; None when the engine keeps none."""
    stack = getattr(instance, "stack", None)
    if stack is None:
        return None
    names: list[str] = []
    for entry in stack:
        if isinstance(entry, str):
            names.append(entry)
            continue
        data = entry.model_dump() if hasattr(entry, "model_dump") else entry
        if isinstance(data, Mapping):
            name = next((data[k] for k in ("flow_name", "name", "flow", "fsm_id") if data.get(k)), None)
            names.append(str(name) if name is not None else _show(data))
        else:
            names.append(str(entry))
    return names


def check_expectations(
    expect: Expectation,
    instance: FSMInstance,
    record: TurnRecord | None,
    reply: str | None,
    definition: FSMDefinition | None = None,
) -> list[str]:
    """Every way the conversation after this turn differs from what the script expects."""
    failures: list[str] = []
    if expect.mode is not None and instance.mode != expect.mode:
        failures.append(f"mode: expected {expect.mode}, got {instance.mode}")
    if expect.state is not None and instance.current_state != expect.state:
        note = ""
        if definition is not None and expect.state not in definition.states:
            note = f" (the definition declares no state {expect.state!r})"
        failures.append(f"state: expected {expect.state}{note}, got {instance.current_state}")
    data = instance.context.data
    for key, expected in (expect.context or {}).items():
        value = get_path(data, key)
        if isinstance(expected, Matcher):
            problem = match(expected, value, collected=has_value(data, key))
        else:
            problem = None if value is not _MISSING and same_value(value, expected) else f"expected {_show(expected)}"
        if problem:
            failures.append(f"context.{key}: {problem}, got {_show(value)}")
    if expect.ended is not None and instance.ended != expect.ended:
        failures.append(
            f"ended: expected {str(expect.ended).lower()}, got {str(instance.ended).lower()} "
            f"(status {instance.status}, state {instance.current_state})"
        )
    if expect.stack is not None:
        stack = flow_stack(instance)
        if stack is None:
            if expect.stack:
                failures.append(f"stack: expected {_show(expect.stack)}, but this engine keeps no sub-flow stack")
        elif stack != list(expect.stack):
            failures.append(f"stack: expected {_show(expect.stack)}, got {_show(stack)}")
    if expect.verdict is not None:
        if record is None:
            failures.append(f"verdict: expected {expect.verdict}, but the turn has no record (it failed)")
        elif record.verdict.kind != expect.verdict:
            failures.append(f"verdict: expected {expect.verdict}, got {record.verdict.kind} ({record.verdict.reason})")
    failures += _check_record(expect, instance, record)
    if expect.reply is not None:
        shown: Any = reply if reply is not None else _MISSING
        problem = match(expect.reply, shown, collected=bool(reply and reply.strip()))
        if problem:
            failures.append(f"reply: {problem}, got {_show(shown)}")
    return failures


def _check_record(expect: Expectation, instance: FSMInstance, record: TurnRecord | None) -> list[str]:
    """The expectations read from the turn's explain record: refused keys, masked keys, chained states."""
    wanted = [
        name
        for name in ("refused", "masked", "chained", "called", "not_called", "retrieved", "cited", "retrieval_error")
        if getattr(expect, name) is not None
    ]
    if not wanted:
        return []
    if record is None:
        return [f"{name}: expected, but the turn has no record (it failed)" for name in wanted]
    failures: list[str] = []
    for key, rule in (expect.refused or {}).items():
        changes = [c for c in record.context_changes if c.key == key]
        refused = [c for c in changes if not c.applied]
        if any(c.rule == rule for c in refused):
            continue
        if refused:
            got = "; ".join(f"rule {c.rule} ({c.reason})" for c in refused)
        elif changes:
            got = f"stored ({changes[-1].reason})"
        else:
            got = "no write to it this turn"
        failures.append(f"refused.{key}: expected refused by rule {rule}, got {got}")
    if expect.masked is not None:
        shown = record.model_dump_json()
        for key in expect.masked:
            changes = [c for c in record.context_changes if c.key == key]
            if not changes:
                failures.append(f"masked.{key}: expected a masked write, got no write to it this turn")
                continue
            bare = [c for c in changes if c.value not in (None, MASK) or c.previous not in (None, MASK)]
            if bare:
                failures.append(f"masked.{key}: expected {MASK}, got {_show(bare[0].value)} in the explain record")
            value = get_path(instance.context.data, key)
            if isinstance(value, (str, int, float)) and not isinstance(value, bool):
                secret = json.dumps(value, ensure_ascii=False).strip('"')
                if len(secret) >= 3 and secret in shown:
                    failures.append(f"masked.{key}: its value {_show(value)} appears in the explain record")
    if expect.chained is not None:
        through = [step.target_state for step in record.chained]
        if through != list(expect.chained):
            failures.append(f"chained: expected {_show(list(expect.chained))}, got {_show(through)}")
    return failures + _check_actions(expect, record) + _check_retrieval(expect, record)


def _check_actions(expect: Expectation, record: TurnRecord) -> list[str]:
    """``called`` and ``not_called``, read from the turn's action records (a skipped action was not called)."""
    failures: list[str] = []
    called = [a for a in record.actions if a.outcome != "skipped"]
    for name, inputs in (expect.called or {}).items():
        calls = [a for a in called if a.call == name]
        if not calls:
            got = ", ".join(sorted({a.call for a in called})) or "no action"
            failures.append(f"called.{name}: expected a call, got {got}")
            continue
        problems: list[str] = []
        for call in calls:
            problems = []
            for key, expected in inputs.items():
                value = call.inputs.get(key, _MISSING)
                if isinstance(expected, Matcher):
                    problem = match(expected, value, collected=value is not _MISSING and value not in (None, ""))
                else:
                    ok = value is not _MISSING and same_value(value, expected)
                    problem = None if ok else f"expected {_show(expected)}"
                if problem:
                    problems.append(f"called.{name}.{key}: {problem}, got {_show(value)}")
            if not problems:
                break
        failures += problems
    for name in expect.not_called or ():
        if any(a.call == name for a in called):
            failures.append(f"not_called: {name} was called")
    return failures


_UNREGISTERED = "no retriever is registered under that name"


def _check_retrieval(expect: Expectation, record: TurnRecord) -> list[str]:
    """``retrieved``, ``cited`` and ``retrieval_error``, read from the turn's retrieval record."""
    if not expect.checks_retrieval:
        return []
    retrieval = record.retrieval
    if retrieval is None:
        return [
            f"retrieval: expected, but the turn looked nothing up in state {record.state_before!r} "
            "(it declares no retrieve, or no model was asked)"
        ]
    failures: list[str] = []
    held = [snippet.id for snippet in retrieval.snippets]
    if expect.retrieved is not None:
        missing = [id_ for id_ in expect.retrieved if id_ not in held]
        if missing:
            failures.append(
                f"retrieved: expected {', '.join(missing)} among the snippets the prompt held, got {_show(held)}"
            )
        elif not expect.retrieved and held:
            failures.append(f"retrieved: expected no snippet, got {_show(held)}")
    if expect.cited is not None and retrieval.cited != list(expect.cited):
        failures.append(f"cited: expected {_show(list(expect.cited))}, got {_show(retrieval.cited)}")
    wanted = expect.retrieval_error
    if wanted is not None:
        if retrieval.error is None:
            failures.append(f"retrieval_error: expected a failure containing {wanted!r}, but the retrieval succeeded")
        elif wanted.lower() not in retrieval.error.lower():
            failures.append(f"retrieval_error: expected a failure containing {wanted!r}, got {retrieval.error!r}")
    if failures and retrieval.error is not None and wanted is None:
        why = retrieval.error
        if _UNREGISTERED in why:
            why += (
                f" (give the script one: llm-fsm test --retrievers MODULE:NAME, or stub it: "
                f"retrievers: {{{retrieval.retriever}: [...]}})"
            )
        failures[-1] += f"; the retrieval failed: {why}"
    return failures


__all__ = [
    "check_expectations",
    "flow_stack",
    "match",
    "same_value",
]
