"""Lint's work is bounded per file: findings per code, schema errors, and the descent into a broken document.

No timing here (benchmarks/lint_scaling.py times hostile files): the bounds are
asserted by counting findings and the work done, and by showing that the work
does not grow with the size of a hostile file.
"""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.definition._documents import parse_text
from llm_fsm.lint._linter import lint_data, lint_document
from llm_fsm.lint._run import MAX_FINDINGS_PER_RULE

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
lint_scaling = importlib.import_module("lint_scaling")


def state(name: str, *targets: str, **extra: Any) -> dict[str, Any]:
    transitions = [{"target_state": t, "description": f"to {t}"} for t in targets]
    return {"id": name, "description": name, "purpose": name, "transitions": transitions, **extra}


def definition(*states: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": "n",
        "description": "d",
        "initial_state": states[0]["id"],
        "states": {s["id"]: s for s in states},
        **extra,
    }


# --- findings per code ----------------------------------------------------------------------------


def test_findings_of_one_code_stop_at_the_cap_and_one_more_says_how_many_were_left_out() -> None:
    orphans = [state(f"orphan{i}") for i in range(MAX_FINDINGS_PER_RULE + 50)]
    result = lint_data(definition(state("start", "end"), state("end"), *orphans))
    unreachable = [d for d in result.diagnostics if d.code == "FSM007"]
    assert len(unreachable) == MAX_FINDINGS_PER_RULE + 1
    last = result.diagnostics[-1]
    assert last.code == "FSM007" and last.line is None and last.path == "$"
    assert last.message.startswith("50 more unreachable-state findings in this file are not shown")


def test_a_costly_hint_is_worked_out_only_for_findings_that_are_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_fsm.lint import _checks_graph

    calls: list[str] = []
    real = _checks_graph._did_you_mean
    monkeypatch.setattr(_checks_graph, "_did_you_mean", lambda word, options: calls.append(word) or real(word, options))
    start = state("start", "end", *(f"nowhere{i}" for i in range(1_000)))
    result = lint_data(definition(start, state("end")))
    assert Counter(d.code for d in result.diagnostics)["FSM006"] == MAX_FINDINGS_PER_RULE + 1
    assert len(calls) == MAX_FINDINGS_PER_RULE


def test_repeated_keys_past_those_the_parser_lists_are_counted_too() -> None:
    text = '{"name": "n",' + ",".join(['"description": "d"'] * 3_000) + "}"
    result = lint_document(parse_text(text, file="x.json"))
    repeated = [d for d in result.diagnostics if d.code == "FSM016"]
    assert len(repeated) == MAX_FINDINGS_PER_RULE + 1
    assert repeated[-1].message.startswith(f"{2_999 - MAX_FINDINGS_PER_RULE:,} more duplicate-key findings")
