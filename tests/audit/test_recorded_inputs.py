"""Every turn record keeps what deciding the turn again needs (issue 23, item 1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_fsm.audit._redecide import decision_of, redecide
from llm_fsm.audit._versions import Versions, definition_of, version_document
from llm_fsm.engine import EngineConfig


def test_a_turn_record_names_the_definition_version_it_ran_on(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(turns=1)
    record = fsm.get_instance(cid).turns[-1]
    assert record.inputs is not None
    assert record.inputs.definition == fsm.get_instance(cid).definition_hash


def test_a_turn_record_keeps_the_model_reply_as_parsed(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(turns=2)
    tape = fsm.get_instance(cid).turns[-1].inputs.tape
    replies = [entry["reply"] for entry in tape if entry["effect"] == "llm" and entry["purpose"] == "turn"]
    assert replies[0]["transition"]["context_update"] == {"monthly_income": 6000}


def test_a_turn_record_keeps_the_conversation_as_the_turn_found_it(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(turns=2)
    before = fsm.get_instance(cid).turns[-1].inputs.before
    assert before["current_state"] == "collect_income"
    assert before["context"]["data"] == {}


def test_explain_never_shows_the_recorded_inputs(loan_conversation: Callable[..., Any]) -> None:
    # they hold the sensitive income in clear, as the hot record does; explain masks it and shows no inputs
    fsm, cid = loan_conversation(turns=2)
    assert fsm.explain(cid).inputs is None
    assert "6000" not in fsm.explain(cid).model_dump_json()


def test_sensitive_values_are_masked_in_inputs_when_asked(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(turns=2, config=EngineConfig(record_sensitive_values=False))
    inputs = fsm.get_instance(cid).turns[-1].inputs
    assert "6000" not in inputs.model_dump_json()


def test_every_recorded_turn_decides_again_the_same_way(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation()
    instance = fsm.get_instance(cid)
    versions = fsm.versions_for(instance)
    for record in instance.turns:
        again = redecide(record, versions(record.inputs.definition), versions=versions)
        assert again.record is not None and decision_of(again.record) == decision_of(record), record.index


def test_a_definition_version_reads_back_as_the_same_version(loan_definition: Any) -> None:
    document = version_document(loan_definition)
    assert definition_of(loan_definition.content_hash, document).content_hash == loan_definition.content_hash


def test_versions_reads_a_version_it_does_not_hold_from_the_store(loan_definition: Any) -> None:
    documents = {loan_definition.content_hash: version_document(loan_definition)}
    versions = Versions(documents.__getitem__)
    assert versions(loan_definition.content_hash).name == loan_definition.name
