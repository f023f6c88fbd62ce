"""Verifying a conversation: the chain holds and every decision recomputes (issue 23, item 3)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.engine import EngineConfig
from llm_fsm.engine._chain import record_hash
from llm_fsm.engine._records import Verdict

from .conftest import LOAN_TURNS


def _log(fsm: Any, cid: str) -> list[Any]:
    """The memory store's turn log of ``cid``: the stored records themselves, to edit as an intruder would."""
    return fsm.store._entries[cid].turns


def test_a_recorded_conversation_verifies(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation()
    report = fsm.verify(cid)
    assert report.ok, report.as_dict()
    assert [check.status for check in report.turns] == ["verified"] * len(LOAN_TURNS)


def test_an_edited_record_fails_at_its_turn(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation()
    _log(fsm, cid)[1].reply = "a reply nobody sent"
    report = fsm.verify(cid)
    assert not report.ok and report.failure.index == 2 and report.failure.status == "tampered"


def test_a_record_removed_from_the_middle_fails_at_the_missing_turn(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation()
    del _log(fsm, cid)[2]
    report = fsm.verify(cid)
    assert report.failure.index == 3 and "missing" in report.failure.details[0]


def test_the_newest_record_removed_breaks_the_chain_head(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation()
    _log(fsm, cid).pop()
    report = fsm.verify(cid)
    assert not report.ok and "chain head" in report.problem


def test_a_forged_verdict_with_a_rehashed_chain_fails_as_a_decision_mismatch(
    loan_conversation: Callable[..., Any],
) -> None:
    # the forger rewrites the verdict of turn 4 (an approval by rule) as the model's proposal and re-hashes the chain:
    # the chain holds, but the engine, deciding again from the recorded inputs, approves
    fsm, cid = loan_conversation()
    log = _log(fsm, cid)
    forged = log[3]
    forged.verdict = Verdict(kind="proposal_accepted", target_state="needs_review", reason="the model said so")
    forged.state_after = "needs_review"
    forged.chain.hash = record_hash(forged)
    fsm.store._entries[cid].record.chain_head = forged.chain.hash
    report = fsm.verify(cid)
    assert report.failure.index == 4 and report.failure.status == "mismatch"
    assert any(detail.startswith("verdict:") for detail in report.failure.details)


def test_with_an_audit_key_a_rehashed_chain_shows_as_edited(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(config=EngineConfig(audit_key=b"k"))
    record = _log(fsm, cid)[0]
    record.reply = "edited"
    record.chain.hash = record_hash(record)  # without the key
    assert fsm.verify(cid).failure.status == "tampered"


def test_records_from_before_recording_are_counted_not_verified(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(turns=2)
    for record in _log(fsm, cid):
        record.inputs, record.chain = None, None
    fsm.store._entries[cid].record.chain_head = None
    report = fsm.verify(cid)
    assert report.ok and [c.status for c in report.turns] == ["not_recorded", "not_recorded"]


def test_a_turn_that_read_a_masked_value_is_not_recomputable_rather_than_failed(
    loan_conversation: Callable[..., Any],
) -> None:
    fsm, cid = loan_conversation(config=EngineConfig(record_sensitive_values=False))
    report = fsm.verify(cid)
    assert report.ok and report.count("not_recomputable") >= 1


# --- any byte of a stored record ---------------------------------------------------------------------------------


def _stored(path: Path, cid: str) -> list[tuple[int, bytes]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT idx, record FROM turns WHERE conversation_id = ? ORDER BY idx", (cid,)).fetchall()
    return [(idx, record.encode() if isinstance(record, str) else record) for idx, record in rows]


def _write(path: Path, cid: str, idx: int, record: bytes) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE turns SET record = ? WHERE conversation_id = ? AND idx = ?", (record, cid, idx))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_flipped_byte_of_a_stored_record_fails_verify_at_that_turn(
    loan_conversation: Callable[..., Any], tmp_path_factory: Any, data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("audit") / "store.db"
    fsm, cid = loan_conversation(store=f"sqlite:///{path}")
    rows = _stored(path, cid)
    idx, record = data.draw(st.sampled_from(rows))
    content = record.rstrip(b" ")
    position = data.draw(st.integers(0, 2**20)) % len(content)  # records differ in length run to run (timestamps)
    mask = data.draw(st.integers(1, 255))
    flipped = bytearray(record)
    flipped[position] ^= mask
    _write(path, cid, idx, bytes(flipped))
    report = fsm.verify(cid)
    assert not report.ok
    where = report.failure.index if report.failure is not None else report.problem_turn
    # a flip in the index's digits, or one that adds a digit to them, makes the record claim another turn
    in_index = content.startswith(b'{"index":') and position <= len(b'{"index":') + len(str(idx))
    assert where == idx or in_index, report.as_dict()


def test_averify_gives_what_verify_gives(loan_conversation: Callable[..., Any]) -> None:
    import asyncio

    fsm, cid = loan_conversation()
    assert asyncio.run(fsm.averify(cid)).as_dict() == fsm.verify(cid).as_dict()


def test_turns_taken_by_the_async_driver_verify(loan_definition: Any) -> None:
    import asyncio

    from llm_fsm import FSMManager

    from .conftest import loan_model

    fsm = FSMManager(fsm_loader=lambda _: loan_definition, llm_interface=loan_model())

    async def run() -> str:
        cid, _ = await fsm.astart_conversation("loan")
        for message, _reply in LOAN_TURNS:
            await fsm.aprocess_message(cid, message)
        return cid

    cid = asyncio.run(run())
    assert [check.status for check in fsm.verify(cid).turns] == ["verified"] * len(LOAN_TURNS)


def test_an_edited_live_record_fails_verify(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(turns=3)
    fsm.store._entries[cid].record.context.data["monthly_income"] = 60000  # edited in the hot record
    report = fsm.verify(cid)
    assert not report.ok and "context" in report.problem


def test_a_change_recorded_since_the_last_turn_is_not_an_edit(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(turns=3)
    fsm.set_context(cid, {"monthly_income": 6500}, actor="desk/sam", reason="payslip checked")
    fsm.force_state(cid, "collect_income", "asked again", actor="desk/sam")
    assert fsm.verify(cid).ok


def test_masked_inputs_do_not_make_the_live_record_look_edited(loan_conversation: Callable[..., Any]) -> None:
    fsm, cid = loan_conversation(turns=2, config=EngineConfig(record_sensitive_values=False))
    assert fsm.verify(cid).ok


def test_a_record_written_before_a_field_existed_still_verifies(
    loan_conversation: Callable[..., Any], tmp_path: Path
) -> None:
    # the hash covers the stored bytes, so a release that adds a field to the record (filled with its default when
    # an old record is read) does not make the records written before it look edited
    from llm_fsm.engine._chain import digest, stored_payload

    path = tmp_path / "store.db"
    fsm, cid = loan_conversation(store=f"sqlite:///{path}", turns=1)
    ((idx, text),) = _stored(path, cid)
    old = text.decode().replace(',"message":null', "")  # as a version without TurnInputs.message wrote it
    assert old != text.decode()
    stored = stored_payload(old)
    assert stored is not None
    old_hash = fsm.get_instance(cid).chain_head
    new_hash = digest(stored)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE turns SET record = ? WHERE conversation_id = ? AND idx = ?",
            (old.replace(old_hash, new_hash), cid, idx),
        )
        conn.execute("UPDATE conversations SET record = replace(record, ?, ?)", (old_hash, new_hash))
    assert fsm.verify(cid).ok


@pytest.mark.parametrize("turns", [3, 60])  # 60: past the retention of 50, so the files store compacts its log
def test_conversations_in_the_files_store_verify(loan_definition: Any, tmp_path: Path, turns: int) -> None:
    from llm_fsm import FSMManager
    from llm_fsm.testing import FunctionLLM

    def answer(request: Any) -> dict[str, Any]:
        return {"transition": {"target_state": "", "context_update": {}}, "message": "Shall we begin?"}

    fsm = FSMManager(
        fsm_loader=lambda _: loan_definition, llm_interface=FunctionLLM(answer), store=f"file://{tmp_path}"
    )
    cid, _ = fsm.start_conversation("loan")
    for i in range(turns):
        fsm.process_message(cid, f"hmm {i}")
    report = fsm.verify(cid)
    assert report.ok, report.as_dict()
    assert report.count("verified") == min(turns, 50)


def test_an_answer_nested_too_deep_to_record_leaves_the_turn_saved_and_not_recomputable(loan_definition: Any) -> None:
    from llm_fsm import FSMManager
    from llm_fsm.testing import FunctionLLM

    deep: Any = "x"
    for _ in range(200):
        deep = {"v": deep}

    def answer(request: Any) -> dict[str, Any]:
        return {"transition": {"target_state": "", "context_update": {"monthly_income": deep}}, "message": "Hm?"}

    fsm = FSMManager(fsm_loader=lambda _: loan_definition, llm_interface=FunctionLLM(answer))
    cid, _ = fsm.start_conversation("loan")
    fsm.process_message(cid, "here is my income")
    report = fsm.verify(cid)
    assert report.ok and [c.status for c in report.turns] == ["not_recomputable"]


def test_the_audit_package_exports_what_it_documents() -> None:
    import llm_fsm.audit as audit

    assert sorted(audit.__all__) == sorted(audit._EXPORTS)
    for name in audit.__all__:
        assert getattr(audit, name) is not None


def test_a_reply_with_text_that_is_not_valid_unicode_leaves_the_turn_saved_and_not_recomputable(
    loan_definition: Any,
) -> None:
    from llm_fsm import FSMManager
    from llm_fsm.testing import FunctionLLM

    def answer(request: Any) -> dict[str, Any]:
        return {"transition": {"target_state": "", "context_update": {"employment_status": "\ud800"}}, "message": "?"}

    fsm = FSMManager(fsm_loader=lambda _: loan_definition, llm_interface=FunctionLLM(answer))
    cid, _ = fsm.start_conversation("loan")
    fsm.process_message(cid, "hello")
    report = fsm.verify(cid)
    assert report.ok and [c.status for c in report.turns] == ["not_recomputable"]
