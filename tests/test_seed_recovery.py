"""The seed's "Error Detection and Recovery" example runs as written.

Its recovery path sets ``fsm_manager.instances[conversation_id].current_state``, which the seed's own
manager allowed and ours answers through ``force_state`` (actor ``application``, traced). The snippet is
copied below verbatim (and compared with the seed when the seed file is present); the definitions it names
are under tests/data/seed_recovery/ (customer_support.json is the seed's own "FSM Definition Example").
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from llm_fsm.engine._records import LLMRequest
from llm_fsm.errors import (
    InvalidTransitionError,
    LLMResponseError,
    OperatorError,
    StateNotFoundError,
)
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager

DATA = Path(__file__).parent / "data" / "seed_recovery"
SEED = Path(__file__).resolve().parents[1].parent / "shared" / "seeds" / "003_8fb81bbc71d938c1.txt"

RECOVERY = """\
try:
    # Start a conversation
    conversation_id, response = fsm_manager.start_conversation("customer_support.json")
    
    # Process first message
    user_input = "I'm having a problem with my subscription"
    response = fsm_manager.process_message(conversation_id, user_input)
    
except StateNotFoundError as e:
    logging.error(f"State not found: {str(e)}")
    # Recover by creating a new conversation with a different FSM
    conversation_id, response = fsm_manager.start_conversation("fallback_support.json")
    
except InvalidTransitionError as e:
    logging.error(f"Invalid transition: {str(e)}")
    # Force transition to a valid state
    fsm_manager.instances[conversation_id].current_state = "standard_support"
    
except LLMResponseError as e:
    logging.error(f"LLM response error: {str(e)}")
    # Provide fallback response
    response = "I'm sorry, I'm having trouble processing your request. Could you please rephrase?"
"""


def proposing(target: str) -> FunctionLLM:
    """A model whose every turn proposes ``target``: from the greeting, one the definition does not allow."""

    def answer(request: LLMRequest) -> dict[str, Any]:
        proposal = target if request.purpose == "turn" else ""
        return {"transition": {"target_state": proposal, "context_update": {}}, "message": "Let me help."}

    return FunctionLLM(answer)


def run_recovery(fsm_manager: FSMManager) -> dict[str, Any]:
    scope: dict[str, Any] = {
        "fsm_manager": fsm_manager,
        "logging": logging,
        "StateNotFoundError": StateNotFoundError,
        "InvalidTransitionError": InvalidTransitionError,
        "LLMResponseError": LLMResponseError,
    }
    exec(compile(RECOVERY, "seed: Error Detection and Recovery", "exec"), scope)  # noqa: S102 - the seed's text
    return scope


def test_the_snippet_is_the_seeds_text() -> None:
    if not SEED.exists():
        pytest.skip(f"seed file not found at {SEED}")
    section = SEED.read_text(encoding="utf-8").split("## Error Detection and Recovery", 1)[1]
    assert section.split("```python\n", 1)[1].split("```", 1)[0] == RECOVERY


def test_the_seeds_recovery_forces_the_state_after_an_invalid_transition(monkeypatch, caplog) -> None:
    monkeypatch.chdir(DATA)
    fsm_manager = FSMManager(llm_interface=proposing("billing_issues"), strict=True)
    scope = run_recovery(fsm_manager)
    conversation_id = scope["conversation_id"]
    assert "Invalid transition" in caplog.text
    assert fsm_manager.get_current_state(conversation_id) == "standard_support"
    event = fsm_manager.get_trace(conversation_id)[-1]
    assert (event.event, event.data["actor"], event.data["target"]) == (
        "operator_force_state",
        "application",
        "standard_support",
    )


def test_the_recovered_conversation_goes_on_from_the_forced_state(monkeypatch) -> None:
    monkeypatch.chdir(DATA)
    fsm_manager = FSMManager(llm_interface=proposing("general_resolution"), strict=True)
    conversation_id = run_recovery(fsm_manager)["conversation_id"]
    fsm_manager.process_message(conversation_id, "My card was charged twice")
    assert fsm_manager.get_current_state(conversation_id) == "general_resolution"


def test_the_seeds_fallback_path_starts_the_fallback_definition(monkeypatch) -> None:
    monkeypatch.chdir(DATA)
    fsm_manager = FSMManager(llm_interface=proposing(""), strict=True)

    def missing_state(*args: Any, **kwargs: Any) -> str:
        raise StateNotFoundError("state 'greeting' is not declared")

    monkeypatch.setattr(fsm_manager, "process_message", missing_state)
    conversation_id = run_recovery(fsm_manager)["conversation_id"]
    assert fsm_manager.get_instance(conversation_id).fsm_id == "fallback_support.json"


def test_instances_reads_the_stored_conversation(monkeypatch) -> None:
    monkeypatch.chdir(DATA)
    fsm_manager = FSMManager(llm_interface=proposing(""))
    cid, _ = fsm_manager.start_conversation("customer_support.json")
    view = fsm_manager.instances[cid]
    assert view.current_state == "greeting" and view.conversation_id == cid
    assert cid in fsm_manager.instances and "nope" not in fsm_manager.instances
    assert list(fsm_manager.instances) == [cid] and len(fsm_manager.instances) == 1


def test_instances_finds_a_conversation_that_belongs_to_a_user(monkeypatch) -> None:
    monkeypatch.chdir(DATA)
    fsm_manager = FSMManager(llm_interface=proposing(""))
    cid, _ = fsm_manager.start_conversation("customer_support.json", user_id="u1")
    fsm_manager.instances[cid].current_state = "standard_support"
    assert fsm_manager.get_current_state(cid, user_id="u1") == "standard_support"


def test_instances_of_an_unknown_id_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        FSMManager().instances["nope"]


def test_setting_any_other_attribute_through_instances_is_refused_naming_the_right_calls(monkeypatch) -> None:
    monkeypatch.chdir(DATA)
    fsm_manager = FSMManager(llm_interface=proposing(""))
    cid, _ = fsm_manager.start_conversation("customer_support.json")
    with pytest.raises(OperatorError, match="force_state.*set_context"):
        fsm_manager.instances[cid].context = {}
