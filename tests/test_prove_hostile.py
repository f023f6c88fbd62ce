"""No hostile model output reaches a configuration the prover called unreachable (issue 22's cross-check).

For each generated definition the prover runs once; then hostile conversations
(random targets, updates, intents including cancel, digression and start_flow,
garbage text, exceptions, and backends that answer anything or fail) run on the
real engine, and every (flow stack, state) they visit must be in
``report.reachable`` whenever the proof completed. ``benchmarks/prove_hostile.py``
runs 10,000 such runs and counts the configurations the prover missed.

A failing example is reported as drawn: shrinking one means proving and running
hundreds of candidates, minutes past the test's timeout. ``PROVE_HOSTILE_SAVE=DIR``
turns shrinking on and writes the definition of each failing candidate to
``DIR/<test>.yaml`` (hypothesis replays the shrunk example last, so the file left
is the smallest one), headed by the run that reached the configuration.
"""

from __future__ import annotations

import os
from pathlib import Path

from hostile_strategies import definitions
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from prove_hostile_cases import Case, form_cases, found_yaml, hostile_case, run, unreachable

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.lint import prove

EXAMPLES = int(os.environ.get("PROVE_HOSTILE_EXAMPLES", "20"))
#: the prover's bound here: a few seconds per proof at most; a proof that reaches it is not checked
BOUND = int(os.environ.get("PROVE_HOSTILE_BOUND", "100"))
#: the largest generated form tried (each declared key multiplies the replies the prover tries per configuration)
FORM_STATES = 7
SAVE = os.environ.get("PROVE_HOSTILE_SAVE")
PHASES = tuple(Phase) if SAVE else tuple(p for p in Phase if p is not Phase.shrink)
RUNS = 3
TURNS = 8


def check(case: Case, data: st.DataObject, name: str) -> None:
    report = prove(case.definition, resolve=case.resolve, max_configurations=BOUND)
    if not report.complete:  # a bounded proof claims nothing about what it did not explore
        return
    for _ in range(RUNS):
        steps = run(case, data.draw, TURNS)
        missed = unreachable(report.reachable, steps)
        if missed and SAVE:
            Path(SAVE).mkdir(parents=True, exist_ok=True)
            (Path(SAVE) / f"{name}.yaml").write_text(found_yaml(case, steps, missed[0]), encoding="utf-8")
        assert not missed, (
            f"the prover called {missed[0].configuration} unreachable; a hostile run reached it:\n"
            + found_yaml(case, steps, missed[0])
        )


@settings(max_examples=EXAMPLES, deadline=None, phases=PHASES, suppress_health_check=[HealthCheck.too_slow])
@given(definition=definitions(), data=st.data())
def test_no_hostile_run_reaches_what_the_prover_called_unreachable(
    definition: FSMDefinition, data: st.DataObject
) -> None:
    check(hostile_case(definition), data, "hostile_model")


@settings(max_examples=EXAMPLES, deadline=None, phases=PHASES, suppress_health_check=[HealthCheck.too_slow])
@given(case=form_cases(max_states=FORM_STATES), data=st.data())
def test_no_hostile_run_of_a_generated_form_reaches_what_the_prover_called_unreachable(
    case: Case, data: st.DataObject
) -> None:
    check(case, data, "generated_form")
