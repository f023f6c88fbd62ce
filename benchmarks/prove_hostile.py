"""The prover against 10,000 hostile model runs: how many visited configurations it had called unreachable (must be 0).

``tests/test_prove_hostile.py`` checks the same with a few dozen definitions; this
runs many, counts instead of stopping at the first miss, and writes the smallest
definition that shows a miss to ``--found`` (one YAML file per kind of definition,
headed by the run that reached the configuration). Half the runs are on the
hostile-model property's definitions (undeclared keys, arbitrary guards, a
sub-flow that calls itself), half on small generated forms (declared enums,
bounded integers, booleans, read-backs, actions whose backend answers anything
or fails, a sub-flow); each definition is proved once (bounded by
``--max-configurations``: a proof that reaches it is not checked), then
``--runs-per-definition`` hostile conversations of up to ``--turns`` turns run
on the real engine.

    python benchmarks/prove_hostile.py                  # 10,000 runs
    python benchmarks/prove_hostile.py --runs 500 --turns 8
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(REPO_ROOT))  # our llm_fsm from this source tree
sys.path.insert(0, str(REPO_ROOT / "tests"))  # the strategies the tests draw from

from hostile_strategies import definitions  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from prove_hostile_cases import Case, form_cases, found_yaml, hostile_case, run, unreachable  # noqa: E402

KINDS = ("hostile_model", "generated_form")


@dataclass
class Tally:
    """What one kind of definition gave."""

    kind: str
    definitions: int = 0
    incomplete: int = 0
    runs: int = 0
    turns: int = 0
    visited: int = 0
    distinct: int = 0
    reachable: int = 0
    missed: int = 0
    missed_distinct: int = 0
    prove_s: float = 0.0
    run_s: float = 0.0
    smallest: tuple[int, str] | None = field(default=None, repr=False)


def size(case: Case) -> int:
    return sum(1 + len(s.transitions) for s in case.definition.states.values())


def sweep(kind: str, runs: int, args: argparse.Namespace) -> Tally:
    """Prove and run definitions of one kind until ``runs`` runs have been checked (a few more at most)."""
    from llm_fsm.lint import prove

    per_definition, turns, max_configurations = args.runs_per_definition, args.turns, args.max_configurations
    tally = Tally(kind)
    forms = form_cases(max_states=args.form_states)
    cases: st.SearchStrategy[Case] = forms if kind == "generated_form" else definitions().map(hostile_case)

    def one(case: Case, data: st.DataObject) -> None:
        # what it draws must depend on the draws alone (hypothesis refuses a test whose draws depend on a tally)
        started = time.perf_counter()
        report = prove(case.definition, resolve=case.resolve, max_configurations=max_configurations)
        tally.prove_s += time.perf_counter() - started
        tally.definitions += 1
        if not report.complete:  # a bounded proof claims nothing about what it did not explore
            tally.incomplete += 1
            return
        tally.reachable += len(report.reachable)
        seen: set[Any] = set()
        missed: set[Any] = set()
        started = time.perf_counter()
        for _ in range(per_definition):
            steps = run(case, data.draw, turns)
            tally.runs += 1
            tally.turns += max(0, len(steps) - 1)
            tally.visited += len(steps)
            seen.update(s.configuration for s in steps)
            bad = unreachable(report.reachable, steps)
            tally.missed += len(bad)
            missed.update(s.configuration for s in bad)
            if bad and (tally.smallest is None or size(case) < tally.smallest[0]):
                tally.smallest = (size(case), found_yaml(case, steps, bad[0]))
        tally.run_s += time.perf_counter() - started
        tally.distinct += len(seen)
        tally.missed_distinct += len(missed)

    for round_seed in range(args.seed, args.seed + 100):  # proofs that reach the bound give no runs: draw again
        if tally.runs >= runs:
            break
        examples = -(-(runs - tally.runs) // per_definition)
        checked = settings(
            max_examples=examples,
            phases=[Phase.generate],
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )(given(case=cases, data=st.data())(one))
        seed(round_seed)(checked)()
    return tally


def report_lines(tallies: Sequence[Tally], args: argparse.Namespace, found: list[Path]) -> list[str]:
    lines = [
        f"{'definitions':<15} {'proved':>6} {'bound hit':>9} {'reachable':>9} {'runs':>6} {'turns':>7} "
        f"{'visited':>8} {'distinct':>8} {'unreachable visited':>19} {'distinct':>8} {'prove s':>8} {'runs s':>7}"
    ]
    for t in tallies:
        lines.append(
            f"{t.kind:<15} {t.definitions - t.incomplete:>6,} {t.incomplete:>9,} {t.reachable:>9,} {t.runs:>6,} "
            f"{t.turns:>7,} {t.visited:>8,} {t.distinct:>8,} {t.missed:>19,} {t.missed_distinct:>8,} "
            f"{t.prove_s:>8.1f} {t.run_s:>7.1f}"
        )
    missed = sum(t.missed for t in tallies)
    runs = sum(t.runs for t in tallies)
    lines += [
        f"{runs:,} hostile runs of up to {args.turns} turns, {args.runs_per_definition} per definition, "
        f"forms of 6 to {args.form_states} states, seed {args.seed}",
        "proved: definitions whose proof completed (only those are checked); bound hit: stopped at "
        f"--max-configurations {args.max_configurations:,}; reachable: configurations the prover found, summed",
        "visited: configurations the runs ended a turn in (the opening included); distinct: per definition, summed",
        f"visited configurations the prover had called unreachable: {missed:,} (must be 0): "
        + ("HELD" if not missed else "BROKEN"),
    ]
    lines += [f"smallest definition showing a miss: {path}" for path in found]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000, help="hostile runs in all, split between the kinds")
    parser.add_argument("--runs-per-definition", type=int, default=10)
    parser.add_argument("--form-states", type=int, default=9, help="the largest generated form (6 states at least)")
    parser.add_argument("--turns", type=int, default=10, help="turns per run at most")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated: " + ", ".join(KINDS))
    parser.add_argument(
        "--max-configurations",
        type=int,
        default=200,
        help="the prover's bound (a definition whose proof reaches it is not checked: counted as bound hit)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--found", default=str(REPO_ROOT / "tests" / "prove_hostile_found"), help="where a miss's definition goes"
    )
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        parser.error(f"--kinds: unknown {unknown}; choose among {', '.join(KINDS)}")
    tallies = []
    for i, kind in enumerate(kinds):
        share = args.runs // len(kinds) + (1 if i < args.runs % len(kinds) else 0)
        tally = sweep(kind, share, args)
        tallies.append(tally)
    found: list[Path] = []
    for tally in tallies:
        if tally.smallest is not None:
            Path(args.found).mkdir(parents=True, exist_ok=True)
            path = Path(args.found) / f"{tally.kind}.yaml"
            path.write_text(tally.smallest[1], encoding="utf-8")
            found.append(path)
    for line in report_lines(tallies, args, found):
        print(line)
    return 0 if not found else 1


if __name__ == "__main__":
    sys.exit(main())
