"""``llm-fsm chat`` and ``run`` start a conversation in a language (``--language``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from llm_fsm.cli import chat as chat
from llm_fsm.cli._app import EXIT_UNREADABLE, main
from llm_fsm.llm.fakes import ScriptedLLM

PARCEL = str(Path(__file__).resolve().parents[1] / "definitions" / "parcel_redelivery.yaml")


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> ScriptedLLM:
    llm = ScriptedLLM(["Guten Tag! Wie lautet Ihre Sendungsnummer?"])
    monkeypatch.setattr(chat, "make_llm", lambda model, **kw: llm)
    return llm


def run(*args: str, input: Any = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def test_chat_starts_the_conversation_in_the_language_given(model: ScriptedLLM, tmp_path: Path) -> None:
    result = run("chat", PARCEL, "--model", "x", "--store", f"sqlite:///{tmp_path / 'c.db'}", "--language", "de")
    assert result.exit_code == 0, result.output
    assert "Write your message in German (de)" in model.requests[0].system_prompt


def test_chat_refuses_a_language_the_definition_does_not_declare(model: ScriptedLLM, tmp_path: Path) -> None:
    result = run("chat", PARCEL, "--model", "x", "--store", f"sqlite:///{tmp_path / 'c.db'}", "--language", "fr")
    assert result.exit_code == EXIT_UNREADABLE
    assert "'fr' is not one of" in result.output
    assert not model.requests
