"""Tokens and cost: every call's usage in its turn record, totals per conversation, budgets, and what is logged."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_fsm.cli import main
from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult, StateTransition
from llm_fsm.engine._turn import EngineConfig
from llm_fsm.errors import BudgetExceededError
from llm_fsm.llm._interface import LLMInterface
from llm_fsm.manager import FSMManager

FORM = FSMDefinition.model_validate(
    {
        "name": "form",
        "description": "f",
        "initial_state": "ask",
        "context_keys": {"email": {"type": "string", "format": "email"}},
        "states": {
            "ask": {
                "id": "ask",
                "description": "ask",
                "purpose": "ask",
                "required_context_keys": ["email"],
                "transitions": [
                    {
                        "target_state": "done",
                        "description": "known",
                        "conditions": [{"description": "email", "requires_context_keys": ["email"]}],
                    }
                ],
            },
            "done": {"id": "done", "description": "d", "purpose": "d", "transitions": []},
        },
    }
)


class Metered(LLMInterface):
    """A model that reports usage and price, and answers with the update it is given."""

    def __init__(self, update: dict[str, Any] | None = None, target: str = "") -> None:
        self.update, self.target, self.calls = update or {}, target, 0

    def send_request(self, request: LLMRequest) -> LLMResponse:  # pragma: no cover - complete is what runs
        raise NotImplementedError

    def complete(self, request: LLMRequest) -> LLMResult:
        self.calls += 1
        update = self.update if request.purpose == "turn" else {}
        target = self.target if request.purpose == "turn" else ""
        response = LLMResponse(transition=StateTransition(target_state=target, context_update=update), message="ok")
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110, "cached_tokens": 40}
        return LLMResult(response=response, usage=usage, cost_usd=0.002, model="metered-1")


def started(model: LLMInterface, **kwargs: Any) -> tuple[FSMManager, str]:
    manager = FSMManager(fsm_loader=lambda _id: FORM, llm_interface=model, **kwargs)
    cid, _ = manager.start_conversation("form")
    return manager, cid


def test_each_model_call_of_a_turn_is_recorded_with_its_tokens_and_price() -> None:
    manager, cid = started(Metered())
    manager.process_message(cid, "hello")
    (call,) = manager.explain(cid).llm_calls
    assert call.model == "metered-1" and call.cost_usd == 0.002
    assert call.usage == {"prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": 40}


def test_a_conversation_totals_every_call_the_opening_and_regenerations_included() -> None:
    manager, cid = started(Metered({"email": "not an email"}))  # refused: the reply is regenerated (2 calls)
    manager.process_message(cid, "my email is not an email")
    usage = manager.get_usage(cid)
    assert (usage.calls, usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (3, 300, 30, 120)
    assert usage.cost_usd == pytest.approx(0.006) and usage.tokens == 330


def test_a_conversation_past_its_token_budget_refuses_the_next_turn_before_calling_the_model() -> None:
    model = Metered()
    manager, cid = started(model, config=EngineConfig(max_conversation_tokens=200))
    manager.process_message(cid, "hello")  # 220 tokens after this turn: it started under budget
    before, calls = manager.get_instance(cid).version, model.calls
    with pytest.raises(BudgetExceededError, match="220 tokens of its 200"):
        manager.process_message(cid, "again")
    assert model.calls == calls and manager.get_instance(cid).version == before


def test_a_conversation_past_its_cost_budget_refuses_the_next_turn() -> None:
    manager, cid = started(Metered(), config=EngineConfig(max_conversation_cost_usd=0.003))
    manager.process_message(cid, "hello")
    with pytest.raises(BudgetExceededError, match="cost"):
        manager.process_message(cid, "again")


def test_litellm_calls_are_priced_from_the_bundled_price_list_offline() -> None:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from llm_fsm.llm import LiteLLMInterface

    reply = json.dumps({"transition": {"target_state": "", "context_update": {}}, "message": "Hello"})
    llm = LiteLLMInterface("gpt-4o-mini", mock_response=reply)
    result = llm.complete(LLMRequest(system_prompt="s", user_message="u"))
    assert result.model == "gpt-4o-mini" and result.cost_usd is not None and result.cost_usd > 0
    assert result.usage["prompt_tokens"] > 0


def test_a_refused_move_and_refused_values_are_logged_with_ids_and_rules_but_no_user_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    manager, cid = started(Metered({"email": "secret words"}, target="done"))
    with caplog.at_level(logging.WARNING, logger="llm_fsm.runtime"):
        manager.process_message(cid, "secret words are my email")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert cid in text and "'done' refused in state 'ask'" in text and "email (format)" in text
    assert "secret" not in text


def test_conversations_usage_lists_calls_tokens_and_cost(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/c.db"
    manager, cid = started(Metered(), store=store)
    manager.process_message(cid, "hello")
    result = CliRunner().invoke(main, ["conversations", "--store", store, "--usage"])
    assert result.exit_code == 0, result.output
    header, row = result.output.splitlines()[:2]
    assert "calls" in header and "tokens" in header and "cost" in header
    assert row.split()[5:8] == ["2", "220", "$0.0040"]
