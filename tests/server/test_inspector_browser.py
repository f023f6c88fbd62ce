"""The inspector page in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``), driven by selenium.

Each test starts uvicorn on a free 127.0.0.1 port, in a thread, with the API mounted under ``/fsm`` in a
parent application (so the page's relative URLs are tested too), a SQLite store in tmp_path and a
scripted model (``--model scripted:FILE``'s model) whose replies stream a few characters at a time.
The browser is found at fixed paths, and Selenium Manager is made to fail if anything calls it: it
would download a driver, which cannot work here. A failing test saves a screenshot (path printed).
The picture of docs/server.md is taken by test_inspector_browser_layout.py, of a realistic conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

pytest.importorskip("fastapi", reason="the server extra is not installed (pip install -e '.[server]')")
pytest.importorskip("uvicorn", reason="the server extra is not installed (pip install -e '.[server]')")
pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")
if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
    pytest.skip(
        f"no headless browser: {CHROMIUM} and {CHROMEDRIVER} are needed (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

import httpx  # noqa: E402
import uvicorn  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.selenium_manager import SeleniumManager  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from llm_fsm.cli.chat import make_llm  # noqa: E402
from llm_fsm.engine._records import LLMRequest, LLMResult  # noqa: E402
from llm_fsm.llm._streaming import reply_text  # noqa: E402
from llm_fsm.manager import FSMManager  # noqa: E402
from llm_fsm.server import KeyRing, create_app  # noqa: E402
from llm_fsm.server._keys import ApiKey, hash_key  # noqa: E402
from llm_fsm.stores import open_store  # noqa: E402

WRITER_KEY = "writer-key-0123456789abcdef"
READER_KEY = "reader-key-0123456789abcdef"
XSS = '<img src=x onerror="document.body.dataset.pwned=1">'
LONG_REPLY = "Thank you, Ann. Now I need your email address, so that we can send you the confirmation of your signup."

SIGNUP = """\
name: Signup
description: A name, then an email
initial_state: ask_name
context_keys:
  name: {type: string}
  email: {type: string, format: email}
states:
  ask_name:
    id: ask_name
    description: Asking for the name
    purpose: Ask for the user's name
    transitions:
      - target_state: ask_email
        description: The name is known
        conditions:
          - description: name recorded
            requires_context_keys: [name]
  ask_email:
    id: ask_email
    description: Asking for the email
    purpose: Ask for the user's email
    transitions:
      - target_state: done
        description: The email is known
        conditions:
          - description: email recorded
            requires_context_keys: [email]
  done:
    id: done
    description: Done
    purpose: Thank the user
    transitions: []
"""

HELPDESK = """\
name: Helpdesk
description: Answers, with a sub-flow to file a ticket
initial_state: chat
flows:
  - name: ticket
    definition: flows/ticket.yaml
    mode: call
    description: The user wants to file a ticket
states:
  chat:
    id: chat
    description: Chatting
    purpose: Help the user
    transitions:
      - target_state: bye
        description: The user is done
        conditions:
          - description: done
            requires_context_keys: [done]
  bye:
    id: bye
    description: Bye
    purpose: Say goodbye
    transitions: []
context_keys:
  done: {type: boolean}
"""

TICKET = """\
name: Ticket
description: File a ticket
initial_state: describe
context_keys:
  problem: {type: string}
states:
  describe:
    id: describe
    description: Asking what happened
    purpose: Ask what went wrong
    transitions:
      - target_state: filed
        description: The problem is known
        conditions:
          - description: problem recorded
            requires_context_keys: [problem]
  filed:
    id: filed
    description: Filed
    purpose: Say the ticket is filed
    transitions: []
"""

REPLIES = [
    "Hello! What is your name?",
    "I did not catch a name: <b>try again</b>",  # the model's text holds markup too: shown as typed
    {"target_state": "ask_email", "context_update": {"name": "Ann", "email": "not an address"}, "message": LONG_REPLY},
    "A spare reply",
]


class SlowStream:
    """The scripted model of ``--model scripted:FILE``, its messages streamed six characters every 60 ms.

    ``ReplyFileModel`` gives each reply whole; streamed slowly, the page can be seen writing a reply
    before it has all of it.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def astream(self, request: LLMRequest) -> AsyncIterator[str | LLMResult]:
        result: LLMResult = self.inner.complete(request)
        text = reply_text(result.response)
        decided = text.index('"message"')  # the decision comes at once (reply_text writes it first) ...
        yield text[:decided]
        for start in range(decided, len(text), 6):  # ... and the message slowly
            await asyncio.sleep(0.06)
            yield text[start : start + 6]
        yield result


@dataclass
class Served:
    base: str  # the page's URL: the API is mounted under /fsm
    api: str


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture(name="served")
def served_fixture(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Served]:
    """The API with keys, mounted under /fsm. Indirect parameters: ``"anonymous"``, no keys and at the root;
    ``"exhausted"``, the same with a model that has a reply for the opening only; ``"subflow"``, the same
    serving a helpdesk too, whose model starts its ticket sub-flow at the first message."""
    mode = getattr(request, "param", "keys")
    anonymous = mode in ("anonymous", "exhausted", "subflow")
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "signup.yaml").write_text(SIGNUP, encoding="utf-8")
    replies = REPLIES[:1] if mode == "exhausted" else REPLIES
    if mode == "subflow":
        (tmp_path / "defs" / "helpdesk.yaml").write_text(HELPDESK, encoding="utf-8")
        (tmp_path / "defs" / "flows").mkdir()
        (tmp_path / "defs" / "flows" / "ticket.yaml").write_text(TICKET, encoding="utf-8")
        replies = [
            "Hi, how can I help?",
            {"intent": "start_flow", "flow": "ticket", "message": "Let us file a ticket. What happened?"},
        ]
    (tmp_path / "replies.json").write_text(json.dumps(replies), encoding="utf-8")
    store = open_store(f"sqlite:///{tmp_path}/conversations.db")
    manager = FSMManager(llm_interface=SlowStream(make_llm(f"scripted:{tmp_path}/replies.json")), store=store)
    keys = KeyRing(
        [
            ApiKey(hash_key(WRITER_KEY), "alice", frozenset({"read", "write"})),
            ApiKey(hash_key(READER_KEY), "alice", frozenset({"read"})),
        ]
    )
    if anonymous:
        prefix, app = "/", create_app(manager, [tmp_path / "defs"], keys=KeyRing(), anonymous_tenant="local")
    else:
        prefix, app = "/fsm/", FastAPI()
        app.mount("/fsm", create_app(manager, [tmp_path / "defs"], keys=keys))
    with uvicorn_serving(app) as origin:
        yield Served(base=f"{origin}{prefix}", api=f"{origin}{prefix}v1")
    store.close()


@contextlib.contextmanager
def uvicorn_serving(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn in a thread on a free 127.0.0.1 port, for the block; yields its origin."""
    sock = _free_socket()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _no_selenium_manager(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("Selenium Manager was called: it would download a browser or a driver")


@pytest.fixture(name="browser", scope="module")
def browser_fixture() -> Iterator[WebDriver]:
    patch = pytest.MonkeyPatch()
    patch.setattr(SeleniumManager, "binary_paths", _no_selenium_manager)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--window-size=1600,1000",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(20)
    yield driver
    driver.quit()
    patch.undo()


@pytest.fixture(name="page")
def page_fixture(browser: WebDriver, request: pytest.FixtureRequest) -> Iterator[WebDriver]:
    """The browser for one test; if the test fails, a screenshot of the page is saved and its path printed."""
    failed_before = request.session.testsfailed
    browser_log(browser, "performance")  # drop what earlier tests left
    browser_log(browser, "browser")
    yield browser
    if request.session.testsfailed > failed_before:
        folder = Path(os.environ.get("LLM_FSM_TEST_ARTIFACTS") or Path(tempfile.gettempdir()) / "llm-fsm-browser")
        folder.mkdir(parents=True, exist_ok=True)
        shot = folder / f"{request.node.name}.png"
        browser.save_screenshot(str(shot))
        print(f"screenshot of the failed page: {shot}")
        for entry in browser_log(browser, "browser"):
            print("console:", entry.get("level"), entry.get("message"))


def browser_log(driver: WebDriver, kind: str) -> list[dict[str, Any]]:
    """Chromium's log of ``kind`` (``"browser"``: the console; ``"performance"``: DevTools events) since last read."""
    chromium: Any = driver  # Chromium's driver has get_log; the remote type it is declared as has not
    entries: list[dict[str, Any]] = chromium.get_log(kind)
    return entries


def requested_urls(driver: WebDriver) -> list[str]:
    """The URLs the page asked for since Chromium's performance log was last read."""
    urls = []
    for entry in browser_log(driver, "performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def wait_for(driver: WebDriver, condition: Any, what: str, timeout: float = 10) -> Any:
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.02).until(lambda d: condition(d))
    except TimeoutException:
        raise AssertionError(f"timed out waiting for {what}") from None


def unfold(driver: WebDriver, section_id: str) -> None:
    """Open a folded panel as a click on its summary does, but immune to the page's layout moving under the pointer.

    A pointer click lands where the summary was when Selenium measured it: a panel above it that fills in meanwhile
    (the lint findings, drawn after the page opens) moves the summary, and the click lands elsewhere. The summary's
    own ``click()`` toggles the panel wherever it is.
    """
    summary = driver.find_element(By.CSS_SELECTOR, f"#{section_id} summary")
    driver.execute_script("arguments[0].click()", summary)
    wait_for(driver, lambda d: d.find_element(By.ID, section_id).get_attribute("open") is not None, section_id)


def visible(driver: WebDriver, css: str) -> WebElement | None:
    found = [e for e in driver.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]
    return found[0] if found else None


def enter_key(driver: WebDriver, served: Served, key: str) -> None:
    driver.get(served.base)
    field = wait_for(driver, lambda d: visible(d, "#key-input"), "the key form")
    field.send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#key-form button").click()
    wait_for(driver, lambda d: visible(d, "#definitions li"), "the definitions")


def current_state(driver: WebDriver) -> str | None:
    """The label of the state Mermaid drew with the ``current`` class, read from the SVG itself."""
    nodes = driver.find_elements(By.CSS_SELECTOR, "#diagram svg g.current")
    return nodes[0].text.strip() if nodes else None


def send(driver: WebDriver, text: str) -> None:
    field = driver.find_element(By.ID, "message-input")
    # set the value directly: send_keys would type a markup message key by key and that is not the point here
    driver.execute_script("arguments[0].value = arguments[1];", field, text)
    driver.find_element(By.ID, "send-button").click()


def assistant_texts(driver: WebDriver) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#messages .assistant .text")]


def test_a_conversation_streams_moves_the_highlighted_state_and_explains_the_verdict(
    page: WebDriver, served: Served
) -> None:
    enter_key(page, served, WRITER_KEY)
    page.find_element(By.CSS_SELECTOR, "#definitions .start-conversation").click()
    wait_for(page, lambda d: "Hello! What is your name?" in assistant_texts(d), "the opening")
    wait_for(page, lambda d: current_state(d) == "ask_name", "ask_name highlighted")

    send(page, XSS)
    wait_for(page, lambda d: len(assistant_texts(d)) == 2 and not visible(d, ".streaming"), "the second reply")
    user_texts = [e.text for e in page.find_elements(By.CSS_SELECTOR, "#messages .user .text")]
    assert user_texts == [XSS]  # the markup shows as typed ...
    assert assistant_texts(page)[1] == "I did not catch a name: <b>try again</b>"
    assert page.find_elements(By.CSS_SELECTOR, "#messages img, #messages b, #explain img") == []  # ... and is not HTML
    assert page.execute_script("return document.body.dataset.pwned") is None
    wait_for(page, lambda d: XSS in d.find_element(By.ID, "explain").text, "the first turn explained")

    send(page, "I am Ann")
    partial = wait_for(
        page,
        lambda d: (e := visible(d, "#messages .assistant.streaming .text")) is not None and e.text or None,
        "the reply to start streaming",
    )
    assert 0 < len(partial) < len(LONG_REPLY) and LONG_REPLY.startswith(partial)
    assert current_state(page) == "ask_email"  # the state event comes first: the highlight moved before the text
    wait_for(page, lambda d: assistant_texts(d)[-1] == LONG_REPLY and not visible(d, ".streaming"), "the whole reply")

    verdict = wait_for(page, lambda d: visible(d, "#explain [data-turn='2'] .verdict"), "the turn's verdict")
    assert verdict.get_attribute("data-kind") == "proposal_accepted"
    assert "ask_email" in verdict.text and verdict.find_element(By.CSS_SELECTOR, ".verdict-reason").text
    refused = page.find_elements(By.CSS_SELECTOR, "#explain tr.refused")
    assert [row.find_element(By.TAG_NAME, "td").text for row in refused] == ["email"]
    condition = page.find_element(By.CSS_SELECTOR, "#explain .evaluation.taken .conditions li")
    assert "name recorded" in condition.text and "holds" in condition.text
    assert page.find_element(By.ID, "path").text == "Path: ask_name → ask_email"
    assert page.find_element(By.ID, "chat-state").text == "ask_email"


@pytest.mark.parametrize("served", ["anonymous"], indirect=True)
def test_without_keys_on_loopback_the_page_asks_for_none_and_may_write(page: WebDriver, served: Served) -> None:
    page.get(served.base)
    wait_for(page, lambda d: visible(d, "#definitions li"), "the definitions")
    assert visible(page, "#key-panel") is None and visible(page, "#forget-key") is None
    assert page.find_element(By.ID, "who").text == "no keys (loopback): tenant local · read, write"
    page.find_element(By.CSS_SELECTOR, "#definitions .start-conversation").click()
    wait_for(page, lambda d: "Hello! What is your name?" in assistant_texts(d), "the opening")
    assert visible(page, "#send-form") is not None


@pytest.mark.parametrize("served", ["exhausted"], indirect=True)
def test_a_turn_that_fails_shows_the_error_and_changes_nothing(page: WebDriver, served: Served) -> None:
    page.get(served.base)
    wait_for(page, lambda d: visible(d, "#definitions .start-conversation"), "the definitions").click()
    wait_for(page, lambda d: "Hello! What is your name?" in assistant_texts(d), "the opening")
    send(page, "I am Ann")
    error = wait_for(page, lambda d: d.find_element(By.ID, "chat-error").text, "the error")
    assert "(model_error)" in error
    failed = page.find_element(By.CSS_SELECTOR, "#messages .assistant.failed .text").text
    assert failed.startswith("(no reply") and current_state(page) == "ask_name"
    assert visible(page, "#send-form") is not None and page.find_element(By.ID, "message-input").is_enabled()


@pytest.mark.parametrize("served", ["subflow"], indirect=True)
def test_in_a_sub_flow_the_page_says_so_and_highlights_nothing_of_the_root_diagram(
    page: WebDriver, served: Served
) -> None:
    page.get(served.base)
    wait_for(
        page, lambda d: visible(d, "#definitions li[data-definition='helpdesk'] .start-conversation"), "helpdesk"
    ).click()
    wait_for(page, lambda d: current_state(d) == "chat", "chat highlighted")
    send(page, "I want to file a ticket")
    wait_for(page, lambda d: "In sub-flow ticket" in d.find_element(By.ID, "path").text, "the sub-flow note")
    assert current_state(page) is None and page.find_element(By.ID, "chat-state").text == "describe"


def test_a_key_without_the_write_right_reads_but_cannot_send(page: WebDriver, served: Served) -> None:
    started = httpx.post(
        f"{served.api}/conversations",
        json={"definition": "signup"},
        headers={"Authorization": f"Bearer {WRITER_KEY}"},
    )
    assert started.status_code == 201, started.text
    enter_key(page, served, WRITER_KEY)  # first a key that may write, with the conversation open ...
    wait_for(page, lambda d: visible(d, "#conversations li[data-conversation]"), "the conversation listed").click()
    wait_for(page, lambda d: visible(d, "#send-form"), "the chat input")
    page.find_element(By.ID, "forget-key").click()  # ... then the reader's key, in the same tab
    wait_for(page, lambda d: visible(d, "#key-input"), "the key form").send_keys(READER_KEY)
    page.find_element(By.CSS_SELECTOR, "#key-form button").click()
    wait_for(page, lambda d: visible(d, "#definitions li"), "the definitions")
    assert visible(page, "#send-form") is None and assistant_texts(page) == []
    assert "read" in page.find_element(By.ID, "who").text and "write" not in page.find_element(By.ID, "who").text
    assert page.find_elements(By.CSS_SELECTOR, ".start-conversation") == []
    wait_for(page, lambda d: visible(d, "#conversations li[data-conversation]"), "the conversation listed").click()
    wait_for(page, lambda d: "Hello! What is your name?" in assistant_texts(d), "the history")
    assert visible(page, "#send-form") is None and visible(page, "#read-only") is not None


def test_a_message_with_an_image_shows_its_text_and_says_it_had_one(page: WebDriver, served: Served) -> None:
    writer = {"Authorization": f"Bearer {WRITER_KEY}"}
    started = httpx.post(f"{served.api}/conversations", json={"definition": "signup"}, headers=writer)
    cid = started.json()["conversation_id"]
    photo = {"type": "image_url", "image_url": {"url": "https://example.com/never-loaded.png"}}
    body = {"message": [{"type": "text", "text": "my photo"}, photo]}
    sent = httpx.post(f"{served.api}/conversations/{cid}/messages", json=body, headers=writer)
    assert sent.status_code == 200, sent.text
    enter_key(page, served, WRITER_KEY)
    wait_for(page, lambda d: visible(d, "#conversations li[data-conversation]"), "the conversation listed").click()

    def user_texts(driver: WebDriver) -> list[str]:
        return [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#messages .user .text")]

    wait_for(page, lambda d: user_texts(d) == ["my photo [1 image]"], "the user's message")
    assert page.find_elements(By.CSS_SELECTOR, "#messages img") == []  # named, never loaded


def test_a_wrong_key_is_refused_and_asked_again(page: WebDriver, served: Served) -> None:
    page.get(served.base)
    wait_for(page, lambda d: visible(d, "#key-input"), "the key form").send_keys("not-a-key-of-this-server")
    page.find_element(By.CSS_SELECTOR, "#key-form button").click()
    wait_for(page, lambda d: "not accepted" in d.find_element(By.ID, "key-error").text, "the refusal")
    assert visible(page, "#main") is None
    assert page.execute_script("return sessionStorage.length") == 0


def test_the_definition_view_draws_it_and_lists_its_lint_findings(page: WebDriver, served: Served) -> None:
    enter_key(page, served, READER_KEY)
    page.find_element(By.CSS_SELECTOR, "#definitions .view-definition").click()
    wait_for(page, lambda d: visible(d, "#diagram svg"), "the diagram")
    labels = page.find_element(By.CSS_SELECTOR, "#diagram svg").text
    assert all(state in labels for state in ("ask_name", "ask_email", "done"))
    findings = wait_for(page, lambda d: d.find_elements(By.CSS_SELECTOR, "#lint .finding"), "the lint findings")
    # no state lists name in required_context_keys: FSM015, at the line of the condition that requires it
    line = SIGNUP.splitlines().index("            requires_context_keys: [name]") + 1
    assert any("FSM015" in f.text and f"(line {line})" in f.text and "'name'" in f.text for f in findings)


def test_every_request_of_the_page_goes_to_its_own_server(page: WebDriver, served: Served) -> None:
    enter_key(page, served, READER_KEY)
    page.find_element(By.CSS_SELECTOR, "#definitions .view-definition").click()
    wait_for(page, lambda d: visible(d, "#diagram svg"), "the diagram")
    origin = served.base.split("/fsm/")[0]
    requested = requested_urls(page)
    assert requested and any(url.endswith("/fsm/static/vendor/mermaid.min.js") for url in requested)
    assert [url for url in requested if not (url.startswith(origin + "/fsm/") or url.startswith("data:"))] == []
    # a script error, a Content-Security-Policy refusal or a failed request (the page asks v1/auth, not v1/me, first)
    assert [e["message"] for e in browser_log(page, "browser") if e["level"] == "SEVERE"] == []


def test_the_page_finds_every_state_in_the_mermaid_text_whatever_its_name(page: WebDriver, served: Served) -> None:
    """The highlight names a state by the id the renderer gave it: the page reads them back from its escaped labels."""
    from llm_fsm.definition._graph import graph_from_definition
    from llm_fsm.definition._model import FSMDefinition
    from llm_fsm.renderers import render
    from llm_fsm.renderers.mermaid import escape

    names = ["ask-name", 'a "quoted" #1: {x}', "done; [end] (100%) & <b>", "naïve | back\\slash `tick`"]
    definition = FSMDefinition.model_validate(
        {
            "name": "Odd names",
            "description": "States whose names Mermaid would read as syntax",
            "initial_state": names[0],
            "states": {
                name: {
                    "id": name,
                    "description": "a state",
                    "purpose": "be drawn",
                    "transitions": [{"target_state": names[i + 1], "description": "next"}]
                    if i + 1 < len(names)
                    else [],
                }
                for i, name in enumerate(names)
            },
        }
    )
    text = render(graph_from_definition(definition), "mermaid")
    page.get(served.base)
    found = page.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        import(new URL("static/diagram.js", document.baseURI))
          .then((m) => done(Object.fromEntries(m.stateIds(arguments[0]))))
          .catch((error) => done(String(error)));
        """,
        text,
    )
    assert isinstance(found, dict) and sorted(found) == sorted(names)
    for name, mermaid_id in found.items():  # each name paired with the id the renderer wrote it with
        assert f'    state "{escape(name)}" as {mermaid_id}\n' in text, name


def test_the_page_address_names_any_conversation_id_and_turn_and_reads_them_back(
    page: WebDriver, served: Served
) -> None:
    """route.js: an id with slashes, a hash sign or spaces survives the round trip; a malformed address opens nothing."""
    page.get(served.base)
    found = page.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        import(new URL("static/route.js", document.baseURI))
          .then((r) => done([
            r.parseRoute(r.conversationHash("a/b #c d", 12)),
            r.parseRoute(r.conversationHash("plain")),
            r.parseRoute(r.definitionHash("coffee_order")),
            r.parseRoute("#/c/x/t/0"),
            r.parseRoute("#/c/%E0%A4%A"),
            r.parseRoute(""),
          ]))
          .catch((error) => done(String(error)));
        """
    )
    assert found == [
        {"conversation": "a/b #c d", "turn": 12},
        {"conversation": "plain", "turn": None},
        {"definition": "coffee_order"},
        {"conversation": "x", "turn": None},  # no turn 0: the conversation at its last turn
        {},
        {},
    ]


def test_where_a_value_came_from_shows_the_users_words_marked(page: WebDriver, served: Served) -> None:
    enter_key(page, served, WRITER_KEY)
    page.find_element(By.CSS_SELECTOR, "#definitions .start-conversation").click()
    wait_for(page, lambda d: "Hello! What is your name?" in assistant_texts(d), "the opening")
    send(page, XSS)
    wait_for(page, lambda d: len(assistant_texts(d)) == 2 and not visible(d, ".streaming"), "the second reply")
    send(page, "I am Ann")
    wait_for(page, lambda d: assistant_texts(d)[-1] == LONG_REPLY and not visible(d, ".streaming"), "the whole reply")
    unfold(page, "provenance-section")
    row = wait_for(page, lambda d: visible(d, "#provenance tr[data-key='name']"), "the name's origin")
    assert row.get_attribute("data-by") == "model"
    assert row.find_element(By.CSS_SELECTOR, "mark").text == "Ann"
    assert row.find_element(By.CSS_SELECTOR, ".quote").text == "I am Ann"
    assert page.find_elements(By.CSS_SELECTOR, "#provenance img") == []
