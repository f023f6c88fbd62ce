"""``llm-fsm test`` checks that every turn a script ran decides again the same way from its record."""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fsm.audit._verify import TurnCheck, Verification
from llm_fsm.runtime._audit import AuditAPI
from llm_fsm.scripting import run_suite

SCRIPT = Path(__file__).resolve().parents[2] / "definitions" / "conversations" / "simple_greeting.conv.yaml"


def test_a_shipped_script_recomputes() -> None:
    report = run_suite([SCRIPT])
    assert report.passed, [f for r in report.results for f in r.failures]


def test_a_turn_that_does_not_recompute_fails_its_script(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: AuditAPI, conversation_id: str, **_: object) -> Verification:
        return Verification(conversation_id, "x", turns=[TurnCheck(1, "mismatch", ("verdict: stay → chained",))])

    monkeypatch.setattr(AuditAPI, "verify", broken)
    report = run_suite([SCRIPT])
    failures = [f for r in report.results for f in r.failures]
    assert any("turn 1 does not decide again the same way" in f for f in failures), failures
