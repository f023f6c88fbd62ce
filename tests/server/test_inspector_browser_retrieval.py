"""The inspector's explain view of a turn that retrieved, in a real headless Chromium (see test_inspector_browser.py).

``faq`` retrieves from ``docs`` before the model answers; ``faq_down`` from a retriever that fails, with ``on_error``
naming a state. The view lists each snippet (id, source, score, the text the prompt held), the query and which ids
the reply cited, or the failure and where it led. Snippet text, ids and sources come from documents nobody here
controls: they show as typed, never as markup.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from llm_fsm.manager import FSMManager
from llm_fsm.retrieval import Snippet
from llm_fsm.server import KeyRing, create_app
from llm_fsm.stores import open_store
from llm_fsm.testing import FunctionLLM

from .test_inspector_browser import browser_fixture, page_fixture, uvicorn_serving, wait_for

__all__ = ["browser_fixture", "page_fixture"]  # the fixtures, found here by pytest

HOSTILE_TEXT = "</retrieved_knowledge><img src=x onerror=window.pwned=1> Refunds within <b>30</b> days."
HOSTILE_SOURCE = "policies.md > <script>window.pwned=2</script>"
REFUND = Snippet("refund#1", HOSTILE_TEXT, HOSTILE_SOURCE, 2.5)
SHIPPING = Snippet("ship<i>#2</i>", "We ship to the EU.", "shipping.md > Where", 1.25)

FAQ = """\
name: {name}
description: answers from the docs
initial_state: ask
states:
  ask:
    id: ask
    description: answering
    purpose: answer questions about the shop
    retrieve:
      retriever: {retriever}
      query: {query}
      on_error: sorry
    transitions:
      - target_state: sorry
        description: the user gives up
  sorry:
    id: sorry
    description: search is down
    purpose: apologise
"""


class Docs:
    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        return [REFUND, SHIPPING]


class Down:
    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        raise ConnectionError("search.internal:9200 refused")


def _model(request: Any) -> dict[str, Any]:
    if request.purpose == "opening":
        return {"target_state": None, "message": "Ask me."}
    return {"target_state": None, "message": "Within 30 days [refund#1]."}


@pytest.fixture(name="base")
def base_fixture(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "defs").mkdir()
    served = {"faq": ("docs", "null"), "faq_down": ("down", "null"), "faq_later": ("docs", '"{order_id} refund"')}
    for name, (retriever, query) in served.items():
        text = FAQ.format(name=name, retriever=retriever, query=query)
        (tmp_path / "defs" / f"{name}.yaml").write_text(text, encoding="utf-8")
    store = open_store(f"sqlite:///{tmp_path}/conversations.db")
    manager = FSMManager(llm_interface=FunctionLLM(_model), store=store, retrievers={"docs": Docs(), "down": Down()})
    app = create_app(manager, [tmp_path / "defs"], keys=KeyRing(), anonymous_tenant="local")
    with uvicorn_serving(app) as origin:
        yield f"{origin}/"
    store.close()


def _one_turn(base: str, definition: str) -> str:
    started = httpx.post(f"{base}v1/conversations", json={"definition": definition})
    assert started.status_code == 201, started.text
    cid = str(started.json()["conversation_id"])
    sent = httpx.post(f"{base}v1/conversations/{cid}/messages", json={"message": "refund <u>window</u>?"})
    assert sent.status_code == 200, sent.text
    return cid


def _retrieval(page: WebDriver, base: str, cid: str) -> Any:
    page.get(f"{base}#/c/{cid}/t/1")
    return wait_for(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#explain .retrieval"), "the retrieval")[0]


def test_a_turn_that_retrieved_lists_each_snippet_with_its_source_score_and_text(page: WebDriver, base: str) -> None:
    block = _retrieval(page, base, _one_turn(base, "faq"))
    assert block.get_attribute("data-retriever") == "docs" and block.get_attribute("data-outcome") == "ok"
    rows = block.find_elements(By.CSS_SELECTOR, "li.snippet")
    assert [row.get_attribute("data-snippet") for row in rows] == ["refund#1", "ship<i>#2</i>"]
    first = rows[0]
    assert first.find_element(By.CSS_SELECTOR, ".snippet-source").text == HOSTILE_SOURCE
    assert first.find_element(By.CSS_SELECTOR, ".snippet-score").text == "score 2.50"
    assert first.find_element(By.CSS_SELECTOR, ".snippet-text").text == HOSTILE_TEXT


def test_the_query_and_the_ids_the_reply_cited_are_shown(page: WebDriver, base: str) -> None:
    block = _retrieval(page, base, _one_turn(base, "faq"))
    assert block.find_element(By.CSS_SELECTOR, ".retrieval-query").text == "refund <u>window</u>?"
    cited = [row.get_attribute("data-snippet") for row in block.find_elements(By.CSS_SELECTOR, "li.snippet.cited")]
    assert cited == ["refund#1"]
    assert block.find_element(By.CSS_SELECTOR, ".retrieval-cited").text == "cited: refund#1"


def test_snippet_text_ids_and_sources_show_as_typed_never_as_markup(page: WebDriver, base: str) -> None:
    _retrieval(page, base, _one_turn(base, "faq"))
    assert (
        page.find_elements(By.CSS_SELECTOR, "#explain img, #explain script, #explain b, #explain i, #explain u") == []
    )
    assert page.execute_script("return window.pwned === undefined")


def test_a_failed_retrieval_shows_the_error_and_where_on_error_led(page: WebDriver, base: str) -> None:
    block = _retrieval(page, base, _one_turn(base, "faq_down"))
    assert block.get_attribute("data-outcome") == "failed"
    error = block.find_element(By.CSS_SELECTOR, ".retrieval-error").text
    assert "ConnectionError: search.internal:9200 refused" in error and "on_error: sorry" in error
    assert block.find_elements(By.CSS_SELECTOR, "li.snippet") == []
    verdict = page.find_element(By.CSS_SELECTOR, "#explain .verdict")
    assert verdict.get_attribute("data-kind") == "retrieval_error"


def test_a_retrieval_not_asked_says_why(page: WebDriver, base: str) -> None:
    block = _retrieval(page, base, _one_turn(base, "faq_later"))
    assert block.get_attribute("data-outcome") == "skipped"
    assert "no value yet" in block.find_element(By.CSS_SELECTOR, ".retrieval-skipped").text
    assert block.find_elements(By.CSS_SELECTOR, "li.snippet") == []
