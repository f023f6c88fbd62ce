"""The inspector's Replay panel, in a real headless Chromium (see test_inspector_browser.py).

``signup`` is served with two aliases: ``production`` (the served file) and ``staging`` (a confirmation step before
done). A recorded turn that finished the signup changes under staging, and the panel lists it, with a link to that
turn; a definition without aliases says how to get one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.select import Select

from llm_fsm.manager import FSMManager
from llm_fsm.server import KeyRing, create_app
from llm_fsm.stores import open_store
from llm_fsm.testing import FunctionLLM

from .conftest import SIGNUP, Model
from .test_inspector_browser import browser_fixture, page_fixture, unfold, uvicorn_serving, wait_for
from .test_versions import FINISH, SIGNUP_V2

__all__ = ["browser_fixture", "page_fixture"]  # the fixtures, found here by pytest

HOSTILE = "<img src=x onerror=window.pwned=1>"
"""An alias name as markup: the picker shows it as typed."""


@pytest.fixture(name="base")
def base_fixture(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "signup.yaml").write_text(SIGNUP, encoding="utf-8")
    (tmp_path / "defs" / "plain.yaml").write_text(SIGNUP.replace("name: Signup", "name: Plain"), encoding="utf-8")
    (tmp_path / "staging.yaml").write_text(SIGNUP_V2, encoding="utf-8")
    renamed = SIGNUP.replace("initial_state: ask", "initial_state: asking").replace(
        "  ask:\n    id: ask", "  asking:\n    id: asking"
    )
    (tmp_path / "renamed.yaml").write_text(renamed, encoding="utf-8")
    store = open_store(f"sqlite:///{tmp_path}/conversations.db")
    manager = FSMManager(llm_interface=FunctionLLM(Model()), store=store)
    aliases = {
        "staging": tmp_path / "staging.yaml",
        "renamed": tmp_path / "renamed.yaml",
        HOSTILE: tmp_path / "defs" / "signup.yaml",
    }
    app = create_app(manager, [tmp_path / "defs"], aliases=aliases, keys=KeyRing(), anonymous_tenant="local")
    with uvicorn_serving(app) as origin:
        yield f"{origin}/"
    store.close()


def test_the_replay_panel_lists_the_turn_whose_decision_changes_under_an_alias(page: WebDriver, base: str) -> None:
    started = httpx.post(f"{base}v1/conversations", json={"definition": "signup"})
    assert started.status_code == 201, started.text
    cid = started.json()["conversation_id"]
    sent = httpx.post(f"{base}v1/conversations/{cid}/messages", json={"message": FINISH})
    assert sent.json()["state"] == "done", sent.text
    page.get(f"{base}#/d/signup")
    wait_for(page, lambda d: d.find_elements(By.ID, "replay-run"), "the replay button")
    unfold(page, "replay-section")  # the panel starts folded
    Select(page.find_element(By.ID, "replay-alias")).select_by_value("staging")
    page.find_element(By.ID, "replay-run").click()
    row = wait_for(
        page, lambda d: d.find_elements(By.CSS_SELECTOR, f'.replay-changed tr[data-conversation="{cid}"]'), "the row"
    )
    assert row[0].get_attribute("data-turn") == "1"
    assert row[0].find_element(By.CSS_SELECTOR, "a").get_attribute("href").endswith(f"#/c/{cid}/t/1")
    assert row[0].find_elements(By.CSS_SELECTOR, ".replay-differences li")
    summary = page.find_element(By.CSS_SELECTOR, ".replay-summary")
    assert summary.get_attribute("data-changed") == "1" and "1 changed" in summary.text


def test_a_conversation_in_a_state_the_alias_lacks_is_listed_as_stranded(page: WebDriver, base: str) -> None:
    started = httpx.post(f"{base}v1/conversations", json={"definition": "signup"})
    cid = started.json()["conversation_id"]
    page.get(f"{base}#/d/signup")
    wait_for(page, lambda d: d.find_elements(By.ID, "replay-run"), "the replay button")
    unfold(page, "replay-section")
    Select(page.find_element(By.ID, "replay-alias")).select_by_value("renamed")
    page.find_element(By.ID, "replay-run").click()
    item = wait_for(
        page, lambda d: d.find_elements(By.CSS_SELECTOR, f'.replay-stranded li[data-conversation="{cid}"]'), "it"
    )
    assert item[0].text.startswith(f"{cid} in ask: ")


def test_an_alias_name_is_shown_as_typed_never_as_markup(page: WebDriver, base: str) -> None:
    page.get(f"{base}#/d/signup")
    wait_for(page, lambda d: d.find_elements(By.ID, "replay-alias"), "the picker")
    values = [o.get_attribute("value") for o in page.find_elements(By.CSS_SELECTOR, "#replay-alias option")]
    assert HOSTILE in values
    assert not page.find_elements(By.CSS_SELECTOR, "#replay img")
    assert page.execute_script("return window.pwned === undefined")


def test_a_definition_without_aliases_says_how_to_serve_one(page: WebDriver, base: str) -> None:
    page.get(f"{base}#/d/plain")
    note = wait_for(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#replay .note"), "the note")
    assert "--alias NAME=FILE" in note[0].get_attribute("textContent")
    assert not page.find_elements(By.ID, "replay-run")
