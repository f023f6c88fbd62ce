"""Checks of global transitions and state groups: what they name exists, and each one can make a difference.

Their own module because a global transition is declared once but judged per state: the scope names states and
groups (FSM058), and whether it applies anywhere (FSM059), is shadowed everywhere (FSM060) or names a state where
it can never apply (FSM061) follows from the one applicability rule (``definition._graph.global_applies``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from llm_fsm.definition._documents import Path
from llm_fsm.definition._graph import global_applies
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


def _target_hint(target: str, declared: list[str]) -> str:
    return _did_you_mean(target, declared) or "declare the state or fix the target"


def applies(run: LintRun, transition: Mapping[str, Any], key: str, state: Mapping[str, Any]) -> bool:
    """``global_applies`` over the raw document (a malformed scope counts as unset: FSM001 reports it)."""
    target = transition.get("target_state")
    own = state.get("transitions")
    return global_applies(
        key,
        terminal=not own,
        target=target if isinstance(target, str) else "",
        from_states=_optional_names(transition.get("from_states")),
        from_groups=_optional_names(transition.get("from_groups")),
        except_states=_optional_names(transition.get("except_states")),
        groups=_groups(run),
    )


def _optional_names(value: Any) -> list[str] | None:
    return [name for _, name in _names(value)] if isinstance(value, list) else None


__all__ = ["applies", "scope"]
