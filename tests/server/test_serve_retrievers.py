"""``llm-fsm serve`` says at start which served definitions retrieve from names it has no retriever for, as it says
which call actions it has no function for: whoever forgot ``--retrievers`` reads it before the first turn quietly
answers without snippets (or moves to the state's ``on_error``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .test_serve_cli import _serve_capturing_the_app

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SEARCH = """
from llm_fsm.retrieval import Snippet


class Docs:
    def retrieve(self, query, *, k):
        return [Snippet("refund#1", "Refunds within 30 days.", "policies.md > Refunds")]


retrievers = {"docs": Docs()}
"""


def _definition(name: str, retrieve: dict[str, Any] | None) -> dict[str, Any]:
    ask: dict[str, Any] = {
        "id": "ask",
        "description": "answering",
        "purpose": "answer questions",
        "transitions": [{"target_state": "done", "description": "the user is done"}],
    }
    if retrieve is not None:
        ask["retrieve"] = retrieve
    return {
        "name": name,
        "description": "answers from the docs",
        "initial_state": "ask",
        "states": {"ask": ask, "done": {"id": "done", "description": "end", "purpose": "say goodbye"}},
    }


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    served = tmp_path / "definitions"
    served.mkdir()
    (served / "faq.json").write_text(json.dumps(_definition("faq", {"retriever": "docs"})), encoding="utf-8")
    (served / "plain.json").write_text(json.dumps(_definition("plain", None)), encoding="utf-8")
    (tmp_path / "search.py").write_text(SEARCH, encoding="utf-8")
    (tmp_path / "replies.yaml").write_text("- Hello!\n", encoding="utf-8")
    return tmp_path


def _warnings(result: Any) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("warning:")]


def test_serving_a_definition_that_retrieves_from_an_unregistered_name_warns_before_listening(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = f"scripted:{folder / 'replies.yaml'}"
    app, result = _serve_capturing_the_app(monkeypatch, str(folder / "definitions"), "--model", model)
    assert result.exit_code == 0 and app is not None  # served all the same: each turn follows on_error
    (warning,) = _warnings(result)
    assert "faq (docs)" in warning and "plain" not in warning
    assert "on_error" in warning and "--retrievers" in warning


def test_serving_with_the_retrievers_the_definitions_name_warns_about_none(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = f"scripted:{folder / 'replies.yaml'}"
    spec = f"{folder / 'search.py'}:retrievers"
    app, result = _serve_capturing_the_app(
        monkeypatch, str(folder / "definitions"), "--model", model, "--retrievers", spec
    )
    assert result.exit_code == 0 and app is not None
    assert _warnings(result) == []


def test_a_definition_wide_retrieve_counts_as_naming_its_retriever(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wide = _definition("wide", None) | {"retrieve": {"retriever": "handbook"}}
    (folder / "definitions" / "wide.json").write_text(json.dumps(wide), encoding="utf-8")
    model = f"scripted:{folder / 'replies.yaml'}"
    spec = f"{folder / 'search.py'}:retrievers"
    _, result = _serve_capturing_the_app(
        monkeypatch, str(folder / "definitions"), "--model", model, "--retrievers", spec
    )
    (warning,) = _warnings(result)
    assert "wide (handbook)" in warning and "faq" not in warning
