"""The decision: which transition, if any, a turn takes.

The model proposes; this module decides. Pure functions over a definition, a
state and the context *after* the turn's update. The invariant every caller
relies on: the verdict is either the current state, or the target of a
transition declared from the current state whose conditions all hold.

The rule (README, "How the engine decides"):

1. Eligible = declared transitions whose conditions hold. A transition with
   conditions is *guarded*; one without is a *judgment* transition that only the
   model can choose.
2. The model's proposal stands if it is eligible, unless an eligible guarded
   transition has a strictly higher priority (lower number): that one wins.
3. If the proposal is to stay, or is not eligible, the highest-priority eligible
   guarded transition fires (conditions met means move on, even with a weak
   model); if there is none, the conversation stays.

Ties between equal priorities go to the transition declared first. A state's transitions are its own, then the
global transitions that apply to it (``FSMDefinition.transitions_from``): one candidate list, so a global
transition obeys the same rule, and the state's own transition wins a tie of priority.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from llm_fsm.definition._model import (
    FSMDefinition,
    State,
    Transition,
    TransitionCondition,
)
from llm_fsm.engine._context import missing_keys
from llm_fsm.engine._records import ConditionResult, ContextChange, TransitionEvaluation, Verdict
from llm_fsm.errors import FSMError


class _ConditionLike(Protocol):
    @property
    def description(self) -> str: ...
    @property
    def missing_keys(self) -> list[str]: ...
    @property
    def logic_missing_vars(self) -> list[str]: ...
    @property
    def error(self) -> str | None: ...
    @property
    def holds(self) -> bool: ...


class _Considered(Protocol):
    """What the decision reads of a transition considered: a ``TransitionEvaluation``, or a ``_Evaluation``."""

    @property
    def index(self) -> int: ...
    @property
    def target_state(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def guarded(self) -> bool: ...
    @property
    def eligible(self) -> bool: ...
    @property
    def conditions(self) -> Sequence[_ConditionLike]: ...


_C = TypeVar("_C", bound=_Considered)


@dataclass(slots=True)
class _Condition:
    """A condition's result as plain data: a decision nobody keeps (a chained step, a resumed parent) should not
    pay for validating a ``ConditionResult`` only to drop it."""

    description: str
    missing_keys: list[str]
    logic_value: Any
    logic_missing_vars: list[str]
    error: str | None
    holds: bool


@dataclass(slots=True)
class _Evaluation:
    """A transition considered, as plain data (see ``_Condition``)."""

    index: int
    target_state: str
    priority: int
    guarded: bool
    conditions: list[_Condition]
    eligible: bool


def _check(condition: TransitionCondition, data: Mapping[str, Any]) -> _Condition:
    missing = missing_keys(data, condition.requires_context_keys or ())
    logic_value: Any = None
    missing_vars: list[str] = []
    error: str | None = None
    logic_holds = True
    rule = condition.compiled
    if rule is not None:
        try:
            guard = rule.evaluate_guard(data)
        except FSMError as exc:  # budget exceeded and similar: fail closed
            error = str(exc)
            logic_holds = False
        else:
            logic_value = guard.value
            missing_vars = list(guard.missing_vars)
            logic_holds = guard.holds
    return _Condition(condition.description, missing, logic_value, missing_vars, error, not missing and logic_holds)


def _evaluate(definition: FSMDefinition, transition: Transition, data: Mapping[str, Any], index: int) -> _Evaluation:
    results = [_check(c, data) for c in transition.conditions or ()]
    eligible = transition.target_state in definition.states and all(r.holds for r in results)
    return _Evaluation(index, transition.target_state, transition.priority, transition.is_guarded, results, eligible)


def evaluate_condition(condition: TransitionCondition, data: Mapping[str, Any]) -> ConditionResult:
    """Does one condition hold? Never raises: a rule that fails to evaluate does not hold."""
    checked = _check(condition, data)
    return ConditionResult(
        description=checked.description,
        missing_keys=checked.missing_keys,
        logic_value=checked.logic_value,
        logic_missing_vars=checked.logic_missing_vars,
        error=checked.error,
        holds=checked.holds,
    )


def evaluate_transition(
    definition: FSMDefinition,
    transition: Transition,
    data: Mapping[str, Any],
    index: int = 0,
    *,
    global_index: int | None = None,
) -> TransitionEvaluation:
    results = [evaluate_condition(c, data) for c in transition.conditions or ()]
    declared_target = transition.target_state in definition.states
    return TransitionEvaluation(
        index=index,
        target_state=transition.target_state,
        priority=transition.priority,
        guarded=transition.is_guarded,
        conditions=results,
        eligible=declared_target and all(r.holds for r in results),
        global_index=global_index,
    )


def evaluate_transitions(
    definition: FSMDefinition, state: State, data: Mapping[str, Any]
) -> list[TransitionEvaluation]:
    """Every transition of ``state`` (its own, then the global ones that apply), evaluated against ``data``, in
    that order: the index of each is its position in ``definition.transitions_from(state.id)``."""
    own = len(state.transitions)
    return [
        evaluate_transition(
            definition, t, data, i, global_index=definition.global_index(state.id, i) if i >= own else None
        )
        for i, t in enumerate(definition.transitions_from(state.id))
    ]


def _best(evaluations: list[_C]) -> _C | None:
    # min() keeps the first of equal keys: ties go to the transition declared first.
    return min(evaluations, key=lambda e: e.priority) if evaluations else None


def _why_not(evaluation: _Considered | None, target: str) -> str:
    if evaluation is None:
        return f"no transition to {target!r} is declared from this state"
    failed = []
    for c in evaluation.conditions:
        if c.holds:
            continue
        detail = []
        if c.missing_keys:
            detail.append("missing " + ", ".join(c.missing_keys))
        if c.logic_missing_vars:
            detail.append("rule reads missing " + ", ".join(c.logic_missing_vars))
        if c.error:
            detail.append(c.error)
        elif not c.missing_keys and not c.logic_missing_vars:
            detail.append("rule is false")
        failed.append(f"'{c.description}' ({'; '.join(detail)})")
    if not failed:
        return f"target state {target!r} is not declared in the definition"
    return "condition not met: " + ", ".join(failed)


MAX_REFUSALS_NAMED = 5
"""Refused writes a verdict's reason names; the reason stays a line, and the explain record has every one."""


def refused_writes(changes: Iterable[ContextChange]) -> str:
    """The writes of a turn that were refused, each with its rule: "refused size (enum): 'huge' is not one of …".

    Said first in the reason of a verdict that did not take the model's proposal: a value the model wrote and the
    declaration refused is why its key is "missing", and "missing size" alone says the model wrote nothing when it
    wrote "huge". An empty value the model left is no refusal (it wrote nothing).
    """
    refused = [c for c in changes if not c.applied and c.reason != "empty value ignored"]
    named = [
        f"refused {c.key} ({c.rule}): {c.reason}" if c.rule else f"refused {c.key}: {c.reason}"
        for c in refused[:MAX_REFUSALS_NAMED]
    ]
    if len(refused) > MAX_REFUSALS_NAMED:  # a model writing a thousand bad keys: the record lists them all
        named.append(f"{len(refused) - MAX_REFUSALS_NAMED} more refused (the turn's context_changes)")
    return "; ".join(named)


def decide(
    definition: FSMDefinition,
    current_state: str,
    data: Mapping[str, Any],
    proposal: str | None,
    *,
    guards_fire: bool = True,
    refused_targets: frozenset[str] = frozenset(),
    refused: Iterable[ContextChange] = (),
) -> tuple[Verdict, list[TransitionEvaluation]]:
    """Apply the decision rule. ``proposal`` None, empty, or the current state means 'stay'.

    ``guards_fire=False`` keeps guarded transitions from firing on their own (a confirmation step
    moves on the user's yes or no, not because its data is complete); ``refused_targets`` are
    states the proposal may not name in this route (the confirmation's ``on_yes`` without a yes).
    ``refused``: the turn's context changes; those not applied are named first in the reason of a
    verdict that did not take the proposal (``refused_writes``).
    """
    evaluations = evaluate_transitions(definition, definition.get_state(current_state), data)
    verdict = _decide(current_state, evaluations, proposal, guards_fire=guards_fire, refused_targets=refused_targets)
    writes = refused_writes(refused)
    if writes and verdict.kind in ("stay", "stay_rejected", "guarded_fallback"):
        verdict = verdict.model_copy(update={"reason": f"{writes}; {verdict.reason}"})
    return verdict, evaluations


def decide_verdict(
    definition: FSMDefinition, current_state: str, data: Mapping[str, Any], proposal: str | None
) -> Verdict:
    """``decide``'s verdict without its evaluations, for a decision nobody keeps a record of (a chained step, a
    resumed parent): validating records only to drop them was 40 % of such a decision (84,000 instructions
    against 49,000 for a one-condition state)."""
    transitions = definition.transitions_from(current_state)
    return _decide(current_state, [_evaluate(definition, t, data, i) for i, t in enumerate(transitions)], proposal)


def _decide(
    current_state: str,
    evaluations: Sequence[_Considered],
    proposal: str | None,
    *,
    guards_fire: bool = True,
    refused_targets: frozenset[str] = frozenset(),
) -> Verdict:
    if proposal in refused_targets:
        return Verdict(
            kind="stay_rejected",
            target_state=current_state,
            reason=f"proposal {proposal!r} rejected: this is a confirmation step and the user did not confirm",
        )
    best_guarded = _best([e for e in evaluations if e.guarded and e.eligible]) if guards_fire else None
    wants_move = bool(proposal) and proposal != current_state
    proposal = proposal or ""

    if wants_move:
        to_proposal = [e for e in evaluations if e.target_state == proposal]
        chosen = _best([e for e in to_proposal if e.eligible])
        if chosen is not None:
            if best_guarded is not None and best_guarded.priority < chosen.priority:
                return Verdict(
                    kind="guarded_override",
                    target_state=best_guarded.target_state,
                    reason=(
                        f"proposal {proposal!r} (priority {chosen.priority}) was eligible, but guarded "
                        f"transition to {best_guarded.target_state!r} has higher priority ({best_guarded.priority})"
                    ),
                    transition_index=best_guarded.index,
                )
            return Verdict(
                kind="proposal_accepted",
                target_state=proposal,
                reason=f"proposal {proposal!r} is eligible",
                transition_index=chosen.index,
            )
        rejection = f"proposal {proposal!r} rejected: {_why_not(_best(to_proposal), proposal)}"
    else:
        rejection = "model proposed to stay"

    if best_guarded is not None:
        return Verdict(
            kind="guarded_fallback",
            target_state=best_guarded.target_state,
            reason=f"{rejection}; guarded transition to {best_guarded.target_state!r} holds "
            f"(priority {best_guarded.priority})",
            transition_index=best_guarded.index,
        )
    return Verdict(
        kind="stay_rejected" if wants_move else "stay",
        target_state=current_state,
        reason=f"{rejection}; no guarded transition holds"
        if wants_move
        else "model proposed to stay; no guarded transition holds",
    )


def validate_transition(
    definition: FSMDefinition, current_state: str, target_state: str, data: Mapping[str, Any]
) -> tuple[bool, str | None]:
    """Could the conversation move from ``current_state`` to ``target_state`` now? (the seed's API)"""
    if target_state not in definition.states:
        return False, f"target state {target_state!r} is not declared in the definition"
    if target_state == current_state:
        return True, None
    transitions = definition.transitions_from(current_state)
    to_target = [_evaluate(definition, t, data, i) for i, t in enumerate(transitions) if t.target_state == target_state]
    if any(e.eligible for e in to_target):
        return True, None
    return False, _why_not(_best(to_target), target_state)


__all__ = [
    "decide",
    "decide_verdict",
    "evaluate_condition",
    "evaluate_transition",
    "evaluate_transitions",
    "refused_writes",
    "validate_transition",
]
