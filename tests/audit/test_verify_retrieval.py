"""The audit decides a turn that retrieved again from its record: the retriever's answer is on the tape, so no
retriever is asked, and what was retrieved and cited is part of the decision it compares."""

from __future__ import annotations

from typing import Any

from llm_fsm import FSMManager
from llm_fsm.engine._chain import record_hash
from llm_fsm.testing import FunctionLLM
from tests.test_retrieve_turn import REFUND, SHIPPING, Broken, Listed, Model, faq


def conversation(retrieve: dict[str, Any], retriever: Any, turns: int = 2) -> Any:
    definition = faq(retrieve)
    manager = FSMManager(
        fsm_loader=lambda _: definition,
        llm_interface=FunctionLLM(Model("Within 30 days [refund#1].")),
        retrievers={"docs": retriever},
    )
    cid, _ = manager.start_conversation("faq")
    for message in ["can I get a refund?", "and where do you ship?"][:turns]:
        manager.process_message(cid, message)
    return manager, cid


def test_a_conversation_that_retrieved_verifies_without_asking_the_retriever_again() -> None:
    docs = Listed(REFUND, SHIPPING)
    manager, cid = conversation({"retriever": "docs"}, docs)
    asked = len(docs.queries)
    report = manager.verify(cid)
    assert report.ok, report.as_dict()
    assert [check.status for check in report.turns] == ["verified", "verified"]
    assert len(docs.queries) == asked == 2


def test_a_failed_retrieval_that_moved_the_conversation_verifies() -> None:
    manager, cid = conversation({"retriever": "docs", "on_error": "sorry"}, Broken(), turns=1)
    assert manager.explain(cid).verdict.kind == "retrieval_error"
    assert manager.verify(cid).ok


def test_a_forged_citation_with_a_rehashed_chain_fails_as_a_decision_mismatch() -> None:
    manager, cid = conversation({"retriever": "docs"}, Listed(REFUND, SHIPPING))
    log = manager.store._entries[cid].turns  # type: ignore[attr-defined]
    forged = log[0]
    forged.retrieval.cited = ["ship#1"]
    forged.chain.hash = record_hash(forged)
    log[1].chain.prev = forged.chain.hash
    log[1].chain.hash = record_hash(log[1])
    manager.store._entries[cid].record.chain_head = log[1].chain.hash  # type: ignore[attr-defined]
    report = manager.verify(cid)
    assert report.failure.index == 1 and report.failure.status == "mismatch"
    assert any(detail.startswith("retrieval:") for detail in report.failure.details)
