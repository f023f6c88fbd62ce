"""The performer's own bookkeeping: what one operation records stays with that operation."""

from __future__ import annotations

from llm_fsm.definition import FSMDefinition
from llm_fsm.llm.fakes import ScriptedLLM
from llm_fsm.manager import FSMManager
from llm_fsm.runtime._performer import Performer

GREETING = FSMDefinition.model_validate(
    {
        "name": "greeting",
        "description": "d",
        "initial_state": "hello",
        "states": {"hello": {"id": "hello", "description": "d", "purpose": "say hello", "transitions": []}},
    }
)


def test_an_operation_without_a_ledger_keeps_its_model_calls_to_itself() -> None:
    """A start calls the model without a turn's ledger; its call must not land in a ledger another operation
    (or every later start, for the life of the process) would see."""
    manager = FSMManager(fsm_loader=lambda _: GREETING, llm_interface=ScriptedLLM(["Hello!", "Hello again!"]))
    manager.start_conversation("greeting")
    manager.start_conversation("greeting")
    assert Performer(manager).ledger.calls == []
    assert Performer(manager).ledger is not Performer(manager).ledger
