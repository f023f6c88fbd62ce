"""``prove(definition)``: explore, judge, report."""

from __future__ import annotations

from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._actions import registered_names
from llm_fsm.engine._effects import EngineConfig
from llm_fsm.lint.proof._drive import Driver, Move, Resolve
from llm_fsm.lint.proof._explore import Exploration, Node, explore
from llm_fsm.lint.proof._properties import Claim, Judge
from llm_fsm.lint.proof._report import (
    CODES,
    PROPERTIES,
    ProofFinding,
    ProofReport,
    ProofStep,
    PropertyResult,
)

#: configurations explored before the checker stops and says ``unknown``
DEFAULT_MAX_CONFIGURATIONS = 20_000


def prove(
    definition: FSMDefinition,
    *,
    resolve: Resolve | None = None,
    max_configurations: int = DEFAULT_MAX_CONFIGURATIONS,
    config: EngineConfig | None = None,
) -> ProofReport:
    """Prove ``definition``'s four properties against every model reply its states allow (docs/prove.md).

    ``resolve`` loads a sub-flow's definition (``(declaration, parent) -> FSMDefinition``, as ``lint_flows``
    takes); without one, moves that start a sub-flow are not explored and ``flows_return`` is ``unknown``.
    """
    driver = Driver(definition, resolve, config or EngineConfig())
    found = explore(driver, max_configurations)
    claims = Judge(driver, found).claims() if found.opening_error is None else []
    findings = [_finding(driver, found, claim, definition) for claim in claims if claim.exact]
    unknown = [_finding(driver, found, claim, definition) for claim in claims if not claim.exact]
    properties = {name: _status(name, claims, found, driver) for name in PROPERTIES}
    reachable = frozenset((node.stack, node.state) for node in found.nodes)
    return ProofReport(
        definition=definition.name,
        properties=properties,
        findings=findings,
        explored=len(found.nodes),
        bound=max_configurations,
        complete=found.complete and found.opening_error is None,
        turns=found.turns,
        reachable=reachable,
        states=tuple(definition.states),
        unknown=unknown,
    )


def _status(name: str, claims: list[Claim], found: Exploration, driver: Driver) -> PropertyResult:
    mine = [claim for claim in claims if claim.property == name]
    if any(claim.exact for claim in mine):
        return PropertyResult(name, "failed")
    if name == "flows_return" and not _calls_flows(driver.root):
        return PropertyResult(name, "proved")  # nothing to return from: no sub-flow is declared
    if found.opening_error is not None:
        return PropertyResult(name, "unknown", f"the conversation cannot open: {found.opening_error}")
    if mine:
        return PropertyResult(name, "unknown", f"{mine[0].message} — but this rests on an approximation")
    if not found.complete:
        return PropertyResult(name, "unknown", f"the bound of {found.bound:,} configurations was reached")
    if found.truncated and name != "flows_return":
        return PropertyResult(name, "unknown", "sub-flows call themselves: the checker stops at the first repetition")
    if name == "flows_return" and driver.unresolved:
        flows = ", ".join(sorted(set(driver.unresolved)))
        return PropertyResult(name, "unknown", f"sub-flow(s) {flows} could not be loaded")
    approximate = [n for n in found.nodes if n.approximate]
    if approximate and name != "no_model_gate":
        where = approximate[0].state
        return PropertyResult(
            name,
            "unknown",
            f"too many combinations of values to write them all in {where!r} (and {len(approximate) - 1} more)",
        )
    inexact = sorted({key for a in driver.abstractions.values() for key in a.inexact})
    if inexact and name != "no_model_gate":
        return PropertyResult(
            name, "unknown", f"conditions compute with {', '.join(inexact)}: the checker tried values, it cannot prove"
        )
    return PropertyResult(name, "proved")


def _calls_flows(definition: FSMDefinition) -> bool:
    return bool(definition.flows) or any(state.flows for state in definition.states.values())


def _finding(driver: Driver, found: Exploration, claim: Claim, definition: FSMDefinition) -> ProofFinding:
    nodes = found.path(claim.node)
    steps = [_step(node) for node in nodes[1:]]
    if claim.last is not None:
        move, stubs, state, stack = claim.last
        steps.append(ProofStep(move.user, move.script(), dict(stubs), state, stack))
    elif not steps:
        # the bad configuration is the opening's: one side question, which stays, makes it a script of one turn
        move = Move(intent="digression")
        outcome = driver.step(nodes[-1].instance, move)
        steps.append(
            ProofStep(
                move.user, move.script(), outcome.stubs, outcome.instance.current_state, tuple(outcome.instance.stack)
            )
        )
    return ProofFinding(
        code=CODES[claim.property],
        property=claim.property,
        state=claim.state,
        message=claim.message,
        path=tuple(steps),
        flow=claim.flow,
        transition=claim.transition,
        called=claim.called,
        file=definition.source,
        expect=dict(claim.expect),
        opening_actions={**_every_action(driver), **nodes[0].stubs},
    )


def _every_action(driver: Driver) -> dict[str, dict[str, Any]]:
    """A stub for every action the definitions declare (a script must stub what it may call): its first result;
    an action only a timer calls, an empty result (the prover's paths let no time pass, so it is never called)."""
    stubs: dict[str, dict[str, Any]] = {}
    for fsm_id, definition in list(driver.flows.items()):
        for state in definition.states.values():
            for action in state.actions or ():
                if action.call not in stubs:
                    first = driver.action_results(fsm_id, action.call)[0]
                    stubs[action.call] = dict(first) if first is not None else {}
        for name in registered_names(definition) - stubs.keys():  # a timer's: no clock runs in a proof, so {}
            stubs[name] = {}
    return stubs


def _step(node: Node) -> ProofStep:
    move = node.move
    assert move is not None  # every node but the opening's was reached by a move
    if move.application:
        return ProofStep("", {}, {}, node.state, node.stack, application=dict(move.update))
    return ProofStep(move.user, move.script(), dict(node.stubs), node.state, node.stack)


__all__ = ["DEFAULT_MAX_CONFIGURATIONS", "prove"]
