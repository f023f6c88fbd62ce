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


#: the checks that need the whole document, skipped when validation stopped
WHOLE_FILE_CODES = {"FSM005", "FSM006", "FSM007", "FSM008", "FSM009", "FSM014", "FSM015"}


# --- validation in pieces ---------------------------------------------------------------------


def large(states: int, broken: set[int] | None = None) -> dict[str, Any]:
    """A clean definition of many states (or with the listed states broken in three ways each)."""
    data = lint_scaling.generate(states, 4)
    for i in broken or ():
        s = data["states"][f"s{i}"]
        s["purpose"] = ["not", "a", "string"]
        s["transitions"][0]["priority"] = "first"
        del s["transitions"][-1]["description"]
    return data


def whole(data: Any) -> list[tuple[Any, ...]]:
    from pydantic import ValidationError

    from llm_fsm.definition._model import FSMDefinition

    try:
        FSMDefinition.model_validate(data)
    except ValidationError as exc:
        return sorted((tuple(e["loc"]), e["msg"]) for e in exc.errors(include_url=False))
    return []


def test_a_large_clean_document_validated_in_pieces_is_the_model_one_validation_builds() -> None:
    from llm_fsm.definition._model import FSMDefinition
    from llm_fsm.lint._validation import PIECE, _weight, validate

    data = large(400)
    assert _weight(data, FSMDefinition, PIECE) > PIECE  # so it is validated in pieces
    validated = validate(data, budget=MAX_FINDINGS_PER_RULE)
    assert validated.errors == [] and validated.unchecked == []
    reference = FSMDefinition.model_validate(data)
    assert validated.definition is not None
    assert validated.definition.model_dump() == reference.model_dump()
    assert validated.definition.content_hash == reference.content_hash
    condition = validated.definition.states["s7"].transitions[2].conditions[0]  # type: ignore[index]
    assert condition.compiled is not None and condition.compiled.reads == {"k7"}


def test_below_the_budget_the_errors_are_those_of_one_validation() -> None:
    from llm_fsm.lint._validation import validate

    data = large(400, broken={3, 150, 151, 300})
    validated = validate(data, budget=MAX_FINDINGS_PER_RULE)
    assert validated.definition is None and validated.unchecked == []
    assert sorted((tuple(e["loc"]), e["msg"]) for e in validated.errors) == whole(data)
    assert len(validated.errors) == 12


@pytest.mark.parametrize("shape", lint_scaling.HOSTILE_SHAPES)
def test_a_hostile_file_gets_a_bounded_list_of_findings_for_bounded_work(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llm_fsm.lint import _validation

    real = _validation._Run.call
    work: dict[str, int] = {}

    def counting(self: Any, adapter: Any, value: Any, path: Any, offset: int = 0) -> Any:
        before = len(self.errors)
        result = real(self, adapter, value, path, offset)
        work["errors"] += len(self.errors) - before
        work["items"] += len(value) if isinstance(value, (list, dict)) else 1
        return result

    monkeypatch.setattr(_validation._Run, "call", counting)

    def lint(size: int) -> tuple[Any, dict[str, int]]:
        work.update(errors=0, items=0)
        doc = parse_text(lint_scaling.hostile(size, shape), file="hostile.json")
        result = lint_document(doc)
        return result, {**work, "line steps": doc.lines.skipped}  # type: ignore[attr-defined]

    _, work_1mb = lint(1_200_000)  # past the first piece of every shape
    big, work_2mb = lint(2_400_000)
    assert work_2mb == work_1mb  # twice the file, not one more error, item validated or scanner step
    assert work_2mb["errors"] <= MAX_FINDINGS_PER_RULE + _validation.PIECE
    codes = Counter(d.code for d in big.diagnostics)
    assert not set(codes) & WHOLE_FILE_CODES  # not judged on a part of the file
    assert codes["FSM001"] <= MAX_FINDINGS_PER_RULE + 3  # the listed ones, where validation stopped, the count
    assert all(count <= MAX_FINDINGS_PER_RULE + 1 for code, count in codes.items() if code != "FSM001")
    stopped = [d for d in big.diagnostics if d.message.startswith("validation stopped")]
    assert stopped and all("were not checked" in d.message for d in stopped)
    assert big.diagnostics[-1].message.endswith("(at most 200 of one code are listed per file)")


def test_checks_that_need_the_whole_file_are_skipped_when_validation_stopped() -> None:
    data = definition(state("start", "end"), state("end"))
    data["states"]["start"]["transitions"].extend([[]] * 5_000)  # then targets states that are not validated
    data["states"].update({f"late{i}": state(f"late{i}", "nowhere") for i in range(10)})
    result = lint_data(data)
    assert {d.code for d in result.diagnostics} == {"FSM001"}  # no FSM006 for nowhere, no FSM007 for late*
    stopped = next(d for d in result.diagnostics if d.message.startswith("validation stopped"))
    assert stopped.path == "$.states" and "from 'end' on" in stopped.message
