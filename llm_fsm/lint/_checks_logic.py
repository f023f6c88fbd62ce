"""Checks of conditions and the keys they read: JsonLogic validity, risky missing reads, keys nobody provides."""

from __future__ import annotations

from typing import Any

from llm_fsm.definition._documents import Path
from llm_fsm.errors import LogicError
from llm_fsm.lint._missing_reads import risky_missing_reads
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import (
    KeyCover,
    _logic_subpath,
    _strings,
)
from llm_fsm.logic._checks import check_logic
from llm_fsm.logic._guards import Guard
from llm_fsm.logic._rules import compile_logic


def _model_guards(run: LintRun) -> dict[Path, Guard]:
    """Each condition's rule as the model compiled it at validation, by path (compiling is most of
    lint's cost, so it is done once); empty when there is no validated model."""
    definition = run.definition
    if definition is None:
        return {}
    holders: list[tuple[Path, Any]] = [
        (("states", key, "transitions", index), transition)
        for key, state in definition.states.items()
        for index, transition in enumerate(state.transitions)
    ]
    for owner, flows in _model_flows(definition):
        holders.extend(((*owner, "flows", index), flow) for index, flow in enumerate(flows))
    return {
        (*parts, "conditions", cindex): condition.compiled
        for parts, holder in holders
        for cindex, condition in enumerate(holder.conditions or ())
        if condition.compiled is not None
    }


def _model_flows(definition: Any) -> list[tuple[Path, Any]]:
    owners: list[tuple[Path, Any]] = [((), definition.flows or [])]
    owners.extend((("states", key), state.flows or []) for key, state in definition.states.items())
    return owners


def logic(run: LintRun) -> None:
    run.reads = []
    guards = _model_guards(run)
    for parts, condition in run.conditions():
        requires = _strings(condition.get("requires_context_keys"))
        rule = condition.get("logic")
        if rule is None:
            if not requires:
                run.add(
                    "condition-always-true",
                    parts,
                    "this condition has neither logic nor requires_context_keys, so it always holds "
                    "and makes the transition fire on its own",
                    "add requires_context_keys or logic, or drop the condition to leave the choice to the model",
                )
            continue
        # A rule the model compiled passed the same static checks already: check it again only without one.
        guard = guards.get(parts)
        reads = guard.reads if guard is not None else None
        issues = check_logic(rule) if reads is None else []
        if issues:
            run.logic_reported.add(parts)
        for issue in issues:
            run.add(
                "invalid-logic",
                (*parts, "logic"),
                issue.message,
                getattr(issue, "hint", "") or "see docs/jsonlogic.md for the supported operators",
                path=_logic_subpath(parts, issue.path),
            )
        if issues:
            continue
        if reads is None:
            try:
                reads = compile_logic(rule).reads
            except LogicError as exc:  # check_logic and compile_logic disagree: still report it
                run.logic_reported.add(parts)
                run.add("invalid-logic", (*parts, "logic"), exc.message, path=_logic_subpath(parts, exc.path))
                continue
        for key in sorted(reads):
            if key:
                run.reads.append((parts, key))
        required = KeyCover(requires)
        if guard is not None and all(required.guarantees(key) for key in guard.mentions_without_default):
            continue  # every var without a default names a key the condition requires: nothing can be risky
        reported: set[str] = set()
        for key, why in risky_missing_reads(rule, ignore=required.guarantees):
            if key in reported:
                continue
            reported.add(key)
            run.add(
                "condition-reads-key-without-default",
                (*parts, "logic"),
                f"reads {key!r} without a default: {why} under reference JsonLogic, but in this engine a "
                f"condition reading a missing key does not hold",
                f'add requires_context_keys: ["{key}"] to the condition, or give the var a default '
                f'({{"var": ["{key}", <default>]}})',
            )


def context_keys(run: LintRun) -> None:
    if run.partial:  # a key may be collected in the part not validated
        return
    collected = [k for _, state in run.states() for k in _strings(state.get("required_context_keys"))]
    provided = _strings(run.data.get("application_context_keys")) + _strings(run.data.get("protected_context_keys"))
    # a key declared writable_by: application is one the application provides, as a protected one is
    provided += run.application_declared()
    # an action's outputs are application writes: the backend provides those keys
    provided += [key for _, key, _ in run.action_mapping("outputs")]
    requires: list[tuple[Path, int, str]] = []
    for parts, condition in run.conditions():
        values = condition.get("requires_context_keys")
        if isinstance(values, list):
            requires.extend((parts, i, v) for i, v in enumerate(values) if isinstance(v, str))
    supply = KeyCover([*collected, *provided])
    for parts, index, key in requires:
        if not supply.covers(key):
            run.add(
                "required-key-never-collected",
                (*parts, "requires_context_keys", index),
                f"requires {key!r}, but no state collects it, no action writes it and the application does not "
                "provide it",
                f"add {key!r} to a state's required_context_keys, or to application_context_keys",
            )
    readable = KeyCover([*collected, *provided, *(k for _, _, k in requires)])
    for parts, key in getattr(run, "reads", ()):
        if not readable.covers(key):
            run.add(
                "condition-key-never-provided",
                (*parts, "logic"),
                f"reads {key!r}, which no state collects, no condition requires, no action writes and the application "
                "does not provide",
                f"add {key!r} to a state's required_context_keys, or to application_context_keys",
            )
