"""Conversations to audit: a shipped definition driven by a scripted model, on the store a test asks for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llm_fsm import FSMManager
from llm_fsm.engine._records import LLMRequest
from llm_fsm.loading import load_fsm_definition
from llm_fsm.testing import FunctionLLM

DEFINITIONS = Path(__file__).resolve().parents[2] / "definitions"

LOAN_TURNS: list[tuple[str, dict[str, Any]]] = [
    ("Yes, let's do it.", {"target_state": "collect_income", "message": "What's your gross monthly income?"}),
    (
        "I make 6,000 a month before tax.",
        {"target_state": "collect_debts", "context_update": {"monthly_income": 6000}, "message": "And your debts?"},
    ),
    (
        "Rent is 1,200 and my car loan is 300 a month.",
        {
            "target_state": "collect_employment",
            "context_update": {"monthly_debt_payments": 1500},
            "message": "Your employment?",
        },
    ),
    (
        "I've been working full time as a nurse for six years.",
        {
            "target_state": "needs_review",
            "context_update": {"employment_status": "full_time", "years_employed": 6},
            "message": "I'll pass this to a loan officer.",
        },
    ),
]
"""A loan applicant the approval rule approves although the model proposes a review (guarded override)."""


def loan_model(turns: int = len(LOAN_TURNS)) -> FunctionLLM:
    """The model of ``LOAN_TURNS``: each turn call gets the next reply; openings and rewrites a plain message."""
    replies = [reply for _, reply in LOAN_TURNS[:turns]]

    def answer(request: LLMRequest) -> dict[str, Any]:
        if request.purpose == "turn":
            return replies.pop(0)
        return {"target_state": "", "message": f"({request.purpose})"}

    return FunctionLLM(answer)


@pytest.fixture
def loan_definition() -> Any:
    return load_fsm_definition(DEFINITIONS / "loan_prequalification.yaml")


@pytest.fixture
def loan_conversation(loan_definition: Any) -> Callable[..., tuple[FSMManager, str]]:
    """A manager on ``store`` and one loan conversation run ``turns`` turns deep."""

    def run(store: str = "memory://", turns: int = len(LOAN_TURNS), **manager: Any) -> tuple[FSMManager, str]:
        llm = loan_model(turns)
        fsm = FSMManager(fsm_loader=lambda _: loan_definition, llm_interface=llm, store=store, **manager)
        cid, _ = fsm.start_conversation("loan")
        for message, _ in LOAN_TURNS[:turns]:
            fsm.process_message(cid, message)
        return fsm, cid

    return run
