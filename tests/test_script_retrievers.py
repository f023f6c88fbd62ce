"""Conversation scripts give the retrievers a definition names fixed snippets (or a failure), check what a turn
retrieved and what its reply cited, and ``llm-fsm test --retrievers`` gives them the application's retrievers.

The definition below answers from a retriever named ``docs`` and, when it fails, hands the customer to a person.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fsm.cli import main
from llm_fsm.errors import ScriptError
from llm_fsm.retrieval import Snippet
from llm_fsm.runtime._retrievers import RetrieverRegistry
from llm_fsm.scripting._scripts import load_script
from llm_fsm.scripting._suite import run_suite

DEFINITION = """
name: faq
description: answers from the docs
initial_state: ask
states:
  ask:
    id: ask
    description: answering
    purpose: answer questions about the shop
    retrieve: {retriever: docs, on_error: person}
    transitions:
      - {target_state: done, description: the user is done}
  person:
    id: person
    description: a person takes over
    purpose: say a colleague will answer
  done:
    id: done
    description: end
    purpose: say goodbye
"""

REFUND = "{id: refund-1, text: Refunds within 30 days., source: policies.md > Refunds}"
ASK = "user: can I get a refund?"
ANSWER = 'model: "Within 30 days [refund-1]."'

BACKEND = """
from llm_fsm.retrieval import Snippet


class Docs:
    def retrieve(self, query, *, k):
        return [Snippet("ship-1", "We ship to the EU.", "shipping.md > Where")]


retrievers = {"docs": Docs()}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "faq.yaml").write_text(DEFINITION, encoding="utf-8")
    return tmp_path


def script(folder: Path, body: str) -> Path:
    path = folder / "faq.conv.yaml"
    path.write_text("definition: faq.yaml\n" + textwrap.dedent(body), encoding="utf-8")
    return path


def failures(path: Path, **options: object) -> list[str]:
    report = run_suite([path], **options)  # type: ignore[arg-type]
    assert not report.errors, report.errors
    return [f for r in report.results for f in r.failures + [x for t in r.turns for x in t.failures]]


def test_a_stubbed_retriever_gives_the_turn_its_snippets_and_the_reply_cites_them(folder: Path) -> None:
    path = script(
        folder,
        f"""
        retrievers: {{docs: [{REFUND}]}}
        turns:
          - {ASK}
            {ANSWER}
            expect: {{state: ask, retrieved: [refund-1], cited: [refund-1]}}
        """,
    )
    assert failures(path) == []


def test_the_stubbed_snippets_are_in_the_prompt_the_model_reads(folder: Path) -> None:
    from llm_fsm.testing import ScriptedLLM

    path = script(folder, f"retrievers: {{docs: [{REFUND}]}}\nturns:\n  - {ASK}\n")
    llm = ScriptedLLM(["Hello!", "Within 30 days [refund-1]."])
    assert failures(path, llm=llm) == []
    prompt = llm.requests[-1].system_prompt
    assert "Refunds within 30 days." in prompt and "refund-1" in prompt and "policies.md" in prompt


def test_cited_fails_when_the_reply_cites_other_ids_or_none(folder: Path) -> None:
    path = script(
        folder,
        f"""
        retrievers: {{docs: [{REFUND}]}}
        turns:
          - {ASK}
            model: "Within 30 days."
            expect: {{cited: [refund-1]}}
        """,
    )
    assert failures(path) == ['cited: expected ["refund-1"], got []']


def test_retrieved_fails_when_the_prompt_did_not_hold_the_snippet(folder: Path) -> None:
    path = script(
        folder,
        f"""
        retrievers: {{docs: [{REFUND}]}}
        turns:
          - {ASK}
            {ANSWER}
            expect: {{retrieved: [ship-1]}}
        """,
    )
    assert failures(path) == ['retrieved: expected ship-1 among the snippets the prompt held, got ["refund-1"]']


def test_retrieved_empty_means_the_prompt_held_no_snippet(folder: Path) -> None:
    path = script(
        folder,
        f"""
        retrievers: {{docs: []}}
        turns:
          - {ASK}
            model: "I do not know."
            expect: {{retrieved: [], cited: []}}
        """,
    )
    assert failures(path) == []


def test_a_stub_that_raises_fails_the_retrieval_and_its_on_error_applies(folder: Path) -> None:
    path = script(
        folder,
        f"""
        retrievers: {{docs: {{raise: index is down}}}}
        turns:
          - {ASK}
            model: "A colleague will answer shortly."
            expect: {{state: person, verdict: retrieval_error, retrieval_error: index is down}}
        """,
    )
    assert failures(path) == []


def test_retrieval_error_fails_when_the_retrieval_succeeded(folder: Path) -> None:
    path = script(
        folder,
        f"""
        retrievers: {{docs: [{REFUND}]}}
        turns:
          - {ASK}
            {ANSWER}
            expect: {{retrieval_error: index is down}}
        """,
    )
    assert failures(path) == [
        "retrieval_error: expected a failure containing 'index is down', but the retrieval succeeded"
    ]


def test_a_turn_level_stub_replaces_the_scripts_from_that_turn_on(folder: Path) -> None:
    path = script(
        folder,
        f"""
        retrievers: {{docs: [{REFUND}]}}
        turns:
          - {ASK}
            {ANSWER}
            expect: {{cited: [refund-1]}}
          - user: and shipping?
            retrievers: {{docs: [{{id: ship-1, text: We ship to the EU., source: shipping.md}}]}}
            model: "To the EU [ship-1]."
            expect: {{retrieved: [ship-1], cited: [ship-1]}}
          - user: and refunds again?
            {ANSWER}
            expect: {{cited: []}}
        """,
    )
    assert failures(path) == []


def test_a_conversation_stub_replaces_the_scripts_for_that_conversation(folder: Path) -> None:
    path = script(
        folder,
        f"""
        retrievers: {{docs: [{REFUND}]}}
        conversations:
          - name: own
            retrievers: {{docs: {{raise: down}}}}
            turns:
              - {ASK}
                model: "A colleague will answer."
                expect: {{state: person}}
          - name: the script's
            turns:
              - {ASK}
                {ANSWER}
                expect: {{state: ask, cited: [refund-1]}}
        """,
    )
    assert failures(path) == []


class Shipping:
    def retrieve(self, query: str, *, k: int) -> list[Snippet]:
        return [Snippet("ship-1", "We ship to the EU.", "shipping.md > Where")]


def test_the_applications_retrievers_answer_what_the_script_does_not_stub(folder: Path) -> None:
    path = script(
        folder,
        f"""
        turns:
          - {ASK}
            model: "To the EU [ship-1]."
            expect: {{retrieved: [ship-1], cited: [ship-1]}}
        """,
    )
    assert failures(path, retrievers=RetrieverRegistry({"docs": Shipping()})) == []


def test_a_stub_takes_precedence_over_the_applications_retriever_and_leaves_its_registry_alone(folder: Path) -> None:
    path = script(
        folder,
        f"""
        conversations:
          - name: stubbed
            retrievers: {{docs: [{REFUND}]}}
            turns:
              - {ASK}
                {ANSWER}
                expect: {{retrieved: [refund-1], cited: [refund-1]}}
          - name: the application's
            turns:
              - {ASK}
                model: "To the EU [ship-1]."
                expect: {{retrieved: [ship-1], cited: [ship-1]}}
        """,
    )
    registry = RetrieverRegistry({"docs": Shipping()})
    assert failures(path, retrievers=registry) == []
    assert isinstance(registry.get("docs"), Shipping)


def test_an_expectation_on_a_retriever_nobody_registered_says_how_to_give_one(folder: Path) -> None:
    path = script(
        folder,
        f"""
        turns:
          - {ASK}
            {ANSWER}
            expect: {{retrieved: [refund-1]}}
        """,
    )
    (failure,) = failures(path)
    assert "no retriever is registered under that name" in failure
    assert "--retrievers MODULE:NAME" in failure and "retrievers: {docs: [...]}" in failure


def test_a_stub_snippet_needs_an_id_text_and_source(folder: Path) -> None:
    path = script(folder, f"retrievers: {{docs: [{{text: hello, source: a.md}}]}}\nturns:\n  - {ASK}\n")
    with pytest.raises(ScriptError) as raised:
        load_script(path)
    assert raised.value.path == "$.retrievers.docs"
    assert "id" in raised.value.message


def test_a_stub_is_a_list_of_snippets_or_raise(folder: Path) -> None:
    path = script(folder, f"retrievers: {{docs: {{snippets: []}}}}\nturns:\n  - {ASK}\n")
    with pytest.raises(ScriptError) as raised:
        load_script(path)
    assert "a retriever stub is a list of snippets" in raised.value.message


def test_expectations_on_retrieval_need_a_user_message(folder: Path) -> None:
    path = script(folder, "turns:\n  - application: {context: {x: 1}}\n    expect: {cited: []}\n")
    with pytest.raises(ScriptError) as raised:
        load_script(path)
    assert "retrieves only for a user message" in raised.value.message


def test_the_test_command_takes_the_applications_retrievers(folder: Path) -> None:
    (folder / "search.py").write_text(BACKEND, encoding="utf-8")
    script(
        folder,
        f"""
        turns:
          - {ASK}
            model: "To the EU [ship-1]."
            expect: {{cited: [ship-1]}}
        """,
    )
    args = ["test", str(folder / "faq.conv.yaml"), "--retrievers", f"{folder / 'search.py'}:retrievers"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    without = CliRunner().invoke(main, args[:2])
    assert without.exit_code == 1, without.output
    assert "--retrievers MODULE:NAME" in without.output


def test_the_test_command_reports_a_retrievers_option_that_names_nothing(folder: Path) -> None:
    script(folder, f"turns:\n  - {ASK}\n")
    result = CliRunner().invoke(main, ["test", str(folder), "--retrievers", f"{folder / 'missing.py'}:retrievers"])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
