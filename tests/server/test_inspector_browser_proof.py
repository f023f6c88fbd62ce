"""The inspector's lint panel shows the proof, in a real headless Chromium (see test_inspector_browser.py).

A served definition whose payment is gated by a boolean the model may set by itself: its property
no_model_gate fails at the state ``check``, and the panel says so per property and per state.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from llm_fsm.manager import FSMManager
from llm_fsm.server import KeyRing, create_app
from llm_fsm.stores import open_store
from llm_fsm.testing import ScriptedLLM

from .test_inspector_browser import (
    browser_fixture,
    page_fixture,
    requested_urls,
    unfold,
    uvicorn_serving,
    visible,
    wait_for,
)
from .test_proof import GATE

__all__ = ["browser_fixture", "page_fixture"]  # the fixtures, found here by pytest


@pytest.fixture(name="base")
def base_fixture(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "gate.yaml").write_text(GATE, encoding="utf-8")
    store = open_store(f"sqlite:///{tmp_path}/conversations.db")
    manager = FSMManager(llm_interface=ScriptedLLM(["Hello!"]), store=store)
    app = create_app(manager, [tmp_path / "defs"], keys=KeyRing(), anonymous_tenant="local")
    with uvicorn_serving(app) as origin:
        yield f"{origin}/"
    store.close()


def test_the_lint_panel_shows_a_failed_property_and_the_state_it_failed_in(page: WebDriver, base: str) -> None:
    page.get(base)
    wait_for(page, lambda d: visible(d, "#definitions .view-definition"), "the definitions")
    page.find_element(By.CSS_SELECTOR, "#definitions .view-definition").click()
    row = wait_for(
        page, lambda d: d.find_elements(By.CSS_SELECTOR, '#proof li[data-property="no_model_gate"]'), "the proof"
    )
    assert row[0].text == "no_model_gate failed"
    assert "status-failed" in row[0].find_element(By.CSS_SELECTOR, ".proof-status").get_attribute("class")
    finding = page.find_element(By.CSS_SELECTOR, "#proof .proof-finding").text
    assert finding.startswith("FSM044 no_model_gate at check")
    cell = page.find_element(By.CSS_SELECTOR, '#proof tr[data-state="check"] td[data-property="no_model_gate"]')
    assert cell.text == "failed"
    proved = page.find_element(By.CSS_SELECTOR, '#proof tr[data-state="ask"] td[data-property="no_trap"]')
    assert proved.text == "proved"


def test_with_the_lint_panel_folded_no_proof_is_asked_until_it_is_opened(page: WebDriver, base: str) -> None:
    started = httpx.post(f"{base}v1/conversations", json={"definition": "gate"})
    assert started.status_code == 201, started.text
    page.get(f"{base}#/c/{started.json()['conversation_id']}")
    wait_for(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#lint .finding"), "the lint findings")
    assert not page.find_element(By.ID, "lint-section").get_attribute("open")
    assert [url for url in requested_urls(page) if url.endswith("/prove")] == []
    unfold(page, "lint-section")
    wait_for(page, lambda d: d.find_elements(By.CSS_SELECTOR, '#proof li[data-property="no_model_gate"]'), "the proof")
    assert [url for url in requested_urls(page) if url.endswith("/prove")] == [f"{base}v1/definitions/gate/prove"]
