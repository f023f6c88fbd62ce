"""What proving a definition costs: ``llm_fsm.lint.prove`` on the shipped definitions and generated forms.

For each shipped definition (``definitions/*.yaml|json`` and ``definitions/flows/``,
sub-flows resolved where the engine looks: ``llm_fsm.loading.flow_resolver``)
and each generated form (``benchmarks/_prove_defs.py``: 50, 100 and 300 states by
default), in this process, the two taking turns in each of ``--repeat`` rounds,
best of the rounds:

- ``prove``: ``prove(definition, resolve=...)``, with a fresh resolver each time
  (so reading sub-flow files is paid in every round, as a cold ``fsm-lint`` pays it);
- ``lint``: the baseline, today's lint on the same loaded definition,
  ``lint_definition`` plus ``lint_flows`` with the same kind of resolver.

It prints per definition: states, abstract configurations explored, the engine
turns the prover ran to explore them (its cost is about these turns), the bound,
whether the exploration completed, each property's status, the findings, the
seconds of both, prove ÷ lint, and prove ÷ its target with met or MISSED (issue
22: each shipped definition ≤ 2 s, a generated 300-state form ≤ 30 s; the other
sizes have no target). A round whose proof takes more than ``--slow`` seconds
is not repeated.

    python benchmarks/prove.py                                   # everything (--timeout: stop a proof after N s)
    python benchmarks/prove.py --shipped simple_greeting --states 6,30 --repeat 1
    python benchmarks/prove.py --shipped none --states 300 --subflow --json
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(REPO_ROOT))  # our llm_fsm from this source tree
sys.path.insert(0, str(HERE))

import _prove_defs  # noqa: E402

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition  # noqa: E402
from llm_fsm.lint import lint_definition, lint_flows  # noqa: E402

DEFINITIONS = REPO_ROOT / "definitions"
SIZES = (50, 100, 300)
#: issue 22's targets, seconds
SHIPPED_TARGET = 2.0
GENERATED_TARGETS = {300: 30.0}
PROPERTIES = ("no_trap", "progress", "no_model_gate", "flows_return")

Resolve = Callable[[FlowDeclaration, FSMDefinition], FSMDefinition]


@dataclass
class Row:
    """The figures of one definition."""

    name: str
    states: int
    explored: int
    turns: int
    bound: int
    complete: bool
    statuses: dict[str, str]
    findings: list[str]
    prove_s: float
    lint_s: float
    target_s: float | None
    rounds: int
    reasons: dict[str, str] = field(default_factory=dict)
    stopped: bool = False

    @property
    def met(self) -> bool | None:
        return None if self.target_s is None else self.prove_s <= self.target_s and not self.stopped


def shipped_files() -> list[Path]:
    """Every shipped definition: the top-level files and the sub-flows under ``definitions/flows``."""
    found = [p for p in DEFINITIONS.rglob("*") if p.suffix in (".yaml", ".yml", ".json")]
    return sorted(
        (p for p in found if not p.name.endswith(".conv.yaml") and "conversations" not in p.parts),
        key=lambda p: str(p.relative_to(DEFINITIONS)),
    )


def shipped_name(path: Path) -> str:
    return str(path.relative_to(DEFINITIONS).with_suffix(""))


def file_resolver() -> Resolve:
    """The library's sub-flow loader (``llm_fsm.loading.flow_resolver``: where the engine and fsm-lint look)."""
    from llm_fsm.loading import flow_resolver

    return flow_resolver()


class Stopped(Exception):
    """A proof ran past ``--timeout``."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``Stopped`` in this (main) thread after ``seconds``: one slow proof must not stall the whole run."""

    def stop(signum: int, frame: Any) -> None:
        raise Stopped

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def measure(
    name: str,
    definition: FSMDefinition,
    new_resolver: Callable[[], Resolve],
    *,
    target: float | None,
    repeat: int,
    slow: float,
    timeout: float,
    max_configurations: int,
) -> Row:
    """Best of ``repeat`` rounds of prove and of lint on one definition, taking turns."""
    from llm_fsm.lint import ProofReport, prove

    def run_lint() -> None:
        lint_definition(definition)
        if definition.flows or any(s.flows for s in definition.states.values()):
            lint_flows(definition, new_resolver())

    best_prove = best_lint = float("inf")
    report: ProofReport | None = None
    rounds = 0
    for _ in range(repeat):
        rounds += 1
        gc.collect()
        start = time.perf_counter()
        run_lint()
        best_lint = min(best_lint, time.perf_counter() - start)
        gc.collect()
        start = time.perf_counter()
        try:
            with time_limit(timeout):
                report = prove(definition, resolve=new_resolver(), max_configurations=max_configurations)
        except Stopped:
            best_prove = min(best_prove, time.perf_counter() - start)
            break
        seconds = time.perf_counter() - start
        best_prove = min(best_prove, seconds)
        if seconds > slow:
            break
    row = Row(
        name, len(definition.states), 0, 0, max_configurations, False, {}, [], best_prove, best_lint, target, rounds
    )
    if report is None:
        row.stopped = True
        return row
    row.explored, row.turns, row.complete = report.explored, report.turns, report.complete
    row.statuses = {p: report.status(p) for p in PROPERTIES}
    row.findings = [
        f"{f.code} {f.property} at {f.state}" + (f" in {f.flow}" if f.flow else "") for f in report.findings
    ]
    row.reasons = {p: r.reason for p, r in report.properties.items() if r.reason}
    return row


def rows_for(args: argparse.Namespace) -> list[Row]:
    from llm_fsm.utilities import load_fsm_definition

    rows: list[Row] = []
    options = {
        "repeat": args.repeat,
        "slow": args.slow,
        "timeout": args.timeout,
        "max_configurations": args.max_configurations,
    }
    if not args.json:
        print(HEADER)
    wanted = None if args.shipped == "all" else {s for s in args.shipped.split(",") if s and s != "none"}
    for path in shipped_files():
        name = shipped_name(path)
        if wanted is not None and name not in wanted and path.stem not in wanted:
            continue
        definition = load_fsm_definition(str(path), cache=None)
        rows.append(measure(name, definition, file_resolver, target=SHIPPED_TARGET, **options))
        print_row(rows[-1], args.json)
    for size in [int(s) for s in args.states.split(",") if s.strip()]:
        definition = _prove_defs.definition(size, seed=args.seed, subflow=args.subflow)
        name = f"generated {size}" + (" +flow" if args.subflow else "")
        rows.append(measure(name, definition, _prove_defs.resolver, target=GENERATED_TARGETS.get(size), **options))
        print_row(rows[-1], args.json)
    return rows


_SHORT = {"proved": "proved", "failed": "FAILED", "unknown": "unknown"}
HEADER = (
    f"{'definition':<34} {'states':>6} {'explored':>8} {'turns':>8} {'bound':>7} {'complete':>8}  "
    + " ".join(f"{p:>13}" for p in PROPERTIES)
    + f" {'prove s':>8} {'lint s':>7} {'÷ lint':>7} {'target':>6} {'÷ target':>12}"
)


def print_row(row: Row, as_json: bool) -> None:
    if as_json:
        return
    target = verdict = "-"
    if row.target_s is not None:
        target = f"{row.target_s:.0f} s"
        verdict = f"{row.prove_s / row.target_s:.3f} " + ("met" if row.met else "MISSED")
    if row.stopped:
        print(
            f"{row.name:<34} {row.states:>6}  proof stopped by --timeout after {row.prove_s:.0f} s; "
            f"lint {row.lint_s:.3f} s; target {target}: " + ("MISSED" if row.target_s is not None else "-"),
            flush=True,
        )
        return
    print(
        f"{row.name:<34} {row.states:>6} {row.explored:>8,} {row.turns:>8,} {row.bound:>7,} "
        f"{'yes' if row.complete else 'NO':>8}  "
        + " ".join(f"{_SHORT.get(row.statuses[p], row.statuses[p]):>13}" for p in PROPERTIES)
        + f" {row.prove_s:>8.3f} {row.lint_s:>7.3f} {row.prove_s / row.lint_s:>7.1f} {target:>6} {verdict:>12}",
        flush=True,
    )
    for finding in row.findings:
        print(f"    {finding}")
    for prop, reason in row.reasons.items():
        if row.statuses.get(prop) == "unknown":
            print(f"    {prop} unknown: {reason}")


def summary(rows: Sequence[Row], args: argparse.Namespace) -> list[str]:
    lines = [
        f"best of {args.repeat} rounds (a proof slower than {args.slow:g} s is not repeated); "
        f"max_configurations {args.max_configurations:,}; generated forms: seed {args.seed}"
        + (", with a sub-flow" if args.subflow else ""),
        "explored: abstract configurations the prover explored; turns: engine turns (run_turn) it ran to explore them; "
        "bound: where it stops (complete NO = stopped there)",
        "lint s: lint_definition (+ lint_flows when the definition declares sub-flows) on the same definition",
        "÷ lint: prove s over lint s; ÷ target: prove s over the issue's target (met: <= 1)",
    ]
    shipped = [r for r in rows if r.target_s == SHIPPED_TARGET and not r.name.startswith("generated")]
    if shipped:
        slowest = max(shipped, key=lambda r: r.prove_s)
        ok = all(r.met for r in shipped)
        lines.append(
            f"target: each shipped definition <= {SHIPPED_TARGET:g} s: {'met' if ok else 'MISSED'} "
            f"(slowest {slowest.name}, {slowest.prove_s:.3f} s)"
        )
    for row in rows:
        if row.name.startswith("generated") and row.target_s is not None:
            lines.append(
                f"target: {row.name} states <= {row.target_s:g} s: {'met' if row.met else 'MISSED'} "
                f"({row.prove_s:.3f} s)"
            )
    incomplete = [r.name for r in rows if not r.complete and not r.stopped]
    if incomplete:
        lines.append("stopped at the bound (properties it could not decide are unknown): " + ", ".join(incomplete))
    stopped = [r.name for r in rows if r.stopped]
    if stopped:
        lines.append(f"stopped after --timeout {args.timeout:g} s: " + ", ".join(stopped))
    return lines


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--shipped",
        default="all",
        help="shipped definitions to prove, by name (simple_greeting, flows/check_booking), comma-separated; "
        "'all' or 'none'",
    )
    parser.add_argument("--states", default=",".join(str(s) for s in SIZES), help="sizes of the generated forms")
    parser.add_argument("--seed", type=int, default=0, help="the generated forms' seed")
    parser.add_argument("--subflow", action="store_true", help="the generated forms declare a sub-flow")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per definition (best of them)")
    parser.add_argument("--slow", type=float, default=10.0, help="a proof slower than this (s) is not repeated")
    parser.add_argument("--timeout", type=float, default=300.0, help="a proof is stopped after this (s)")
    parser.add_argument("--max-configurations", type=int, default=20_000, help="the prover's bound")
    parser.add_argument("--json", action="store_true", help="the same figures as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows = rows_for(args)
    lines = summary(rows, args)
    if args.json:
        document = {
            "rows": [{**asdict(r), "met": r.met} for r in rows],
            "summary": lines,
        }
        print(json.dumps(document, indent=2))
    else:
        for line in lines:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
