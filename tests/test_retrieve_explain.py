"""Explain shows what the prompt held of each snippet, not only its id: the text (cut to the budget as the prompt
had it) is read from the turn's own inputs, where the audit reads it, so the stored record keeps it once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from test_retrieve_turn import REFUND, SHIPPING, Broken, Listed, Model, faq, run

from llm_fsm.retrieval import RetrieverRegistry, Snippet


class Hung:
    """A retriever that answers only once the test lets it go (never, within its timeout)."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        self.released.wait(10)
        return []


def test_explain_gives_each_snippet_the_text_the_prompt_held() -> None:
    manager, cid, _ = run(faq({"retriever": "docs"}), Model(), docs=Listed(REFUND, SHIPPING))
    snippets = manager.explain(cid).retrieval.snippets
    assert [(s.id, s.text) for s in snippets] == [("refund#1", REFUND.text), ("ship#1", SHIPPING.text)]


def test_a_snippet_cut_to_the_budget_is_explained_as_cut() -> None:
    budget = len(REFUND.text) + 10
    manager, cid, _ = run(faq({"retriever": "docs", "max_chars": budget}), Model(), docs=Listed(REFUND, SHIPPING))
    snippets = manager.explain(cid).retrieval.snippets
    assert [s.text for s in snippets] == [REFUND.text, SHIPPING.text[:10]]


def test_the_stored_record_does_not_repeat_the_text_its_inputs_hold() -> None:
    manager, cid, _ = run(faq({"retriever": "docs"}), Model(), docs=Listed(REFUND))
    (stored,) = manager.get_instance(cid).turns[-1:]
    assert stored.retrieval is not None and stored.retrieval.snippets[0].text is None
    assert "text" not in stored.model_dump(mode="json")["retrieval"]["snippets"][0]


def test_a_failed_retrieval_explains_no_snippets() -> None:
    manager, cid, _ = run(faq({"retriever": "docs"}), Model(), docs=Broken())
    assert manager.explain(cid).retrieval.snippets == []


def _explained(tmp_path: Path, retriever: Any, *options: str) -> str:
    """``llm-fsm explain`` of the stored conversation's turn that retrieved from ``retriever``."""
    from click.testing import CliRunner

    from llm_fsm import FSMManager
    from llm_fsm.cli import main
    from llm_fsm.stores import open_store
    from llm_fsm.testing import FunctionLLM

    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = open_store(url)
    definition = faq({"retriever": "docs", "on_error": "sorry"})
    retrievers = RetrieverRegistry({"docs": retriever}, timeout_s=0.2)
    manager = FSMManager(
        fsm_loader=lambda _: definition, llm_interface=FunctionLLM(Model()), store=store, retrievers=retrievers
    )
    cid, _ = manager.start_conversation("faq")
    manager.process_turn(cid, "can I get a refund?")
    store.close()
    if isinstance(retriever, Hung):
        retriever.released.set()
    result = CliRunner().invoke(main, ["explain", cid, "--store", url, *options])
    assert result.exit_code == 0, result.output
    return str(result.output)


def test_llm_fsm_explain_shows_each_snippets_score_and_the_text_the_prompt_held(tmp_path: Path) -> None:
    lines = _explained(tmp_path, Listed(REFUND, SHIPPING)).splitlines()
    at = lines.index(f"  [refund#1] {REFUND.source} ({len(REFUND.text)} characters)")
    assert lines[at + 1] == f"      score 2.00: {json.dumps(REFUND.text)}"
    assert "  cited: refund#1" in lines


def test_llm_fsm_explain_says_a_retriever_timed_out_and_where_on_error_led(tmp_path: Path) -> None:
    output = _explained(tmp_path, Hung())
    assert 'retrieval: docs for "can I get a refund?": failed (timed out after 0.2 s), on_error sorry' in output


def test_llm_fsm_explain_as_json_holds_the_snippet_text(tmp_path: Path) -> None:
    record = json.loads(_explained(tmp_path, Listed(REFUND), "--format", "json"))
    assert record["retrieval"]["snippets"][0]["text"] == REFUND.text
