"""The inspector at a real size, in a real headless Chromium: every shipped definition served, a realistic conversation.

The server serves ``definitions/`` (the 11 shipped definitions, with ``definitions/actions.py``'s registry)
and answers as the coffee order's conversation script says (``definitions/conversations/coffee_order.conv.yaml``,
its first conversation), keyed on the user's message so any number of conversations can run at once.
Each test looks at the page at 1024×768 and 1920×1080, and those that open a conversation save a
screenshot at both sizes: into ``$LLM_FSM_SCREENSHOTS`` when it is set, else into pytest's tmp folder.
``LLM_FSM_INSPECTOR_SCREENSHOT=docs/inspector.png`` saves the docs' picture (1920×1080) too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi import FastAPI
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from llm_fsm.actions import load_registry
from llm_fsm.engine import LLMRequest
from llm_fsm.manager import FSMManager
from llm_fsm.server import KeyRing, create_app
from llm_fsm.server._keys import ApiKey, hash_key
from llm_fsm.stores import open_store
from llm_fsm.testing import FunctionLLM

from .test_inspector_browser import (
    WRITER_KEY,
    browser_fixture,
    browser_log,
    page_fixture,
    uvicorn_serving,
    visible,
    wait_for,
)

__all__ = ["browser_fixture", "page_fixture"]  # the fixtures, found here by pytest

ROOT = Path(__file__).resolve().parents[2]
SIZES = ((1024, 768), (1920, 1080))
SCRIPT = yaml.safe_load((ROOT / "definitions" / "conversations" / "coffee_order.conv.yaml").read_text("utf-8"))
COFFEE = SCRIPT["conversations"][0]
USER_MESSAGES = [turn["user"] for turn in COFFEE["turns"]]
ROUTER = yaml.safe_load(
    (ROOT / "definitions" / "conversations" / "customer_support_router.conv.yaml").read_text("utf-8")
)["conversations"][0]
ROUTER_MESSAGE = ROUTER["turns"][0]["user"]  # the customer's number: lookup_customer writes two keys


def _answer(request: LLMRequest) -> Any:
    """The script's model answer to the user's message (its regenerated reply when the engine asks again)."""
    if request.purpose == "opening":
        return {"target_state": None, "message": SCRIPT["opening"]}
    for turn in [*COFFEE["turns"], *ROUTER["turns"][:1]]:
        if turn["user"] == request.user_message:
            if request.purpose == "regenerate":
                return {"target_state": None, "message": turn.get("regenerate", turn["model"]["message"])}
            return turn["model"]
    return {"target_state": None, "message": "Sorry, I did not get that: what would you like?"}


@dataclass
class Shipped:
    base: str
    api: str
    headers: dict[str, str]

    def start(self, definition: str = "coffee_order", turns: int = 0, messages: list[str] = USER_MESSAGES) -> str:
        """A conversation started over the API, with the first ``turns`` of ``messages`` sent."""
        started = httpx.post(f"{self.api}/conversations", json={"definition": definition}, headers=self.headers)
        assert started.status_code == 201, started.text
        cid = str(started.json()["conversation_id"])
        for message in messages[:turns]:
            sent = httpx.post(
                f"{self.api}/conversations/{cid}/messages", json={"message": message}, headers=self.headers
            )
            assert sent.status_code == 200, sent.text
        return cid


@pytest.fixture(params=["anonymous"])
def shipped(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Shipped]:
    """The shipped definitions served on 127.0.0.1: at the root without keys (``"anonymous"``, the default)
    or under ``/fsm`` with keys (``"keys"``, the page asks for one)."""
    store = open_store(f"sqlite:///{tmp_path}/conversations.db")
    manager = FSMManager(
        llm_interface=FunctionLLM(_answer),
        store=store,
        actions=load_registry(f"{ROOT / 'definitions' / 'actions.py'}:registry"),
    )
    definitions = [ROOT / "definitions"]
    if request.param == "keys":
        keys = KeyRing([ApiKey(hash_key(WRITER_KEY), "alice", frozenset({"read", "write"}))])
        prefix, headers = "/fsm/", {"Authorization": f"Bearer {WRITER_KEY}"}
        app: Any = FastAPI()
        app.mount("/fsm", create_app(manager, definitions, keys=keys))
    else:
        prefix, headers = "/", {}
        app = create_app(manager, definitions, keys=KeyRing(), anonymous_tenant="local")
    with uvicorn_serving(app) as origin:
        yield Shipped(f"{origin}{prefix}", f"{origin}{prefix}v1", headers)
    store.close()


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("LLM_FSM_SCREENSHOTS") or tmp_path / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def viewport(driver: WebDriver, width: int, height: int) -> None:
    """The page's viewport at exactly width × height CSS pixels (a window's size would include its frame)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )
    wait_for(driver, lambda d: d.execute_script("return [innerWidth, innerHeight]") == [width, height], "the size")


@pytest.fixture
def sized(page: WebDriver) -> Iterator[WebDriver]:
    """The browser, its viewport set by the test; back to the window's own size after."""
    yield page
    page.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def open_page(driver: WebDriver, shipped: Shipped, fragment: str = "") -> None:
    driver.get(shipped.base + fragment)
    wait_for(driver, lambda d: visible(d, "#conversations li"), "the conversations list")


def click(driver: WebDriver, css: str, what: str) -> None:
    """Click the element once it is shown (the lists are drawn again as data arrives: an element may go stale)."""

    def clicked(d: WebDriver) -> bool:
        element = visible(d, css)
        if element is None:
            return False
        try:
            element.click()
        except StaleElementReferenceException:
            return False
        return True

    wait_for(driver, clicked, what)


def open_conversation(driver: WebDriver, cid: str) -> None:
    click(driver, f"#conversations li[data-conversation='{cid}']", "the conversation")
    wait_for(driver, lambda d: cid in chat_title(d) and visible(d, "#explain .turn"), "its last turn explained")


def shown_turn(driver: WebDriver) -> str | None:
    """The turn the explain panel shows (read in the page: the panel is drawn again on each change)."""
    turn = driver.execute_script("return document.querySelector('#explain .turn')?.dataset.turn ?? null")
    return None if turn is None else str(turn)


def chat_title(driver: WebDriver) -> str:
    return str(driver.find_element(By.ID, "chat-title").text)


def settle(driver: WebDriver) -> None:
    """Until the page has drawn what it was loading (the diagram and the explain panel), so sizes are final."""
    wait_for(driver, lambda d: visible(d, "#diagram svg") and visible(d, "#explain .turn"), "the panels drawn")
    time.sleep(0.2)


# --- the layout -------------------------------------------------------------------------------------------


def test_the_conversations_list_starts_in_the_first_viewport_with_every_shipped_definition(
    sized: WebDriver, shipped: Shipped
) -> None:
    for _ in range(3):
        shipped.start()
    viewport(sized, 1024, 768)
    open_page(sized, shipped)
    served = httpx.get(f"{shipped.api}/definitions", headers=shipped.headers).json()["definitions"]
    assert len(served) >= 9 and len(sized.find_elements(By.CSS_SELECTOR, "#definitions li")) == len(served)
    first = sized.find_element(By.CSS_SELECTOR, "#conversations li[data-conversation]")
    top = sized.execute_script("return arguments[0].getBoundingClientRect().top", first)
    assert top < 768 / 2, f"the first conversation is {top:.0f} px down"
    assert first.is_displayed()


def test_with_no_conversation_yet_the_page_shows_where_to_start_one(sized: WebDriver, shipped: Shipped) -> None:
    """A first visit: nine definitions fold away under an empty list, and 'New conversation' was out of sight."""
    viewport(sized, 1024, 768)
    open_page(sized, shipped)
    note = sized.find_element(By.CSS_SELECTOR, "#conversations li.note").text
    assert "New conversation" in note, note
    start = wait_for(sized, lambda d: visible(d, "#definitions .start-conversation"), "a New conversation button")
    bottom = sized.execute_script("return arguments[0].getBoundingClientRect().bottom", start)
    assert bottom <= 768, f"the first New conversation button is {bottom:.0f} px down"


OVERFLOWING = """
// Each column of the page (the header, the sidebar, the chat, the inspection panel) holds its content
// within its width: every element lies inside the column, and every box that scrolls or clips is wide
// enough for what it holds. Only a table's own scroll box (.table-scroll) may scroll sideways, and
// the diagram's SVG scales its drawing to its box.
const found = [];
const name = (node) => node.id ? `#${node.id}` : `${node.tagName.toLowerCase()}.${node.className.baseVal ?? node.className}`;
const columns = [document.querySelector("header"), ...document.querySelectorAll("main > *")];
for (const column of columns) {
  const box = column.getBoundingClientRect();
  if (column.scrollWidth > column.clientWidth + 1) {
    found.push(`${name(column)}: scrollWidth ${column.scrollWidth} > clientWidth ${column.clientWidth}`);
  }
  for (const node of column.querySelectorAll("*")) {
    if (!node.getClientRects().length || node.closest(".table-scroll, svg") !== node && node.closest(".table-scroll, svg")) continue;
    const rect = node.getBoundingClientRect();
    if (rect.width && (rect.right > box.right + 1 || rect.left < box.left - 1)) {
      found.push(`${name(node)} in ${name(column)}: ${rect.left.toFixed(0)}-${rect.right.toFixed(0)} outside ${box.left.toFixed(0)}-${box.right.toFixed(0)}`);
    }
    const overflow = getComputedStyle(node).overflowX;
    if (overflow !== "visible" && !node.matches(".table-scroll, svg") && node.scrollWidth > node.clientWidth + 1) {
      found.push(`${name(node)} in ${name(column)}: scrollWidth ${node.scrollWidth} > clientWidth ${node.clientWidth}`);
    }
  }
}
return found;
"""


def test_nothing_overflows_its_column_at_1024_and_1920_pixels(
    sized: WebDriver, shipped: Shipped, screenshots: Path
) -> None:
    cid = shipped.start(turns=3)
    for width, height in SIZES:
        viewport(sized, width, height)
        open_page(sized, shipped)
        open_conversation(sized, cid)
        for section in ("lint-section", "context-section", "trace-section"):
            sized.execute_script("document.getElementById(arguments[0]).open = true", section)
        settle(sized)
        sized.save_screenshot(str(screenshots / f"inspector-{width}x{height}.png"))
        assert sized.execute_script(OVERFLOWING) == [], f"at {width}×{height}"


def test_an_action_that_wrote_several_keys_fits_the_explain_panel_at_1024_and_1920_pixels(
    sized: WebDriver, shipped: Shipped, screenshots: Path
) -> None:
    """The router's lookup writes the customer's tier and lifetime value: the action's line wraps in its column."""
    cid = shipped.start("customer_support_router", turns=1, messages=[ROUTER_MESSAGE])
    for width, height in SIZES:
        viewport(sized, width, height)
        open_page(sized, shipped)
        open_conversation(sized, cid)
        settle(sized)
        action = sized.find_element(By.XPATH, "//*[@id='explain']//li[starts-with(., 'lookup_customer')]")
        assert "wrote" in action.text
        sized.execute_script("arguments[0].scrollIntoView()", action)
        sized.save_screenshot(str(screenshots / f"action-{width}x{height}.png"))
        assert sized.execute_script(OVERFLOWING) == [], f"at {width}×{height}"


LABEL_HEIGHTS = """
// The on-screen height of each named state's box in the diagram (not the start and end dots), in CSS pixels.
return [...document.querySelectorAll("#diagram svg g.node")].filter((node) => node.textContent.trim())
  .map((node) => node.getBoundingClientRect().height);
"""


# The same, the diagram's box being at full size a scroll box of its own, as a table's is.
OVERFLOWING_BUT_THE_DIAGRAM = OVERFLOWING.replace(
    'node.closest(".table-scroll, svg") !== node && node.closest(".table-scroll, svg")',
    'node.closest(".table-scroll, #diagram") !== node && node.closest(".table-scroll, #diagram")',
).replace('!node.matches(".table-scroll, svg")', '!node.matches(".table-scroll, #diagram, svg")')


def test_the_diagram_can_be_seen_at_full_size_in_a_box_of_its_own_at_1024_pixels(
    sized: WebDriver, shipped: Shipped, screenshots: Path
) -> None:
    """Fitted to the panel, the router's nine states are drawn a few pixels high: 'Full size' draws it at its own
    size, scrolling inside its box, and the rest of the page stays in its columns."""
    cid = shipped.start("customer_support_router", turns=1, messages=[ROUTER_MESSAGE])
    viewport(sized, 1024, 768)
    open_page(sized, shipped)
    open_conversation(sized, cid)
    settle(sized)
    fitted = min(sized.execute_script(LABEL_HEIGHTS))
    click(sized, "#diagram-size", "the Full size button")
    wait_for(sized, lambda d: min(d.execute_script(LABEL_HEIGHTS)) >= 20, "the states drawn at full size")
    sized.save_screenshot(str(screenshots / "diagram-full-1024x768.png"))
    assert fitted < 20
    assert OVERFLOWING_BUT_THE_DIAGRAM.count("#diagram") == 3  # the check above still reads as it did
    assert sized.execute_script(OVERFLOWING_BUT_THE_DIAGRAM) == []
    click(sized, "#diagram-size", "the Fit button")
    wait_for(sized, lambda d: min(d.execute_script(LABEL_HEIGHTS)) == fitted, "the diagram fitted again")


BROKEN_WORDS = """
// Every word of letters in the tables (a header, an event name, "refused") drawn on one line: a word
// split by the line breaker has two boxes. Ids and values may break anywhere; words may not.
const broken = [];
for (const cell of document.querySelectorAll("#explain th, #explain td, #trace th, #trace td")) {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let text = walker.nextNode(); text; text = walker.nextNode()) {
    for (const match of text.data.matchAll(/[A-Za-z]{2,}/g)) {
      const before = text.data[match.index - 1], after = text.data[match.index + match[0].length];
      if ((before && /[\\w"]/.test(before)) || (after && /[\\w"]/.test(after))) continue;  // part of an id or a value
      const range = document.createRange();
      range.setStart(text, match.index);
      range.setEnd(text, match.index + match[0].length);
      const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      if (lines.size > 1) broken.push(`${match[0]} (in ${cell.tagName.toLowerCase()} "${cell.textContent.slice(0, 40)}")`);
    }
  }
}
return broken;
"""

WORD_CELLS = """
// How the tables' header and word cells may break: normally (at spaces), never inside a word.
return [...document.querySelectorAll("#explain th, #trace th, #trace td.event, #explain td.outcome")].map((cell) => {
  const style = getComputedStyle(cell);
  const range = document.createRange();
  range.selectNodeContents(cell);  // a cell is as tall as its row: its text's own boxes tell its lines
  const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
  return [cell.textContent, style.wordBreak, style.overflowWrap, lines.size === 1];
});
"""


def test_the_explain_and_trace_tables_break_no_word_at_1024_and_1920_pixels(sized: WebDriver, shipped: Shipped) -> None:
    cid = shipped.start(turns=3)  # the third turn chains two transitions: the trace has every kind of row
    for width, height in SIZES:
        viewport(sized, width, height)
        open_page(sized, shipped)
        open_conversation(sized, cid)
        click(sized, "#turn-picker button[data-turn='2']", "turn 2's button")  # an applied/refused column
        wait_for(sized, lambda d: shown_turn(d) == "2", "turn 2")
        settle(sized)
        sized.execute_script("document.getElementById('trace-section').open = true")
        cells = sized.execute_script(WORD_CELLS)
        for text, word_break, overflow_wrap, one_line in cells:
            assert word_break == "normal" and overflow_wrap == "normal", (width, text, word_break, overflow_wrap)
            if text.strip() and " " not in text.strip():
                assert one_line, (width, text)
        texts = {c[0] for c in cells}
        assert {"key", "value", "transition"} <= texts and texts & {"applied", "refused"}, texts
        assert sized.execute_script(BROKEN_WORDS) == [], f"at {width}×{height}"


# --- a URL per conversation and per turn ---------------------------------------------------------------


def test_a_deep_link_opens_the_conversation_at_the_turn_it_names(sized: WebDriver, shipped: Shipped) -> None:
    shipped.start(turns=1)
    cid = shipped.start(turns=3)
    open_page(sized, shipped, f"#/c/{cid}/t/2")
    wait_for(sized, lambda d: cid in chat_title(d) and shown_turn(d) == "2", "turn 2 of the linked conversation")
    assert sized.find_element(By.CSS_SELECTOR, "#turn-picker button.selected").text == "2"
    listed = sized.find_element(By.CSS_SELECTOR, f"#conversations li[data-conversation='{cid}']")
    assert "selected" in str(listed.get_attribute("class"))


def test_opening_a_conversation_or_a_turn_gives_the_page_its_url(sized: WebDriver, shipped: Shipped) -> None:
    cid = shipped.start(turns=2)
    open_page(sized, shipped)
    open_conversation(sized, cid)
    assert sized.execute_script("return location.hash") == f"#/c/{cid}"
    click(sized, "#turn-picker button[data-turn='1']", "turn 1's button")
    wait_for(sized, lambda d: shown_turn(d) == "1", "turn 1")
    assert sized.execute_script("return location.hash") == f"#/c/{cid}/t/1"


def test_the_back_button_returns_to_the_turn_and_the_conversation_seen_before(
    sized: WebDriver, shipped: Shipped
) -> None:
    first = shipped.start(turns=2)
    second = shipped.start(turns=1)
    open_page(sized, shipped)
    open_conversation(sized, first)
    click(sized, "#turn-picker button[data-turn='1']", "turn 1's button")
    wait_for(sized, lambda d: shown_turn(d) == "1", "turn 1 of the first")
    open_conversation(sized, second)
    wait_for(sized, lambda d: second in chat_title(d), "the second")

    sized.back()
    wait_for(sized, lambda d: first in chat_title(d) and shown_turn(d) == "1", "back to turn 1 of the first")
    sized.back()
    wait_for(sized, lambda d: first in chat_title(d) and shown_turn(d) == "2", "back to the first at its last turn")
    sized.back()
    wait_for(sized, lambda d: chat_title(d) == "No conversation selected", "back to no conversation")
    sized.forward()
    wait_for(sized, lambda d: first in chat_title(d) and shown_turn(d) == "2", "forward to the first again")


# --- the console ----------------------------------------------------------------------------------------


def console(driver: WebDriver) -> list[str]:
    return [
        f"{e['level']} {e['message']}" for e in browser_log(driver, "browser") if e["level"] in ("SEVERE", "WARNING")
    ]


@pytest.mark.parametrize("shipped", ["keys", "anonymous"], indirect=True)
def test_the_console_stays_empty_from_loading_to_a_turn_sent(sized: WebDriver, shipped: Shipped) -> None:
    cid = shipped.start(turns=1)
    sized.get(shipped.base)
    if shipped.headers:  # the page asks for a key: without a request that fails
        wait_for(sized, lambda d: visible(d, "#key-input"), "the key form").send_keys(WRITER_KEY)
        sized.find_element(By.CSS_SELECTOR, "#key-form button").click()
    open_conversation(sized, cid)
    field = sized.find_element(By.ID, "message-input")
    field.send_keys(USER_MESSAGES[1])
    sized.find_element(By.ID, "send-button").click()
    wait_for(sized, lambda d: shown_turn(d) == "2" and not visible(d, ".streaming"), "the turn explained")
    settle(sized)
    assert console(sized) == []


# --- a whole conversation, typed in the page: the docs' picture -------------------------------------------


def test_a_coffee_order_typed_in_the_page_ends_with_the_order_placed(
    sized: WebDriver, shipped: Shipped, screenshots: Path
) -> None:
    """The conversation of docs/inspector.png. ``LLM_FSM_INSPECTOR_SCREENSHOT=docs/inspector.png`` saves it there."""
    viewport(sized, 1920, 1080)
    sized.get(shipped.base)
    # nine definitions fold away under the conversations, but with none yet they are open: where to start one
    wait_for(
        sized, lambda d: d.find_element(By.ID, "definitions-section").get_attribute("open"), "the definitions open"
    )
    click(sized, "#definitions li[data-definition='coffee_order'] .start-conversation", "coffee_order's start")
    wait_for(sized, lambda d: SCRIPT["opening"] in d.find_element(By.ID, "messages").text, "the opening")
    for number, message in enumerate(USER_MESSAGES, start=1):
        field = wait_for(sized, lambda d: (e := visible(d, "#message-input")) and e.is_enabled() and e, "the input")
        field.send_keys(message)
        sized.find_element(By.ID, "send-button").click()
        wait_for(sized, lambda d, n=number: shown_turn(d) == str(n) and not visible(d, ".streaming"), f"turn {number}")
    assert sized.find_element(By.ID, "chat-state").text == "order_placed (ended)"
    assert visible(sized, "#send-form") is None  # an ended conversation takes no message
    click(sized, "#turn-picker button[data-turn='3']", "turn 3's button")  # the turn that chains two transitions
    wait_for(sized, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#explain .chained .verdict")) == 2, "turn 3")
    heading = sized.find_element(By.CSS_SELECTOR, "#explain .turn h3").text  # it went round: it did not stay
    assert heading == "Turn 3: confirm_order → take_order → choose_milk → confirm_order"
    for width, height in reversed(SIZES):
        viewport(sized, width, height)
        settle(sized)
        sized.save_screenshot(str(screenshots / f"coffee-order-{width}x{height}.png"))
        if width == 1920 and (docs := os.environ.get("LLM_FSM_INSPECTOR_SCREENSHOT")):
            sized.save_screenshot(docs)
