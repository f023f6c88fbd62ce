"""Start-up time: ``import llm_fsm`` and a cold ``fsm-lint`` beside bare Python and ``import pydantic``.

Each case is a fresh interpreter (``subprocess``), timed from launch to exit.
Every case runs once untimed first, so the bytecode is cached and what is
measured is the import work itself, not compilation. Then ``--runs`` rounds
(default 7) run every case once each, in ABBA order (forward on one round,
backward on the next), so load on the machine hits all cases alike; the
figure is the best (fastest) of the rounds, the usual measure for start-up,
with the median beside it. Ratios are against ``import pydantic`` measured in
the same run.

Cases:

- ``python -c pass``: the interpreter alone (with ``site``);
- ``import pydantic``: the baseline of the targets. pydantic 2 loads its
  names lazily too, so this is little more than its package ``__init__``;
- ``from pydantic import BaseModel``: for reference, the floor of anything that
  defines a model;
- ``import llm_fsm``: the package (lazy since PEP 562 exports: loads ``__init__`` only);
- ``llm_fsm.FSMManager``: the package and the manager it loads on first access;
- ``fsm-lint <file>``: the console script of the lint command on one small
  definition (``definitions/simple_greeting.yaml`` unless ``--file``): the
  installed script when it is found beside the interpreter, else the same two
  lines (``from llm_fsm.cli import lint_main; lint_main()``) with ``-c``.
- two cases that show where the lint time could go, for reference (no
  target): ``import llm_fsm.definition`` (the definition models: pydantic,
  PyYAML and building the models) and the modules ``fsm-lint`` itself runs on
  (``click``, ``llm_fsm.lint``, ``llm_fsm.loading``) without the ``llm_fsm.cli``
  package, whose ``__init__`` imports every command (``llm_fsm.cli.lint`` cannot
  be imported without it).

Then ``python -X importtime`` on the ``fsm-lint`` case (``--importtime`` picks
another case): the modules with the largest cumulative and self import time
(median of three runs), and self time summed per top-level package, so it
shows what dominates.

Targets (hardening issue): ``import llm_fsm`` ≤ 2× ``import pydantic``; cold
``fsm-lint`` on one file ≤ 3× ``import pydantic``.

This source tree is imported, whatever else is installed: every child gets
``PYTHONPATH=<repository root>``, and a first check fails loudly if
``llm_fsm`` resolves anywhere else.

Run from the repository root::

    python benchmarks/startup.py
    python benchmarks/startup.py --runs 15 --top 20
    python benchmarks/startup.py --importtime manager
    python benchmarks/startup.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
DEFAULT_FILE = REPO_ROOT / "definitions" / "simple_greeting.yaml"
TARGETS = {"import llm_fsm": 2.0, "fsm-lint": 3.0}
"""Case → the largest allowed ratio to ``import pydantic``."""
BASELINE = "import pydantic"


def child_env() -> dict[str, str]:
    """The environment of every child: this tree first on the path, bytecode allowed, no model-cost download."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


def fsm_lint_command(python: str, file: Path) -> tuple[list[str], str]:
    """The ``fsm-lint`` console script beside ``python`` when installed there, else its equivalent with ``-c``."""
    scripts = Path(sysconfig.get_path("scripts"))
    script = scripts / "fsm-lint"
    if script.is_file() and os.access(script, os.X_OK):
        first = script.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
        if first and first[0].startswith("#!") and Path(first[0][2:].strip()).resolve() == Path(python).resolve():
            return [str(script), str(file)], f"fsm-lint {file.name} (the console script)"
    code = "import sys; from llm_fsm.cli import lint_main; sys.argv[0] = 'fsm-lint'; sys.exit(lint_main())"
    return [python, "-c", code, str(file)], f"python -c '<fsm-lint console script>' {file.name}"


def cases(python: str, file: Path) -> dict[str, dict[str, Any]]:
    lint, lint_label = fsm_lint_command(python, file)
    return {
        "python -c pass": {"argv": [python, "-c", "pass"], "label": "python -c pass"},
        BASELINE: {"argv": [python, "-c", "import pydantic"], "label": "python -c 'import pydantic'"},
        "BaseModel": {
            "argv": [python, "-c", "from pydantic import BaseModel"],
            "label": "python -c 'from pydantic import BaseModel'",
        },
        "import llm_fsm": {"argv": [python, "-c", "import llm_fsm"], "label": "python -c 'import llm_fsm'"},
        "manager": {
            "argv": [python, "-c", "import llm_fsm; llm_fsm.FSMManager"],
            "label": "python -c 'import llm_fsm; llm_fsm.FSMManager'",
        },
        "fsm-lint": {"argv": lint, "label": lint_label},
        "definition": {
            "argv": [python, "-c", "import llm_fsm.definition"],
            "label": "python -c 'import llm_fsm.definition'",
        },
        "lint modules": {
            "argv": [python, "-c", "import click, llm_fsm.lint, llm_fsm.loading"],
            "label": "python -c 'import click, llm_fsm.lint, llm_fsm.loading'",
        },
    }


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    return elapsed, done.returncode, done.stdout + done.stderr


def check_tree(python: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [python, "-c", "import llm_fsm; print(llm_fsm.__file__)"],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    found = done.stdout.strip()
    if done.returncode != 0 or not found.startswith(str(REPO_ROOT) + os.sep):
        raise SystemExit(f"llm_fsm does not resolve to this tree ({REPO_ROOT}): {found or done.stderr.strip()}")
    return found


def measure(all_cases: dict[str, dict[str, Any]], runs: int, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Warm every case once (bytecode cached), then ``runs`` ABBA rounds; seconds per run per case."""
    out: dict[str, dict[str, Any]] = {}
    for name, case in all_cases.items():
        _, code, output = run_once(case["argv"], env)
        out[name] = {"label": case["label"], "exit": code, "output": output.strip()[-500:], "seconds": []}
    names = list(all_cases)
    for round_index in range(runs):
        for name in names if round_index % 2 == 0 else names[::-1]:
            elapsed, _, _ = run_once(all_cases[name]["argv"], env)
            out[name]["seconds"].append(elapsed)
    for entry in out.values():
        entry["best_s"] = min(entry["seconds"])
        entry["median_s"] = statistics.median(entry["seconds"])
    return out


def parse_importtime(stderr: str) -> list[dict[str, Any]]:
    """The import tree of one ``-X importtime`` run: nodes with module, self/cumulative µs, children, parent.

    importtime prints a module after everything it imported (post-order), indented
    two spaces per level, so the lines deeper than a module that come just before
    it are its children.
    """
    nodes: list[dict[str, Any]] = []
    stack: list[dict[str, Any]] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        try:
            self_us, cumulative_us, field = line[len("import time:") :].split("|")
            node: dict[str, Any] = {
                "module": field.strip(),
                "depth": (len(field) - len(field.lstrip()) - 1) // 2,
                "self_us": int(self_us),
                "cumulative_us": int(cumulative_us),
                "children": [],
                "parent": None,
            }
        except ValueError:
            continue
        while stack and stack[-1]["depth"] > node["depth"]:
            child = stack.pop()
            child["parent"] = node
            node["children"].insert(0, child)
        stack.append(node)
        nodes.append(node)
    return nodes


def importtime(argv: list[str], env: dict[str, str], repeats: int = 3) -> tuple[dict[str, dict[str, float]], Any]:
    """Per module, median self and cumulative µs under ``-X importtime`` over ``repeats`` runs; and the last tree.

    A module that shows up twice in one run (a circular import re-entered) counts
    its self times added and its largest cumulative time.
    """
    if argv[0] != sys.executable:
        argv = [sys.executable, *argv]  # the console script is a Python file: run it under -X importtime
    command = [argv[0], "-X", "importtime", *argv[1:]]
    samples: dict[str, list[tuple[int, int]]] = {}
    nodes: list[dict[str, Any]] = []
    for _ in range(repeats):
        done = subprocess.run(command, env=env, cwd=REPO_ROOT, capture_output=True, text=True)
        nodes = parse_importtime(done.stderr)
        run: dict[str, tuple[int, int]] = {}
        for node in nodes:
            self_us, cumulative_us = run.get(node["module"], (0, 0))
            run[node["module"]] = (self_us + node["self_us"], max(cumulative_us, node["cumulative_us"]))
        for module, figures in run.items():
            samples.setdefault(module, []).append(figures)
    modules = {
        module: {
            "self_us": statistics.median(s for s, _ in values),
            "cumulative_us": statistics.median(c for _, c in values),
        }
        for module, values in samples.items()
    }
    return modules, nodes


def _top(module: str) -> str:
    return module.split(".")[0]


def chain(node: dict[str, Any]) -> list[str]:
    """The modules from the root import down to ``node``."""
    out = []
    while node is not None:
        out.append(node["module"])
        node = node["parent"]
    return out[::-1]


def entry_points(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per outside package (third-party or stdlib): its cumulative µs and who first imports it.

    An entry is a node of the package whose parent belongs to another package;
    a package's time is the sum over its entries. Imports made by the
    interpreter's own start-up (under ``site``) are left out: ``python -c pass``
    pays them too. Packages nest (pydantic imports pydantic_core), so the
    figures overlap.
    """
    packages: dict[str, dict[str, Any]] = {}
    for node in nodes:
        package = _top(node["module"])
        parent = node["parent"]
        path = chain(node)
        if package == "llm_fsm" or path[0] == "site" or (parent is not None and _top(parent["module"]) == package):
            continue
        entry = packages.setdefault(package, {"package": package, "cumulative_us": 0, "first": None})
        entry["cumulative_us"] += node["cumulative_us"]
        if entry["first"] is None:
            ours: list[str] = []
            for module in path[:-1]:
                if _top(module) == "llm_fsm" and (not ours or ours[-1] != module):
                    ours.append(module)
            direct = path[-2] if len(path) > 1 else None
            entry["first"] = {"module": node["module"], "imported_by": direct, "our_chain": ours[-3:]}
    return sorted(packages.values(), key=lambda e: -e["cumulative_us"])


def command_modules(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``llm_fsm.cli`` imports directly (its command modules and helpers), by cumulative µs."""
    for node in nodes:
        if node["module"] == "llm_fsm.cli":
            kids = [{"module": c["module"], "cumulative_us": c["cumulative_us"]} for c in node["children"]]
            return sorted(kids, key=lambda k: -k["cumulative_us"])
    return []


def by_package(modules: dict[str, dict[str, float]]) -> dict[str, float]:
    """Self µs summed by top-level package (``llm_fsm`` split one level down: ``llm_fsm.definition`` ...)."""
    totals: dict[str, float] = {}
    for module, figures in modules.items():
        parts = module.split(".")
        key = ".".join(parts[:2]) if parts[0] == "llm_fsm" and len(parts) > 1 else parts[0]
        totals[key] = totals.get(key, 0.0) + figures["self_us"]
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def report(result: dict[str, Any], top: int) -> None:
    figures = result["cases"]
    base = figures[BASELINE]["best_s"]
    print(
        f"Start-up, fresh interpreters, bytecode cached; best and median of {result['runs']} ABBA rounds "
        f"(Python {result['python_version']}, {os.cpu_count()} CPUs)"
    )
    print(f"llm_fsm from {result['llm_fsm_file']}")
    print()
    print(f"  {'case':<72}{'best s':>9}{'median s':>10}{'x pydantic':>12}  target")
    for name, entry in figures.items():
        target = TARGETS.get(name)
        ratio = entry["best_s"] / base
        verdict = "" if target is None else f"<= {target:g}x  {'met' if ratio <= target else 'MISSED'}"
        failed = "" if entry["exit"] == 0 else f"  (exit {entry['exit']}: {entry['output'][-200:]})"
        print(
            f"  {entry['label']:<72}{entry['best_s']:>9.3f}{entry['median_s']:>10.3f}{ratio:>12.2f}  {verdict}{failed}"
        )
    bare = figures["python -c pass"]["best_s"]
    print()
    print(
        "  above bare Python: "
        + ", ".join(
            f"{name} +{(entry['best_s'] - bare) * 1000:.0f} ms"
            for name, entry in figures.items()
            if name != "python -c pass"
        )
    )
    modules = result["importtime"]["modules"]
    total = sum(m["self_us"] for m in modules.values())
    print()
    print(
        f"python -X importtime, {figures[result['importtime']['case']]['label']} "
        f"(median of 3 runs; {len(modules)} modules, {total / 1000:.0f} ms of imports in all):"
    )
    print(f"  top {top} by cumulative time (a package includes what it imports):")
    ranked = sorted(modules.items(), key=lambda kv: -kv[1]["cumulative_us"])[:top]
    for module, m in ranked:
        print(f"    {m['cumulative_us'] / 1000:>8.1f} ms  {module}")
    print(f"  top {top} by self time (the module's own code):")
    for module, m in sorted(modules.items(), key=lambda kv: -kv[1]["self_us"])[:top]:
        print(f"    {m['self_us'] / 1000:>8.1f} ms  {module}")
    ours = sum(m["self_us"] for name, m in modules.items() if _top(name) == "llm_fsm")
    print(
        f"  self time of our own modules: {ours / 1000:.1f} ms ({ours / total:.0%}; pydantic builds a model class "
        "while its module runs, so model building is counted here)"
    )
    print("  self time by package (llm_fsm by subpackage):")
    for package, us in list(result["importtime"]["by_package"].items())[:top]:
        print(f"    {us / 1000:>8.1f} ms  {us / total:>5.1%}  {package}")
    cli = result["importtime"]["cli_imports"]
    if cli:
        print("  what llm_fsm.cli imports at its own import (cumulative; every command is loaded for any command):")
        for kid in cli[:top]:
            print(f"    {kid['cumulative_us'] / 1000:>8.1f} ms  {kid['module']}")
    print(
        "  outside packages (after interpreter start-up), by cumulative time (nested packages overlap),\n"
        "  and the import that first brings each in, back to our modules:"
    )
    for entry in result["importtime"]["entry_points"][:top]:
        first = entry["first"]
        hops = [first["module"]]
        if first["imported_by"] and _top(first["imported_by"]) != "llm_fsm":
            hops.append(first["imported_by"])
        hops += list(reversed(first["our_chain"]))
        print(f"    {entry['cumulative_us'] / 1000:>8.1f} ms  {entry['package']:<16} {' <- '.join(hops)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="timed rounds; the best is reported (default 7)")
    parser.add_argument("--file", type=Path, default=DEFAULT_FILE, help="the definition fsm-lint checks")
    parser.add_argument("--top", type=int, default=10, help="modules listed from -X importtime (default 10)")
    parser.add_argument(
        "--importtime",
        default="fsm-lint",
        choices=["fsm-lint", "manager", "import llm_fsm", BASELINE, "BaseModel", "definition", "lint modules"],
        help="the case analysed with -X importtime (default fsm-lint)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    python = sys.executable
    env = child_env()
    found = check_tree(python, env)
    all_cases = cases(python, args.file.resolve())
    figures = measure(all_cases, args.runs, env)
    modules, tree = importtime(all_cases[args.importtime]["argv"], env)
    result: dict[str, Any] = {
        "python": python,
        "python_version": sys.version.split()[0],
        "llm_fsm_file": found,
        "runs": args.runs,
        "cases": figures,
        "ratios_to_pydantic": {name: e["best_s"] / figures[BASELINE]["best_s"] for name, e in figures.items()},
        "targets": {
            name: {
                "max_ratio": limit,
                "ratio": figures[name]["best_s"] / figures[BASELINE]["best_s"],
                "met": figures[name]["best_s"] / figures[BASELINE]["best_s"] <= limit,
            }
            for name, limit in TARGETS.items()
        },
        "importtime": {
            "case": args.importtime,
            "modules": modules,
            "by_package": by_package(modules),
            "entry_points": entry_points(tree),
            "cli_imports": command_modules(tree),
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result, args.top)
    return 0 if all(entry["exit"] == 0 for entry in figures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
