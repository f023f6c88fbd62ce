"""Definition versions: kept by the store, and a conversation runs on its own (issue 23, item 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llm_fsm import DefinitionVersionNotFoundError, FSMManager
from llm_fsm.loading import load_fsm_definition

from .conftest import DEFINITIONS, loan_model


def _files(tmp_path: Path) -> tuple[Path, Any, Any]:
    v1 = tmp_path / "loan.yaml"
    v1.write_text((DEFINITIONS / "loan_prequalification.yaml").read_text())
    v2 = tmp_path / "loan_v2.yaml"
    v2.write_text(v1.read_text().replace("Asking for income", "Asking for the income"))
    return v1, load_fsm_definition(v1), load_fsm_definition(v2)


def test_starting_a_conversation_stores_its_definition_version(tmp_path: Path) -> None:
    v1, first, _ = _files(tmp_path)
    url = f"sqlite:///{tmp_path}/c.db"
    fsm = FSMManager(llm_interface=loan_model(0), store=url)
    fsm.start_conversation(str(v1))
    assert fsm.store.definition_versions() == [first.content_hash]


def test_a_version_is_stored_once_whatever_the_number_of_conversations(tmp_path: Path) -> None:
    v1, first, _ = _files(tmp_path)
    url = f"sqlite:///{tmp_path}/c.db"
    for _ in range(3):
        FSMManager(llm_interface=loan_model(0), store=url).start_conversation(str(v1))
    assert FSMManager(store=url).store.definition_versions() == [first.content_hash]


def test_a_conversation_can_start_on_a_named_version(tmp_path: Path) -> None:
    v1, first, second = _files(tmp_path)
    url = f"sqlite:///{tmp_path}/c.db"
    FSMManager(llm_interface=loan_model(0), store=url).start_conversation(str(tmp_path / "loan_v2.yaml"))
    fsm = FSMManager(llm_interface=loan_model(0), store=url)  # its loader finds v1 at the path
    cid, _ = fsm.start_conversation(str(v1), version=second.content_hash)
    assert fsm.get_instance(cid).definition_hash == second.content_hash != first.content_hash


def test_an_unknown_version_is_a_typed_error(tmp_path: Path) -> None:
    v1, _, _ = _files(tmp_path)
    fsm = FSMManager(llm_interface=loan_model(0), store=f"sqlite:///{tmp_path}/c.db")
    with pytest.raises(DefinitionVersionNotFoundError):
        fsm.start_conversation(str(v1), version="0123456789abcdef")


def test_a_pinned_conversation_verifies_after_its_file_changed(tmp_path: Path) -> None:
    v1, _, _ = _files(tmp_path)
    url = f"sqlite:///{tmp_path}/c.db"
    fsm = FSMManager(llm_interface=loan_model(2), store=url)
    cid, _ = fsm.start_conversation(str(v1))
    fsm.process_message(cid, "Yes, let's do it.")
    v1.write_text(v1.read_text().replace("Asking for income", "Asking about income"))
    later = FSMManager(llm_interface=loan_model(2), store=url)
    report = later.verify(cid)
    assert report.ok and [c.status for c in report.turns] == ["verified"]
