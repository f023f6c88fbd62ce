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
from llm_fsm.lint._typos import _Typos
from llm_fsm.logic._checks import check_logic
from llm_fsm.logic._guards import Guard, compile_guard
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
    holders.extend((("global_transitions", index), t) for index, t in enumerate(definition.global_transitions or ()))
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
    """FSM015 and FSM014: keys conditions require or read that nothing provides; FSM041 when such a key is a
    misspelling of one the file provides or declares and the condition cannot hold without it.

    A key nothing in the file provides may still be one the application passes without listing it (the seed's
    router reads ``customer.tier`` so): a warning. A key one edit away from a key the file does provide is a typo,
    and a condition that waits for it never holds: the transition it guards never fires, and when it is a
    state's only way out the conversation stays there for ever. That is an error, reported instead of FSM015 or
    FSM014 (FSM032, about declarations, still says the key is not declared)."""
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
    misspelt = _Misspellings(run, [*collected, *provided])
    supply = KeyCover([*collected, *provided])
    for parts, index, key in requires:
        if supply.covers(key):
            continue
        meant = misspelt.near(key)
        if meant is not None:
            run.add(
                "misspelt-key-in-guard",
                (*parts, "requires_context_keys", index),
                f"requires {key!r}, a misspelling of {meant!r}: nothing provides {key!r} (no state collects it, "
                f"no action writes it, the application does not list it), so the condition never holds and "
                f"{_consequence(run, parts)}",
                f"did you mean {meant!r}?",
            )
            continue
        run.add(
            "required-key-never-collected",
            (*parts, "requires_context_keys", index),
            f"requires {key!r}, but no state collects it, no action writes it and the application does not provide it",
            f"add {key!r} to a state's required_context_keys, or to application_context_keys",
        )
    readable = KeyCover([*collected, *provided, *(k for _, _, k in requires)])
    unprovided: dict[Path, list[str]] = {}
    for parts, key in getattr(run, "reads", ()):
        if not readable.covers(key):
            unprovided.setdefault(parts, []).append(key)
    conditions = dict(run.conditions()) if unprovided else {}
    for parts, keys in unprovided.items():
        typos = {key: meant for key in keys if (meant := misspelt.near(key)) is not None}
        if typos and _never_holds(conditions.get(parts, {}).get("logic"), set(typos)):
            names = ", ".join(f"{key!r} ({meant!r}?)" for key, meant in typos.items())
            run.add(
                "misspelt-key-in-guard",
                (*parts, "logic"),
                f"reads {names} without a default, which nothing provides: the rule cannot hold without "
                f"{'it' if len(typos) == 1 else 'them'}, so the condition never holds and {_consequence(run, parts)}",
                "did you mean " + " and ".join(repr(meant) for meant in typos.values()) + "?",
            )
            keys = [key for key in keys if key not in typos]
        for key in keys:
            run.add(
                "condition-key-never-provided",
                (*parts, "logic"),
                f"reads {key!r}, which no state collects, no condition requires, no action writes and the application "
                "does not provide",
                f"add {key!r} to a state's required_context_keys, or to application_context_keys",
            )


class _Misspellings:
    """Which provided or declared key a key nothing provides is a likely misspelling of (``_Typos``' rule). A key
    that is declared itself is no misspelling: the engine offers the model the declared keys conditions read."""

    def __init__(self, run: LintRun, provided: list[str]) -> None:
        self._run = run
        self._provided = provided
        self._typos: _Typos | None = None
        self._declared: KeyCover | None = None

    def near(self, key: str) -> str | None:
        if self._typos is None:  # built for the first key nothing provides: most files have none
            declared = self._run.declared_names()
            self._declared = KeyCover(declared)
            self._typos = _Typos([*self._provided, *declared])
        assert self._declared is not None
        if self._declared.covers(key):
            return None
        return self._typos.near(key)


def _never_holds(logic: Any, dead: set[str]) -> bool:
    """Whether a guard cannot hold while the ``dead`` keys are missing: a clause reading one without a default
    never holds, ``and`` fails with one such clause, ``or`` only when all its clauses are such (the engine's rule,
    ``logic/_guards``)."""
    try:
        guard = compile_guard(logic)
    except LogicError:
        return False
    return _dead(guard, dead)


def _dead(guard: Guard, dead: set[str]) -> bool:
    if guard.operator == "and":
        return any(_dead(child, dead) for child in guard.children)
    if guard.operator == "or":
        return all(_dead(child, dead) for child in guard.children)
    return not dead.isdisjoint(guard.reads_without_default)


def _consequence(run: LintRun, parts: Path) -> str:
    """What a condition that never holds stops: its transition (named by target), or its sub-flow."""
    if len(parts) == 6 and parts[0] == "states" and parts[2] == "transitions" and isinstance(parts[3], int):
        transitions = run.data["states"][parts[1]].get("transitions")
        target = transitions[parts[3]].get("target_state") if isinstance(transitions, list) else None
        if isinstance(target, str):
            ways_out = len(run.graph.successors.get(str(parts[1]), ())) if run.graph is not None else len(transitions)
            only = f", and it is the only way out of {parts[1]!r}" if ways_out == 1 else ""
            return f"the transition to {target!r} never fires{only}"
    if len(parts) == 4 and parts[0] == "global_transitions" and isinstance(parts[1], int):
        return "the global transition never fires"
    return "what it guards never happens"
