"""A migration killed half way (``kill -9``) leaves every conversation whole, on exactly one version: the old one,
untouched, or the new one, moved; none lost. Running the migration again moves the rest (issue 23, item 5).

Each conversation moves by its own compare-and-set save, so a kill between two of them, or inside one, can leave
nothing in between; this drives the real ``llm-fsm migrate`` in a process of its own and kills it while it walks.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from llm_fsm import FSMManager
from llm_fsm.loading import load_fsm_definition

from .conftest import DEFINITIONS, LOAN_TURNS, loan_model

CONVERSATIONS = 200
MIGRATE = [sys.executable, "-c", "from llm_fsm.cli import main; main()", "migrate"]


def _renamed(source: Path, target: Path) -> Path:
    """v2: ``collect_debts`` is ``collect_debt_payments``, and its ``migrations:`` block says so."""
    text = source.read_text()
    assert text.count("collect_debts") == 3  # the state's key, its id, and the transition into it
    text = text.replace("collect_debts", "collect_debt_payments")
    text = text.replace("\nstates:\n", "\nmigrations:\n  states: {collect_debts: collect_debt_payments}\nstates:\n", 1)
    target.write_text(text)
    return target


@pytest.fixture
def production(tmp_path: Path) -> tuple[str, Path, Path, dict[str, Any]]:
    """A SQLite store of in-flight v1 loan conversations (0 to 3 turns deep), v1's file, v2's, and each
    conversation's turn count and transcript."""
    v1 = tmp_path / "loan.yaml"
    v1.write_text((DEFINITIONS / "loan_prequalification.yaml").read_text())
    url = f"sqlite:///{tmp_path}/prod.db"
    before: dict[str, Any] = {}
    fsm = FSMManager(store=url)
    for i in range(CONVERSATIONS):
        depth = i % 4
        fsm.llm_interface = loan_model(depth)
        cid, _ = fsm.start_conversation(str(v1))
        for message, _ in LOAN_TURNS[:depth]:
            fsm.process_message(cid, message)
        before[cid] = (depth, fsm.get_conversation_history(cid))
    return url, v1, _renamed(v1, tmp_path / "loan_v2.yaml"), before


def _versions_in_store(url: str) -> list[str | None]:
    """Each stored conversation's definition version, read straight from the table (cheap enough to poll)."""
    with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"), timeout=5)) as db:
        rows = db.execute("SELECT json_extract(record, '$.definition_hash') FROM conversations").fetchall()
    return [version for (version,) in rows]


def _migrate(url: str, v2: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*MIGRATE, "--store", url, "--definition", str(v2), "--quiet", "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_half_way(url: str, v2: Path, new: str) -> int:
    """Start ``llm-fsm migrate`` and SIGKILL it once about half the conversations moved (wherever it is in the
    next one); how many had when it died."""
    process = _migrate(url, v2)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and process.poll() is None:
            if _versions_in_store(url).count(new) >= CONVERSATIONS // 2:
                break
            time.sleep(0.005)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.communicate()
    return _versions_in_store(url).count(new)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_migration_killed_half_way_leaves_each_conversation_on_one_version_and_none_lost(
    production: tuple[str, Path, Path, dict[str, Any]],
) -> None:
    url, v1_path, v2_path, before = production
    v1, v2 = load_fsm_definition(v1_path), load_fsm_definition(v2_path)
    old, new = v1.content_hash, v2.content_hash

    moved = _kill_half_way(url, v2_path, new)
    assert 0 < moved < CONVERSATIONS  # killed while it walked: some moved, some not yet

    reader = FSMManager(store=url)
    stored = {summary.conversation_id for summary in reader.store.list()}
    assert stored == set(before)
    on: dict[str, int] = {old: 0, new: 0}
    for cid, (depth, history) in before.items():
        instance = reader.get_instance(cid)
        assert instance.definition_hash in (old, new), cid
        definition = v1 if instance.definition_hash == old else v2
        assert instance.current_state in definition.states, (cid, instance.current_state)
        assert len(instance.turns) == depth and reader.get_conversation_history(cid) == history
        assert reader.verify(cid).ok, reader.verify(cid).as_dict()
        on[instance.definition_hash] += 1
    assert on == {old: CONVERSATIONS - moved, new: moved}

    again = subprocess.run(
        [*MIGRATE, "--store", url, "--definition", str(v2_path), "--quiet", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    summary: dict[str, Any] = json.loads(again.stdout)["summary"]
    assert summary["moved"] == CONVERSATIONS - moved and summary["stranded"] == summary["skipped"] == 0
    assert _versions_in_store(url) == [new] * CONVERSATIONS
    for cid, (depth, history) in before.items():
        instance = reader.get_instance(cid)
        assert instance.current_state in v2.states and len(instance.turns) == depth
        assert reader.get_conversation_history(cid) == history
        assert reader.verify(cid).ok
