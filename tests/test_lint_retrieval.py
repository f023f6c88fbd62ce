"""fsm-lint on the retrieval states declare (FSM075-FSM077): a budget that holds nothing, an on_error naming no
state, and (with the names the application registered) a retriever nobody registered."""

from __future__ import annotations

from typing import Any

from llm_fsm.lint._linter import lint_data
from llm_fsm.lint._rules import RULES_BY_CODE, Diagnostic


def document(state_retrieve: Any = None, top_retrieve: Any = None) -> dict[str, Any]:
    ask: dict[str, Any] = {
        "id": "ask",
        "description": "answering",
        "purpose": "answer questions from the documents",
        "transitions": [{"target_state": "done", "description": "the user is done"}],
    }
    if state_retrieve is not None:
        ask["retrieve"] = state_retrieve
    doc: dict[str, Any] = {
        "name": "faq",
        "description": "answers from the docs",
        "initial_state": "ask",
        "states": {"ask": ask, "done": {"id": "done", "description": "end", "purpose": "say goodbye"}},
    }
    if top_retrieve is not None:
        doc["retrieve"] = top_retrieve
    return doc


def findings(doc: Any, code: str, **options: Any) -> list[Diagnostic]:
    return [d for d in lint_data(doc, **options).diagnostics if d.code == code]


def codes(doc: Any, **options: Any) -> list[str]:
    return [d.code for d in lint_data(doc, **options).diagnostics]


def test_a_state_that_retrieves_within_a_budget_has_no_finding() -> None:
    doc = document({"retriever": "docs", "on_error": "done"}, {"retriever": "faq"})
    assert codes(doc, retrievers=["docs", "faq"]) == []


def test_an_empty_budget_is_reported_where_it_is_declared() -> None:
    for doc, path in (
        (document({"retriever": "docs", "max_chars": 0}), "$.states.ask.retrieve.max_chars"),
        (document(top_retrieve={"retriever": "docs", "max_chars": 0}), "$.retrieve.max_chars"),
    ):
        [finding] = findings(doc, "FSM075")
        assert finding.path == path and finding.name == "retrieve-budget-empty"


def test_on_error_naming_an_undeclared_state_is_reported_with_a_suggestion() -> None:
    [finding] = findings(document({"retriever": "docs", "on_error": "doen"}), "FSM076")
    assert finding.path == "$.states.ask.retrieve.on_error"
    assert finding.hint == "did you mean 'done'?"


def test_on_error_continue_is_no_state() -> None:
    assert findings(document({"retriever": "docs", "on_error": "continue"}), "FSM076") == []


def test_an_unregistered_retriever_is_reported_only_when_the_registered_names_are_given() -> None:
    doc = document({"retriever": "dosc"}, {"retriever": "faq"})
    assert findings(doc, "FSM077") == []
    [finding] = findings(doc, "FSM077", retrievers=["docs", "faq"])
    assert finding.path == "$.states.ask.retrieve.retriever"
    assert finding.hint == "did you mean 'docs'?"


def test_the_new_codes_are_in_the_table_and_documented() -> None:
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "lint.md").read_text(encoding="utf-8")
    for code in ("FSM075", "FSM076", "FSM077"):
        rule = RULES_BY_CODE[code]
        assert f"| `{code}` | `{rule.name}` |" in text


RETRIEVERS_MODULE = """
from llm_fsm.retrieval import Snippet


class Docs:
    def retrieve(self, query, *, k):
        return [Snippet("a", "text", "a.md")]


retrievers = {"docs": Docs()}
"""


def _cli(tmp_path: Any, *options: str) -> Any:
    import json

    from click.testing import CliRunner

    from llm_fsm.cli._app import main

    definition = tmp_path / "faq.json"
    definition.write_text(json.dumps(document({"retriever": "dosc"})), encoding="utf-8")
    return CliRunner().invoke(main, ["lint", *options, str(definition)])


def test_fsm_lint_with_retrievers_reports_an_unregistered_name(tmp_path: Any) -> None:
    (tmp_path / "search.py").write_text(RETRIEVERS_MODULE, encoding="utf-8")
    result = _cli(tmp_path, "--retrievers", f"{tmp_path / 'search.py'}:retrievers")
    assert result.exit_code == 1
    assert "FSM077 retriever-not-registered" in result.output and "did you mean 'docs'?" in result.output


def test_fsm_lint_without_retrievers_checks_no_names(tmp_path: Any) -> None:
    assert _cli(tmp_path).exit_code == 0


def test_a_retrievers_spec_that_names_no_retrievers_is_a_usage_error(tmp_path: Any) -> None:
    (tmp_path / "search.py").write_text(RETRIEVERS_MODULE, encoding="utf-8")
    result = _cli(tmp_path, "--retrievers", f"{tmp_path / 'search.py'}:nothing")
    assert result.exit_code == 2 and result.output.startswith("error: --retrievers")


def test_a_state_only_a_failed_retrieval_leads_to_is_reachable() -> None:
    doc = document({"retriever": "docs", "on_error": "sorry"})
    doc["states"]["sorry"] = {"id": "sorry", "description": "search is down", "purpose": "apologise"}
    assert "unreachable-state" not in [d.name for d in lint_data(doc).diagnostics]


def test_the_definitions_retrieve_leads_from_every_state_without_its_own() -> None:
    doc = document(top_retrieve={"retriever": "docs", "on_error": "sorry"})
    doc["states"]["sorry"] = {"id": "sorry", "description": "search is down", "purpose": "apologise"}
    assert "unreachable-state" not in [d.name for d in lint_data(doc).diagnostics]
