"""The prover's benchmarks (``benchmarks/prove.py``, ``benchmarks/prove_hostile.py``) and the forms they generate.

No timing is asserted: the scripts print figures. These tests check that the
generated forms are definitions the engine loads and lint passes, shaped like
real forms, the same for the same seed; and that each script runs on a tiny
input, prints its figures and exits 0.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from llm_fsm.definition._model import FSMDefinition  # noqa: E402 - after the benchmarks folder is on the path
from llm_fsm.lint import lint_definition, lint_flows  # noqa: E402
from llm_fsm.llm.fakes import FunctionLLM  # noqa: E402
from llm_fsm.manager import FSMManager  # noqa: E402

defs = importlib.import_module("_prove_defs")
prove_benchmark = importlib.import_module("prove")

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


@pytest.mark.parametrize("states", [defs.MIN_STATES, 20, 50, 300])
@pytest.mark.parametrize("subflow", [False, True])
def test_generated_forms_load_and_lint_without_errors(states: int, subflow: bool) -> None:
    for seed in range(3):
        definition = FSMDefinition.model_validate(defs.generate(states, seed=seed, subflow=subflow))
        diagnostics = lint_definition(definition) + lint_flows(definition, defs.resolver())

        assert [d for d in diagnostics if d.severity.value == "error"] == []
        assert len(definition.states) == states


def test_the_sub_flow_of_a_generated_form_lints_without_errors() -> None:
    sub = FSMDefinition.model_validate(defs.subflow_document())

    assert [d for d in lint_definition(sub) if d.severity.value == "error"] == []


def test_a_generated_form_is_the_same_for_the_same_seed_and_differs_for_another() -> None:
    assert defs.generate(50, seed=3) == defs.generate(50, seed=3)
    assert defs.generate(50, seed=3) != defs.generate(50, seed=4)


def test_a_generated_form_has_the_shapes_of_a_real_form() -> None:
    document = defs.generate(300)
    states = document["states"].values()
    keys = document["context_keys"].values()
    kinds = Counter("enum" if "enum" in k else k["type"] for k in keys if k.get("writable_by") != "application")
    compared = [
        c["logic"]
        for s in states
        for t in s["transitions"]
        for c in t.get("conditions", ())
        if isinstance(c.get("logic"), dict) and next(iter(c["logic"])) in (">", "==")
    ]

    assert kinds["enum"] and kinds["integer"] and kinds["boolean"]
    assert all("minimum" in k and "maximum" in k for k in keys if k["type"] == "integer")
    assert sum(1 for s in states if s.get("confirmation")) > 10
    assert sum(1 for s in states if s.get("actions")) > 10
    assert [s["id"] for s in states if not s["transitions"]] == ["done", "declined", "agent_handoff"]
    assert [s["id"] for s in states if s.get("handoff")] == ["agent_handoff"]
    assert len(compared) > 50
    assert "flows" not in document and defs.generate(300, subflow=True)["flows"][0]["name"] == defs.SUBFLOW


def cooperative_run(definition: FSMDefinition) -> list[str]:
    """The states a conversation goes through when the model answers every question in the state's first way."""

    def value(key: str) -> Any:
        declaration = (definition.context_keys or {})[key]
        if declaration.enum:
            return declaration.enum[0]
        return declaration.minimum if declaration.type == "integer" else True

    def model(request: Any) -> dict[str, Any]:
        state = definition.states[manager.get_instance(cid).current_state if cid else definition.initial_state]
        return {
            "transition": {
                "target_state": state.transitions[0].target_state if state.transitions else None,
                "context_update": {k: value(k) for k in state.required_context_keys or ()},
            },
            "message": "ok",
            "intent": "confirm" if state.confirmation else "continue",
        }

    cid = ""
    manager = FSMManager(fsm_loader=lambda _: definition, llm_interface=FunctionLLM(model))
    for state in definition.states.values():
        for action in state.actions or ():
            manager.actions.register(action.call, lambda value: {"ok": True})
    cid, _ = manager.start_conversation(definition)
    visited = [manager.get_instance(cid).current_state]
    while not manager.get_instance(cid).ended and len(visited) < 3 * len(definition.states):
        manager.process_message(cid, "yes")
        visited.append(manager.get_instance(cid).current_state)
    return visited


def test_a_cooperative_model_fills_a_generated_form_to_its_end() -> None:
    ends = {cooperative_run(defs.definition(20, seed=seed))[-1] for seed in range(4)}

    assert ends <= {"done", "declined", "agent_handoff"} and "done" in ends


def test_the_prove_benchmark_prints_its_figures_and_exits_0() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/prove.py", "--shipped", "simple_greeting", "--states", "6", "--repeat", "1"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split()[:6] == ["definition", "states", "explored", "turns", "bound", "complete"]
    assert "÷ lint" in header and "÷ target" in header
    greeting = next(r for r in rows if r.startswith("simple_greeting"))
    generated = next(r for r in rows if r.startswith("generated 6"))
    assert greeting.split()[1] == "2" and " 2 s " in greeting and ("met" in greeting or "MISSED" in greeting)
    assert generated.split()[2] == "6" and generated.split()[6] in ("yes", "NO")
    assert any(r.startswith("target: each shipped definition <= 2 s: ") for r in rows)


def test_the_prove_benchmark_gives_the_same_figures_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert prove_benchmark.main(["--shipped", "none", "--states", "6", "--subflow", "--repeat", "1", "--json"]) == 0

    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert (row["name"], row["states"], row["target_s"], row["met"]) == ("generated 6 +flow", 6, None, None)
    assert set(row["statuses"]) == {"no_trap", "progress", "no_model_gate", "flows_return"}
    assert row["explored"] > 0 and row["bound"] > 0 and row["prove_s"] > 0 and row["lint_s"] > 0


def test_the_hostile_cross_check_counts_the_misses_and_exits_0(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/prove_hostile.py",
            "--runs",
            "20",
            "--turns",
            "3",
            "--max-configurations",
            "50",
            "--found",
            str(tmp_path),
        ],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "visited configurations the prover had called unreachable: 0 (must be 0): HELD" in done.stdout
    assert list(tmp_path.iterdir()) == []
