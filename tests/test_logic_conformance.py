"""Conformance of llm_fsm.logic with published JsonLogic test data.

* tests.json, the suite published with the specification at jsonlogic.com:
  every one of its 277 cases must pass.
* the community compat suites (json-logic/compat-tables): a case that uses
  only operators we support must give the suite's answer, unless it is a
  documented deliberate difference (a strict expected failure, so the list
  cannot go stale); a case that uses an operator we do not implement must be
  rejected when compiled, never silently evaluated.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from llm_fsm.errors import LogicError
from llm_fsm.logic._checks import check_logic
from llm_fsm.logic._rules import compile_logic, evaluate_logic

DATA = Path(__file__).parent / "data" / "jsonlogic"


def _load(name: str):  # the report script and the differences table live with the data
    spec = importlib.util.spec_from_file_location(f"jsonlogic_{name}", DATA / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


report = _load("report")
differences = _load("expected_differences")

OFFICIAL = report.official_cases()
COMPAT = report.compat_cases()
SUPPORTED = [c for c in COMPAT if not c.unsupported]
UNSUPPORTED = [c for c in COMPAT if c.unsupported]


def test_the_official_suite_has_all_277_cases() -> None:
    assert len(OFFICIAL) == 277


def test_the_compat_suites_have_all_1138_cases() -> None:
    assert len(COMPAT) == 1138


@pytest.mark.parametrize(("rule", "data", "expected"), [c[1:] for c in OFFICIAL], ids=[c[0] for c in OFFICIAL])
def test_official_case_gives_the_specified_result(rule, data, expected) -> None:
    got = compile_logic(rule).evaluate(data)
    assert report.same_json(got, expected), f"{got!r} != {expected!r}"


@pytest.mark.parametrize(("rule", "data", "expected"), [c[1:] for c in OFFICIAL], ids=[c[0] for c in OFFICIAL])
def test_official_case_through_the_seed_api(rule, data, expected) -> None:
    assert report.same_json(evaluate_logic(rule, data), expected)


def _compat_param(case):
    reason = differences.EXPECTED_DIFFERENCES.get(case.id)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_compat_param(c) for c in SUPPORTED])
def test_compat_case_with_supported_operators_gives_the_suite_result(case) -> None:
    status, detail = report.run(case)
    assert status == "pass", detail


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in UNSUPPORTED])
def test_compat_case_with_an_unsupported_operator_is_rejected_at_compile_time(case) -> None:
    with pytest.raises(LogicError):
        compile_logic(case.rule)
    flagged = {i.message for i in check_logic(case.rule) if i.code == "unknown-operator"}
    assert {f"unknown operator {op!r}" for op in case.unsupported} <= flagged


def test_every_expected_difference_names_a_real_supported_case() -> None:
    supported_ids = {c.id for c in SUPPORTED}
    assert set(differences.EXPECTED_DIFFERENCES) <= supported_ids
