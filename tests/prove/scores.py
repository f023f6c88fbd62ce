"""The corpus's scores, shared by tests/test_prove_corpus.py and ``python -m tests.prove.scores`` (which prints them
for the issue's closing note): what lint misses, what the prover finds, and whether its counterexamples replay."""

from __future__ import annotations

import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from llm_fsm.cli.lint import lint_paths
from llm_fsm.lint import Severity
from tests.prove.mutants import DEFINITIONS, MUTANTS, PROPERTIES, Mutant, load, resolve

TRICKY = Path(__file__).resolve().parent / "tricky"


def shipped() -> list[Path]:
    return sorted(p for p in DEFINITIONS.iterdir() if p.suffix in (".yaml", ".json"))


def tricky() -> list[Path]:
    return sorted(TRICKY.glob("*.yaml"))


def lint_flags(mutant: Mutant, directory: Path) -> bool:
    """Whether today's fsm-lint, run on the mutant and its sub-flow files, reports any error or warning (the shipped
    definitions have none, so any is a flag: generous to lint)."""
    mutant.materialize(directory)
    diagnostics, _, _ = lint_paths([str(p) for p in mutant.files(directory)])
    return any(d.severity in (Severity.ERROR, Severity.WARNING) for d in diagnostics)


def prove_file(path: Path) -> Any:
    from llm_fsm.lint import prove

    return prove(load(path), resolve=resolve)


def found(mutant: Mutant, report: Any) -> list[Any]:
    """The findings that are the seeded bug: its property, at one of its states or its sub-flow."""
    return [
        f
        for f in report.findings
        if f.property == mutant.property and (f.state in mutant.where or f.flow in mutant.where)
    ]


def describe(findings: Iterable[Any]) -> str:
    return "; ".join(f"{f.code} {f.property} at {f.flow or ''}:{f.state}: {f.message}" for f in findings)


def reproduces(report: Any, root: Path) -> tuple[int, int]:
    """(counterexamples written, counterexamples whose script passes under llm-fsm test)."""
    from llm_fsm.lint import write_counterexamples
    from llm_fsm.scripting import run_suite

    scripts = write_counterexamples(report, root.parent / "counterexamples", str(root))
    passing = sum(1 for script in scripts if run_suite([script]).passed)
    return len(scripts), passing


def main(argv: Sequence[str] = ()) -> int:
    """Print the corpus's numbers; exit 1 when a score is below what the issue asks."""
    work = Path(tempfile.mkdtemp(prefix="prove-corpus-"))
    per_property = Counter(m.property for m in MUTANTS)
    missed_by_lint = [m for m in MUTANTS if not lint_flags(m, work / "lint" / m.name)]
    missed: list[str] = []
    written = passing = 0
    for mutant in MUTANTS:
        root = mutant.materialize(work / "prove" / mutant.name)
        report = prove_file(root)
        if not found(mutant, report):
            missed.append(f"{mutant.name} ({mutant.property}): {describe(report.findings) or 'no finding'}")
        if report.failed:
            counts = reproduces(report, root)
            written, passing = written + counts[0], passing + counts[1]
    alarms = [f"{p.name}: {describe(r.findings)}" for p in [*shipped(), *tricky()] if (r := prove_file(p)).failed]
    rate = (len(MUTANTS) - len(missed)) / len(MUTANTS)
    print(f"mutants: {len(MUTANTS)} ({', '.join(f'{p} {per_property[p]}' for p in PROPERTIES)})")
    print(f"today's lint flags nothing on: {len(missed_by_lint)}/{len(MUTANTS)}")
    print(f"found with the right property and place: {len(MUTANTS) - len(missed)}/{len(MUTANTS)} ({rate:.0%})")
    print(f"counterexamples reproducing under llm-fsm test: {passing}/{written}")
    print(f"false alarms on {len(shipped())} shipped and {len(tricky())} tricky definitions: {len(alarms)}")
    for line in [*missed, *alarms]:
        print("  " + line)
    ok = 2 * len(missed_by_lint) >= len(MUTANTS) and rate >= 0.95 and passing == written and not alarms
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
