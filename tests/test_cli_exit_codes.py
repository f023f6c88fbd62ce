"""One exit-code policy for every command: 0 clean, 1 something checked or played failed, 2 could not run.

The policy lives in ``llm_fsm/cli/_app.py`` (``exit_code_for``); each command
gets one representative error here, through the real click group.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from llm_fsm import errors
from llm_fsm.cli import chat
from llm_fsm.cli._app import EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE, exit_code_for, main
from llm_fsm.cli.lint import fsm_lint
from llm_fsm.engine import LLMResponse
from llm_fsm.errors import LLMConfigurationError, LLMProviderError
from llm_fsm.llm.fakes import ScriptedLLM
from llm_fsm.local import _server

ROOT = Path(__file__).resolve().parents[1]
GREETING = str(ROOT / "definitions" / "simple_greeting.yaml")

#: every error type of llm_fsm and the exit code it stops a command with
POLICY = {
    "FSMError": EXIT_UNREADABLE,
    "LocatedError": EXIT_UNREADABLE,
    "DefinitionError": EXIT_UNREADABLE,
    "DefinitionNotFoundError": EXIT_UNREADABLE,
    "ScriptError": EXIT_UNREADABLE,
    "LogicError": EXIT_UNREADABLE,
    "LogicBudgetError": EXIT_UNREADABLE,
    "StateNotFoundError": EXIT_UNREADABLE,
    "DefinitionChangedError": EXIT_UNREADABLE,
    "LLMConfigurationError": EXIT_UNREADABLE,
    "ConversationNotFoundError": EXIT_UNREADABLE,
    "TurnNotFoundError": EXIT_UNREADABLE,
    "UsageError": EXIT_UNREADABLE,
    "InvalidCursorError": EXIT_UNREADABLE,  # a usage error: the command was given a cursor no listing gave
    "OperatorError": EXIT_UNREADABLE,
    "UnknownStateError": EXIT_UNREADABLE,
    "UnknownLanguageError": EXIT_UNREADABLE,  # a usage error: a language the definition does not declare
    "OperatorFlowError": EXIT_UNREADABLE,
    "HandoffError": EXIT_UNREADABLE,
    "StoreError": EXIT_UNREADABLE,
    "StoreUnavailableError": EXIT_UNREADABLE,
    "TurnOutcomeUnknownError": EXIT_UNREADABLE,  # a store failure like its parent: the CLI says which
    "StoreCorruptedError": EXIT_UNREADABLE,
    "DefinitionVersionNotFoundError": EXIT_UNREADABLE,  # a store error: the version asked for is not kept there
    "LLMResponseError": EXIT_FINDINGS,
    "MalformedOutputError": EXIT_FINDINGS,
    "LLMProviderError": EXIT_FINDINGS,
    "LLMScriptExhaustedError": EXIT_FINDINGS,
    "HookError": EXIT_FINDINGS,
    "FlowError": EXIT_FINDINGS,
    "BudgetExceededError": EXIT_FINDINGS,
    "ContextError": EXIT_FINDINGS,
    "ContextTooLargeError": EXIT_FINDINGS,
    "ContextValidationError": EXIT_FINDINGS,
    "RecordTooLargeError": EXIT_FINDINGS,
    "MessageTooLargeError": EXIT_FINDINGS,
    "InvalidMessageError": EXIT_FINDINGS,
    "UnsupportedContentError": EXIT_FINDINGS,
    "InvalidTransitionError": EXIT_FINDINGS,
    "ConversationEndedError": EXIT_FINDINGS,
    "ConcurrentUpdateError": EXIT_FINDINGS,
    "ActionError": EXIT_FINDINGS,
    "ActionNotRegisteredError": EXIT_UNREADABLE,
    "AuditError": EXIT_UNREADABLE,  # a record or a version the audit cannot read: unusable input
    "NotRecomputableError": EXIT_UNREADABLE,
    "MigrationError": EXIT_FINDINGS,  # conversations the new version would strand: a finding
    "RetrievalError": EXIT_UNREADABLE,  # outside a turn (a command building a retriever): it could not run
    "RetrievalIndexError": EXIT_UNREADABLE,  # a missing or unusable index: unusable input
    "MCPClientError": EXIT_UNREADABLE,  # outside a turn (lint listing a server's tools): it could not run
    "MCPConfigError": EXIT_UNREADABLE,  # an MCP config file that cannot be used: unusable input
    "MCPToolError": EXIT_UNREADABLE,  # outside a turn; in one it is the action's failure (ActionError, exit 1)
}


def _error_types() -> list[type[errors.FSMError]]:
    return [
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, errors.FSMError) and cls.__module__ == errors.__name__
    ]


def _instance(cls: type[BaseException]) -> BaseException:
    try:
        return cls("x")
    except TypeError:  # errors with required keyword arguments
        return cls.__new__(cls)


@pytest.mark.parametrize("cls", _error_types(), ids=lambda cls: cls.__name__)
def test_every_error_type_has_a_decided_exit_code(cls: type[errors.FSMError]) -> None:
    assert cls.__name__ in POLICY, f"decide the exit code of {cls.__name__} in cli/_app.py and add it here"
    assert exit_code_for(_instance(cls)) == POLICY[cls.__name__]


def test_errors_that_are_not_ours_mean_the_command_could_not_run() -> None:
    assert exit_code_for(RuntimeError("bug")) == EXIT_UNREADABLE
    assert exit_code_for(PermissionError(13, "Permission denied", "/x")) == EXIT_UNREADABLE


# --- one representative error per command ----------------------------------------------------------


def invoke(*args: str, input: str | None = None) -> Result:
    result = CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'c.db'}"


@pytest.fixture
def broken(tmp_path: Path) -> str:
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Callable[..., ScriptedLLM]:
    def install(*replies: LLMResponse | dict[str, Any] | str | BaseException) -> ScriptedLLM:
        llm = ScriptedLLM(list(replies))
        monkeypatch.setattr(chat, "make_llm", lambda model, **kw: llm)
        return llm

    return install


def test_chat_on_an_unreadable_definition_exits_2(
    scripted: Callable[..., ScriptedLLM], store: str, broken: str
) -> None:
    scripted()
    result = invoke("chat", broken, "--model", "x", "--store", store, input="")
    assert result.exit_code == EXIT_UNREADABLE
    assert "error:" in result.output and "broken.yaml" in result.output


def test_run_on_an_unreadable_definition_exits_2(
    scripted: Callable[..., ScriptedLLM], store: str, broken: str, tmp_path: Path
) -> None:
    scripted()
    (tmp_path / "m.txt").write_text("hi\n")
    result = invoke("run", broken, "--model", "x", "--store", store, "--input", str(tmp_path / "m.txt"))
    assert result.exit_code == EXIT_UNREADABLE


def test_run_exits_1_when_the_model_could_not_answer_a_message(
    scripted: Callable[..., ScriptedLLM], store: str, tmp_path: Path
) -> None:
    opening = {"transition": {"target_state": "greeting"}, "message": "Hi! Your name?"}
    bye = {"transition": {"target_state": "farewell", "context_update": {"name": "Ann"}}, "message": "Bye Ann!"}
    scripted(opening, LLMProviderError("rate limited", retryable=True), bye)
    (tmp_path / "m.txt").write_text("hello\nI'm Ann\n")
    result = invoke("run", GREETING, "--model", "x", "--store", store, "--input", str(tmp_path / "m.txt"))
    assert result.exit_code == EXIT_FINDINGS
    assert "could not be used" in result.output and "Bye Ann!" in result.output


def test_chat_without_a_model_exits_2(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(chat.MODEL_ENV, raising=False)
    assert invoke("chat", GREETING, "--store", store, input="").exit_code == EXIT_UNREADABLE


def test_explain_of_an_unknown_conversation_exits_2(store: str) -> None:
    result = invoke("explain", "no-such-id", "--store", store)
    assert result.exit_code == EXIT_UNREADABLE
    assert "no-such-id" in result.output


def test_trace_of_an_unknown_conversation_exits_2(store: str) -> None:
    assert invoke("trace", "no-such-id", "--store", store).exit_code == EXIT_UNREADABLE


def test_conversations_on_a_store_that_cannot_be_opened_exits_2() -> None:
    result = invoke("conversations", "--store", "nosuchscheme://x")
    assert result.exit_code == EXIT_UNREADABLE
    assert "error:" in result.output


def test_graph_of_an_unreadable_definition_exits_2(broken: str) -> None:
    assert invoke("graph", broken).exit_code == EXIT_UNREADABLE


def test_lint_findings_exit_1_and_an_unreadable_file_exits_2(tmp_path: Path, broken: str) -> None:
    orphan = tmp_path / "orphan.yaml"
    orphan.write_text(
        "name: n\ndescription: d\ninitial_state: a\nstates:\n"
        "  a: {id: a, description: d, purpose: p, transitions: []}\n"
        "  b: {id: b, description: d, purpose: p, transitions: []}\n",
        encoding="utf-8",
    )
    assert invoke("lint", str(orphan)).exit_code == EXIT_FINDINGS
    assert invoke("lint", broken).exit_code == EXIT_UNREADABLE
    assert CliRunner().invoke(fsm_lint, [broken]).exit_code == EXIT_UNREADABLE


def test_schema_check_of_a_stale_file_exits_1_and_of_a_missing_file_exits_2(tmp_path: Path) -> None:
    stale = tmp_path / "schema.json"
    stale.write_text("{}", encoding="utf-8")
    assert invoke("schema", "--check", str(stale)).exit_code == EXIT_FINDINGS
    assert invoke("schema", "--check", str(tmp_path / "missing.json")).exit_code == EXIT_UNREADABLE


def test_index_of_a_missing_folder_exits_2_and_of_a_folder_with_a_skipped_file_exits_1(tmp_path: Path) -> None:
    assert invoke("index", str(tmp_path / "missing"), "--out", str(tmp_path / "i.db")).exit_code == EXIT_UNREADABLE
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "big.txt").write_text("x" * 100, encoding="utf-8")
    skipped = invoke("index", str(tmp_path / "docs"), "--out", str(tmp_path / "i.db"), "--max-bytes", "10")
    assert skipped.exit_code == EXIT_FINDINGS


def test_test_with_a_model_that_is_not_configured_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    def unconfigured(model: object, **kwargs: object) -> object:
        raise LLMConfigurationError("no API key")

    monkeypatch.setattr(chat, "make_llm", unconfigured)
    result = invoke("test", str(ROOT / "definitions" / "simple_greeting.yaml"), "--model", "gpt-x")
    assert result.exit_code == EXIT_UNREADABLE
    assert "no API key" in result.output


def test_local_start_that_fails_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: object, **kwargs: object) -> None:
        raise LLMConfigurationError("llama-server exited with code 1 while starting")

    monkeypatch.setattr(_server, "start", crash)
    result = invoke("local", "start", "--home", str(tmp_path))
    assert result.exit_code == EXIT_UNREADABLE
    assert "exited with code 1" in result.output


def test_a_clean_command_exits_0() -> None:
    assert invoke("graph", GREETING).exit_code == EXIT_CLEAN


def test_the_policy_is_in_the_help() -> None:
    text = invoke("--help").output
    assert "Exit status" in text and "could not run" in text


def test_output_piped_into_a_reader_that_stops_early_ends_quietly(tmp_path: Path) -> None:
    """``llm-fsm test definitions/ | head`` printed 'error: Broken pipe' twice: a closed pipe is not a failure to
    report, it is the reader having read enough (click's own handling, exit 1, nothing on stderr)."""
    import os
    import subprocess
    import sys

    reader, writer = os.pipe()
    os.close(reader)  # the reader has gone before the command writes
    command = [sys.executable, "-c", "from llm_fsm.cli._app import main; main()", "graph", GREETING, "--format", "text"]
    done = subprocess.run(command, stdout=writer, stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    os.close(writer)
    assert "error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1
