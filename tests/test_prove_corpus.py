"""The prover's scores on the corpus of seeded bugs and on the false-alarm set (issue 22, "Measured").

A mutant is found when ``prove`` fails its property at the state (or sub-flow) where the bug was seeded; every
counterexample it writes must pass under ``llm-fsm test``; no shipped or tricky-but-correct definition may fail
a property. See tests/prove/README.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.cli.lint import lint_paths
from llm_fsm.lint import Severity
from tests.prove.mutants import DEFINITIONS, MUTANTS, PROPERTIES, Mutant, load, resolve
from tests.prove.scores import describe, found, lint_flags, prove_file, shipped, tricky

BY_NAME = {mutant.name: mutant for mutant in MUTANTS}
#: the mutants, each a strict xfail where the prover says it cannot decide it (``Mutant.undecided``)
CASES = [
    pytest.param(m, id=m.name, marks=[pytest.mark.xfail(strict=True, reason=m.undecided)] if m.undecided else [])
    for m in MUTANTS
]
FOUND_RATE = 0.95


# --- the corpus itself (no prover needed) -----------------------------------------------------------------------


def test_corpus_has_at_least_34_mutants_and_6_per_property() -> None:
    counts = Counter(mutant.property for mutant in MUTANTS)
    assert len(MUTANTS) >= 34
    assert set(counts) == set(PROPERTIES)
    assert min(counts.values()) >= 6, counts


def test_mutant_names_are_unique() -> None:
    assert len(BY_NAME) == len(MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_loads_with_its_sub_flows(mutant: Mutant, tmp_path: Path) -> None:
    root = mutant.materialize(tmp_path)
    definition = load(root)
    for state in definition.states.values():  # every sub-flow it can call loads too
        for declaration in [*(definition.flows or []), *(state.flows or [])]:
            resolve(declaration, definition)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_changes_the_shipped_files(mutant: Mutant, tmp_path: Path) -> None:
    mutated = mutant.materialize(tmp_path)
    shipped = [DEFINITIONS / mutant.source, *(DEFINITIONS / "flows" / name for name in mutant.flows)]
    written = [mutated, *(tmp_path / "flows" / name for name in mutant.flows)]
    assert all(load(a).model_dump() != load(b).model_dump() for a, b in zip(shipped, written, strict=True))


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_corpus_records_what_todays_lint_says(mutant: Mutant, tmp_path: Path) -> None:
    assert lint_flags(mutant, tmp_path) == mutant.lint_flags


def test_at_least_half_of_the_mutants_escape_todays_lint(tmp_path: Path) -> None:
    missed = [m.name for m in MUTANTS if not lint_flags(m, tmp_path / m.name)]
    assert 2 * len(missed) >= len(MUTANTS), missed


def test_shipped_definitions_are_lint_clean_so_any_flag_is_the_mutants() -> None:
    diagnostics, _, _ = lint_paths([str(DEFINITIONS)])
    assert not [d for d in diagnostics if d.severity in (Severity.ERROR, Severity.WARNING)]


# --- the prover's scores -----------------------------------------------------------------------------------------


@dataclass
class Proved:
    mutant: Mutant
    root: Path
    report: Any


@pytest.fixture(scope="module")
def proved(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Mutant], Proved]:
    """Each mutant written to a directory of its own and proved once per module."""
    done: dict[str, Proved] = {}

    def get(mutant: Mutant) -> Proved:
        if mutant.name not in done:
            root = mutant.materialize(tmp_path_factory.mktemp(mutant.name))
            done[mutant.name] = Proved(mutant, root, prove_file(root))
        return done[mutant.name]

    return get


# Proving one mutant takes seconds, over a minute for the loan ones on a loaded 2-core machine: the first test that
# asks for a mutant's report pays for it (the fixture caches it), hence the longer timeout on these tests.
@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mutant", CASES)
def test_prover_finds_the_seeded_bug_with_its_property(mutant: Mutant, proved: Callable[[Mutant], Proved]) -> None:
    result = proved(mutant)
    assert result.report.status(mutant.property) == "failed", describe(result.report.findings) or "no finding"
    assert found(mutant, result.report), (
        f"expected {mutant.property} at {mutant.where}; got {describe(result.report.findings) or 'nothing'}"
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_prover_finds_at_least_95_percent_of_the_corpus(proved: Callable[[Mutant], Proved]) -> None:
    missed = [m.name for m in MUTANTS if not found(m, proved(m).report)]
    hits = len(MUTANTS) - len(missed)
    assert hits / len(MUTANTS) >= FOUND_RATE, f"found {hits}/{len(MUTANTS)}; missed {missed}"


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_every_counterexample_reproduces_under_llm_fsm_test(
    mutant: Mutant, proved: Callable[[Mutant], Proved], tmp_path: Path
) -> None:
    from llm_fsm.lint import write_counterexamples
    from llm_fsm.scripting import run_suite

    result = proved(mutant)
    if not result.report.failed:
        pytest.skip("nothing failed, so nothing to reproduce (the miss is test_prover_finds_the_seeded_bug's)")
    scripts = write_counterexamples(result.report, result.root.parent / "counterexamples", str(result.root))
    assert scripts
    suite = run_suite(scripts)
    failures = [(r.conversation.label, r.failures, [t.failures for t in r.turns]) for r in suite.failed]
    assert suite.passed, (suite.errors, failures)


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", [*shipped(), *tricky()], ids=lambda p: p.name)
def test_no_false_alarm_on_correct_definitions(path: Path) -> None:
    report = prove_file(path)
    assert not report.failed, describe(report.findings)


def test_tricky_set_has_at_least_six_definitions() -> None:
    assert len(tricky()) >= 6
