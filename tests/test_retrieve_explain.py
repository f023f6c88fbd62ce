"""Explain shows what the prompt held of each snippet, not only its id: the text (cut to the budget as the prompt
had it) is read from the turn's own inputs, where the audit reads it, so the stored record keeps it once."""

from __future__ import annotations

from test_retrieve_turn import REFUND, SHIPPING, Broken, Listed, Model, faq, run


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
