"""definitions/retrievers.py gives the shipped definitions the retrievers they name, over the shipped help centre.

``llm-fsm test definitions/ --retrievers definitions/retrievers.py:registry`` and ``llm-fsm chat
definitions/shop_help.yaml --retrievers definitions/retrievers.py:registry`` must work offline: every retriever a
definition's ``retrieve`` names is registered there, its index is built from ``definitions/docs/shop_help/`` into a
cache file (never into the repository), and the real full-text index finds, first, the section of the help centre
that answers each question the conversation scripts ask.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llm_fsm.loading import load_fsm_definition
from llm_fsm.retrieval import FTSRetriever
from llm_fsm.runtime._retrievers import RetrieverRegistry, load_retrievers
from llm_fsm.scripting._files import is_mcp_config_file
from llm_fsm.scripting._scripts import load_script

DEFINITIONS = Path(__file__).resolve().parents[1] / "definitions"
SPEC = f"{DEFINITIONS / 'retrievers.py'}:registry"
SHOP_HELP = load_fsm_definition(DEFINITIONS / "shop_help.yaml", cache=None)
SCRIPT = load_script(DEFINITIONS / "conversations" / "shop_help.conv.yaml")

#: what the scripts ask (the user's message, or a state's own query) → the section that answers it
ANSWERS = {
    "Do you deliver to Switzerland?": "shipping.md > Shipping and delivery > Where we deliver",
    "Can I pay by Klarna?": "payment.md > Payment > Accepted payment methods",
    "My lamp stopped working after a year, is that covered?": (
        "warranty.md > Warranty and repairs > What the warranty covers"
    ),
    "How long do I have to return something?": (
        "returns.md > Returns and refunds > How long you have to return an item"
    ),
    "OK, I want to return a vase I bought.": "returns.md > Returns and refunds > Exchanges",
    "Thanks! One more thing: how long is the warranty on a sofa?": (
        "warranty.md > Warranty and repairs > How long the warranty lasts"
    ),
    "how to start a return label refund": "returns.md > Returns and refunds > How to start a return",
}


@pytest.fixture()
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RetrieverRegistry:
    monkeypatch.setenv("SHOP_HELP_INDEX", str(tmp_path / "cache" / "shop_help.db"))
    return load_retrievers(SPEC)


@pytest.fixture()
def help_docs(registry: RetrieverRegistry) -> FTSRetriever:
    found = registry.get("help_docs")
    assert isinstance(found, FTSRetriever)
    return found


def _retrieved_names() -> set[str]:
    names = set()
    for path in DEFINITIONS.rglob("*"):
        if path.suffix in (".json", ".yaml", ".yml") and ".conv." not in path.name and not is_mcp_config_file(path):
            definition = load_fsm_definition(path, cache=None)
            names |= {d.retriever for d in (definition.retrieve_for(s) for s in definition.states) if d is not None}
    return names


def test_the_registry_has_exactly_the_retrievers_the_shipped_definitions_name(registry: RetrieverRegistry) -> None:
    assert set(registry) == _retrieved_names() == {"help_docs"}


def test_the_index_is_built_in_the_cache_path_and_never_in_the_repository(
    registry: RetrieverRegistry, tmp_path: Path
) -> None:
    assert (tmp_path / "cache" / "shop_help.db").is_file()
    assert not [p for p in DEFINITIONS.rglob("*.db")]


def test_every_page_of_the_help_centre_is_indexed_by_heading(help_docs: FTSRetriever) -> None:
    sources = {s.source.split(" > ")[0] for s in help_docs.retrieve("delivery returns payment warranty", k=50)}
    assert sources == {"returns.md", "shipping.md", "payment.md", "warranty.md"}


@pytest.mark.parametrize(("question", "section"), ANSWERS.items(), ids=list(ANSWERS))
def test_the_index_finds_the_section_that_answers_first(help_docs: FTSRetriever, question: str, section: str) -> None:
    best = help_docs.retrieve(question, k=SHOP_HELP.retrieve_for("answer").k)  # type: ignore[union-attr]
    assert best[0].source == section, [s.source for s in best]


def test_the_collect_order_state_asks_the_query_whose_answer_the_table_pins() -> None:
    declared = SHOP_HELP.retrieve_for("collect_order")
    assert declared is not None and declared.query in ANSWERS


def test_the_scripts_ask_the_questions_the_table_pins() -> None:
    """What a turn that expects snippets asks: the user's message, or the query of the state it starts in."""
    asked = set()
    for conversation in SCRIPT.conversations:
        state = SHOP_HELP.initial_state
        for turn in conversation.turns:
            declared = SHOP_HELP.retrieve_for(state)
            if turn.spec.expect.retrieved and declared is not None:
                asked.add(declared.query or turn.spec.user)
            state = turn.spec.expect.state or state
    assert set(ANSWERS) >= asked >= {"how to start a return label refund", "Can I pay by Klarna?"}


def test_every_id_the_scripts_expect_is_a_section_of_the_help_centre(help_docs: FTSRetriever) -> None:
    ids = {s.id for s in help_docs.retrieve("delivery returns payment warranty", k=50)}
    expected = {
        id_
        for c in SCRIPT.conversations
        for t in c.turns
        for id_ in (t.spec.expect.retrieved or []) + (t.spec.expect.cited or [])
    }
    assert expected and expected <= ids, expected - ids


def test_every_id_docs_knowledge_shows_is_a_section_of_the_help_centre(help_docs: FTSRetriever) -> None:
    page = (DEFINITIONS.parent / "docs" / "knowledge.md").read_text(encoding="utf-8")
    shown = set(re.findall(r"\[([0-9a-f]{16})\]", page))
    sections = {s.id: s.source for s in help_docs.retrieve("delivery returns payment warranty", k=50)}
    assert shown and shown <= set(sections), shown - set(sections)
    assert "shop_help.db: 4 added, 0 updated, 0 removed, 0 unchanged; 20 chunks" in page
    assert len(sections) == 20
