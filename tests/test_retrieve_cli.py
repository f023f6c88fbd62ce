"""``llm-fsm chat`` and ``run`` take the application's retrievers (``--retrievers module:name``), as they take its
actions: a state that retrieves then gets its snippets, and ``--explain`` shows them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_fsm.cli import chat
from llm_fsm.cli._app import main
from llm_fsm.testing import ScriptedLLM

SEARCH = """
from llm_fsm.retrieval import Snippet


class Docs:
    def retrieve(self, query, *, k):
        return [Snippet("refund#1", "Refunds within 30 days.", "policies.md > Refunds")]


retrievers = {"docs": Docs()}
"""

DEFINITION = {
    "name": "faq",
    "description": "answers from the docs",
    "initial_state": "ask",
    "states": {
        "ask": {
            "id": "ask",
            "description": "answering",
            "purpose": "answer questions",
            "retrieve": {"retriever": "docs"},
            "transitions": [{"target_state": "done", "description": "the user is done"}],
        },
        "done": {"id": "done", "description": "end", "purpose": "say goodbye"},
    },
}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    llm = ScriptedLLM(
        [
            {"transition": {"target_state": "ask"}, "message": "Ask me anything."},
            {"transition": {"target_state": "ask"}, "message": "Within 30 days [refund#1]."},
        ]
    )
    monkeypatch.setattr(chat, "make_llm", lambda model, **kw: llm)
    (tmp_path / "search.py").write_text(SEARCH, encoding="utf-8")
    (tmp_path / "faq.json").write_text(json.dumps(DEFINITION), encoding="utf-8")
    return {"llm": llm, "dir": tmp_path}


def _chat(files: dict[str, Any], *options: str) -> Any:
    tmp: Path = files["dir"]
    args = ["chat", str(tmp / "faq.json"), "--model", "x", "--store", f"sqlite:///{tmp / 'c.db'}", "--explain"]
    return CliRunner().invoke(main, [*args, *options], input="refunds?\n", catch_exceptions=False)


def test_chat_with_retrievers_puts_the_snippets_in_the_prompt_and_explain_shows_the_citation(files: Any) -> None:
    result = _chat(files, "--retrievers", f"{files['dir'] / 'search.py'}:retrievers")
    assert result.exit_code == 0, result.output
    assert "Refunds within 30 days." in files["llm"].requests[-1].system_prompt
    assert '"cited": [\n      "refund#1"\n    ]' in result.output


def test_chat_without_retrievers_answers_without_snippets_and_says_why(files: Any) -> None:
    result = _chat(files)
    assert result.exit_code == 0, result.output
    assert "<retrieved_knowledge>" not in files["llm"].requests[-1].system_prompt
    assert "no retriever is registered under that name" in result.output


def test_the_served_app_every_worker_builds_has_the_retrievers(files: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from llm_fsm.cli.serve import ServeSettings, build_app

    tmp: Path = files["dir"]
    replies = tmp / "replies.yaml"
    replies.write_text("- Ask me anything.\n", encoding="utf-8")
    spec = f"{tmp / 'search.py'}:retrievers"
    settings = ServeSettings(
        definitions=[str(tmp / "faq.json")],
        store="memory://",
        model=f"scripted:{replies}",
        retrievers=spec,
        anonymous=True,
    )
    app = build_app(ServeSettings.from_json(settings.to_json()))
    assert list(app.state.manager.retrievers) == ["docs"]


def test_serve_offers_retrievers_as_it_offers_actions() -> None:
    result = CliRunner().invoke(main, ["serve", "--help"])
    assert "--retrievers" in result.output and "--actions" in result.output
