"""``llm-fsm audit verify`` walks a store a conversation at a time, so what it holds does not grow with the store
(``llm_fsm/cli/audit.py``: "memory stays bounded whatever the store holds").

``benchmarks/replay.py`` showed it did not: verify's peak RSS grew 5.6 → 23.8 MB from 10,500 to 100,624 turns
while replay's stayed at 8.1 → 9.5 MB; the command kept every conversation's ``Verification`` to print them all at
the end. It now prints each as it goes and keeps counts. Counting the verifications alive while the walk hands over its last conversation says so without timing
or memory noise: a walk that holds only the conversation at hand (and the ones that failed) holds one or two.
"""

from __future__ import annotations

import contextlib
import gc
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llm_fsm import FSMManager
from llm_fsm.audit import _walk
from llm_fsm.audit._verify import Verification
from llm_fsm.cli import main

from .conftest import DEFINITIONS, LOAN_TURNS, loan_model

CONVERSATIONS = 30


def _store(tmp_path: Path) -> str:
    definition = tmp_path / "loan.yaml"
    definition.write_text((DEFINITIONS / "loan_prequalification.yaml").read_text())
    url = f"sqlite:///{tmp_path}/store.db"
    fsm = FSMManager(store=url)
    for _ in range(CONVERSATIONS):
        fsm.llm_interface = loan_model()
        cid, _ = fsm.start_conversation(str(definition))
        for message, _ in LOAN_TURNS:
            fsm.process_message(cid, message)
    return url


def test_verify_holds_no_verification_of_the_conversations_it_is_done_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _store(tmp_path)
    alive: list[int] = []
    walk = _walk.conversations

    def counting(store: Any, **options: Any) -> Iterator[Any]:
        for item in walk(store, **options):
            gc.collect()
            alive.append(sum(1 for o in gc.get_objects() if isinstance(o, Verification)))
            yield item

    monkeypatch.setattr(_walk, "conversations", counting)
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.suppress(SystemExit):
        main(["audit", "verify", "--store", url, "--quiet"], standalone_mode=False)

    assert f"{CONVERSATIONS} conversation(s), {CONVERSATIONS * len(LOAN_TURNS)} turn record(s)" in output.getvalue()
    assert len(alive) == CONVERSATIONS and alive[-1] <= 2, alive
