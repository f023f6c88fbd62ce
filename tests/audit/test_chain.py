"""The turn records form a hash chain (issue 23, item 3)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llm_fsm.engine import EngineConfig
from llm_fsm.engine._chain import record_hash


def test_each_record_names_the_hash_of_the_one_before(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation()
    records = fsm.get_instance(cid).turns
    assert records[0].chain.prev is None
    for before, after in zip(records, records[1:], strict=False):
        assert after.chain.prev == before.chain.hash


def test_a_record_hash_covers_its_content(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(turns=1)
    record = fsm.get_instance(cid).turns[0]
    assert record.chain.hash == record_hash(record)
    assert record_hash(record.model_copy(update={"reply": record.reply + "!"})) != record.chain.hash


def test_the_conversation_holds_the_head_of_its_chain(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation()
    instance = fsm.get_instance(cid)
    assert instance.chain_head == instance.turns[-1].chain.hash


def test_an_audit_key_makes_the_chain_an_hmac(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(turns=1, config=EngineConfig(audit_key=b"kept apart"))
    record = fsm.get_instance(cid).turns[0]
    assert record.chain.hash == record_hash(record, b"kept apart") != record_hash(record)
