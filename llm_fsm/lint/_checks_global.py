"""Checks of global transitions and state groups: what they name exists, and each one can make a difference.

Their own module because a global transition is declared once but judged per state: the scope names states and
groups (FSM058), and whether it applies anywhere (FSM059), is shadowed everywhere (FSM060) or names a state where
it can never apply (FSM061) follows from the one applicability rule (``definition._graph.global_applies``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from llm_fsm.definition._documents import Path
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import _did_you_mean


def _names(value: Any) -> list[tuple[int, str]]:
    return [(i, v) for i, v in enumerate(value) if isinstance(v, str)] if isinstance(value, list) else []


def _groups(run: LintRun) -> dict[str, list[str]]:
    raw = run.data.get("state_groups")
    groups: dict[str, list[str]] = {}
    for name, group in raw.items() if isinstance(raw, Mapping) else ():
        members = group.get("states") if isinstance(group, Mapping) else None
        groups[str(name)] = [s for _, s in _names(members)]
    return groups


def _unknown(run: LintRun, parts: Path, name: str, known: list[str], what: str, hint: str) -> None:
    run.add(
        "global-scope-unknown",
        parts,
        f"{what} {name!r} is not declared",
        lambda: _did_you_mean(name, known) or hint,
    )


def scope(run: LintRun) -> None:
    """Targets of global transitions (FSM006, as for a state's), and every state and group their scopes and the
    groups name (FSM058)."""
    if run.partial:
        return
    declared = [key for key, _ in run.states()]
    known = set(declared)
    groups = _groups(run)
    raw_groups = run.data.get("state_groups")
    for name, group in raw_groups.items() if isinstance(raw_groups, Mapping) else ():
        members = group.get("states") if isinstance(group, Mapping) else None
        for index, state in _names(members):
            if state not in known:
                where = ("state_groups", name, "states", index)
                _unknown(run, where, state, declared, "state", "declare the state or drop it from the group")
    for parts, transition in run.global_transitions():
        target = transition.get("target_state")
        if isinstance(target, str) and target not in known and isinstance(run.data.get("states"), Mapping):
            run.add(
                "unknown-target-state",
                (*parts, "target_state"),
                f"global transition targets {target!r}, which is not a declared state",
                functools.partial(_target_hint, target, declared),
            )
        for field_name in ("from_states", "except_states"):
            for index, state in _names(transition.get(field_name)):
                if state not in known:
                    hint = "declare the state or drop it from the list"
                    _unknown(run, (*parts, field_name, index), state, declared, "state", hint)
        for index, group_name in _names(transition.get("from_groups")):
            if group_name not in groups:
                hint = "declare it under state_groups"
                _unknown(run, (*parts, "from_groups", index), group_name, list(groups), "state group", hint)


def usefulness(run: LintRun) -> None:
    """Global transitions that apply in no state (FSM059), that every state they apply in already declares as its
    own, winning every tie (FSM060), or whose from_states names a state it never applies in (FSM061)."""
    graph = run.graph
    if graph is None:
        return
    states = dict(run.states())
    by_index = {edge.index: edge for edge in graph.global_edges}
    for parts, transition in run.global_transitions():
        edge = by_index.get(int(parts[1]))
        if edge is None:
            continue
        if not edge.sources:
            run.add(
                "global-transition-applies-nowhere",
                parts,
                f"global transition to {edge.target!r} ({edge.scope}) applies in no state: every state of its scope "
                "is terminal, excluded or its target",
                "widen its scope, or remove it",
            )
            continue
        if all(_shadowed(states[source], transition) for source in edge.sources):
            run.add(
                "global-transition-shadowed",
                parts,
                f"every state the global transition to {edge.target!r} applies in declares its own transition there "
                "with the same conditions and a priority as good, which always wins: the global one is never taken",
                "remove it, or remove the states' own copies",
            )
        for index, name in _names(transition.get("from_states")):
            state = states.get(name)
            if state is None or name in edge.sources:
                continue
            why = (
                "it is terminal (a global transition never leaves a terminal state)"
                if not state.get("transitions")
                else "it is the target (no self-loop)"
                if name == edge.target
                else "it is also in except_states"
            )
            run.add(
                "global-scope-never-applies",
                (*parts, "from_states", index),
                f"from_states names {name!r}, where this global transition never applies: {why}",
                "drop it from from_states",
            )


def _shadowed(state: Mapping[str, Any], transition: Mapping[str, Any]) -> bool:
    """Whether ``state`` declares its own transition to the same target that always wins over ``transition``."""
    own = state.get("transitions")
    priority = transition.get("priority", 100)
    return isinstance(own, list) and any(
        isinstance(mine, Mapping)
        and mine.get("target_state") == transition.get("target_state")
        and _signature(mine.get("conditions")) == _signature(transition.get("conditions"))
        and _priority(mine) <= (priority if isinstance(priority, int) else 100)
        for mine in own
    )


def _priority(transition: Mapping[str, Any]) -> int:
    priority = transition.get("priority", 100)
    return priority if isinstance(priority, int) else 100


def _signature(conditions: Any) -> str:
    try:
        return json.dumps(conditions or None, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(conditions)


def _target_hint(target: str, declared: list[str]) -> str:
    return _did_you_mean(target, declared) or "declare the state or fix the target"


__all__ = ["scope", "usefulness"]
