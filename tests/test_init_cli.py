"""``llm-fsm init NAME``: what it writes lints clean and tests clean, and it never overwrites."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llm_fsm.cli._app import main
from llm_fsm.cli.lint import fsm_lint


def invoke(*args: str, input: str | None = None):
    result = CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)
    assert "Traceback" not in result.output
    return result


def test_init_writes_a_definition_and_a_script_that_lint_and_test_clean(tmp_path: Path) -> None:
    result = invoke("init", "signup", "--dir", str(tmp_path / "bots"))
    assert result.exit_code == 0, result.output
    definition = tmp_path / "bots" / "signup.yaml"
    script = tmp_path / "bots" / "conversations" / "signup.conv.yaml"
    assert definition.is_file() and script.is_file()
    assert f"llm-fsm test {definition} --min-coverage 100" in result.output

    linted = CliRunner().invoke(fsm_lint, ["--strict", str(tmp_path / "bots")])
    assert linted.exit_code == 0, linted.output
    assert "0 error(s), 0 warning(s)" in linted.output
    tested = invoke("test", str(definition), "--min-coverage", "100")
    assert tested.exit_code == 0, tested.output
    assert "2 conversations: 2 passed, 0 failed" in tested.output
    assert "3/3  100%" in tested.output and "4/4  100%" in tested.output


def test_what_init_writes_can_be_chatted_with_its_own_script(tmp_path: Path) -> None:
    invoke("init", "signup", "--dir", str(tmp_path))
    script = tmp_path / "conversations" / "signup.conv.yaml"
    result = invoke(
        "chat", str(tmp_path / "signup.yaml"), "--model", f"scripted:{script}", "--store", "memory://",
        input="I'm Ada Lovelace\nada.example.com\nada@example.com\nyes\n",  # the name as the script has it: grounded
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "conversation ended in state done" in result.output


def test_the_template_declares_every_key_it_collects_and_its_guards_read(tmp_path: Path) -> None:
    from llm_fsm.loading import load_fsm_definition

    invoke("init", "signup", "--dir", str(tmp_path))
    definition = load_fsm_definition(str(tmp_path / "signup.yaml"))
    declared = definition.context_keys or {}
    assert declared["email"].format == "email" and declared["name"].type == "string"
    assert definition.additional_keys is False
    read = {
        key
        for state in definition.states.values()
        for transition in state.transitions
        for condition in transition.conditions or ()
        for key in condition.requires_context_keys or ()
    }
    collected = {key for state in definition.states.values() for key in state.required_context_keys or ()}
    assert read and read <= set(declared) and collected <= set(declared)
    assert "logic" not in (tmp_path / "signup.yaml").read_text(encoding="utf-8")  # no hand-written check of "@"


def test_the_template_refuses_an_email_without_an_at_and_stores_nothing(tmp_path: Path) -> None:
    from llm_fsm.llm.fakes import FunctionLLM
    from llm_fsm.loading import load_fsm_definition
    from llm_fsm.manager import FSMManager

    invoke("init", "signup", "--dir", str(tmp_path))
    definition = load_fsm_definition(str(tmp_path / "signup.yaml"))

    def model(request: Any) -> dict[str, Any]:
        written = {"name": "Ada Lovelace"} if "Ada" in request.user_message else {"email": "ada.example.com"}
        target = "ask_email" if "Ada" in request.user_message else "confirm"
        if request.purpose != "turn":
            written, target = {}, "ask_name"
        return {"transition": {"target_state": target, "context_update": written}, "message": "ok"}

    manager = FSMManager(fsm_loader=lambda _id: definition, llm_interface=FunctionLLM(model))
    cid, _ = manager.start_conversation("signup")
    manager.process_message(cid, "I'm Ada Lovelace")
    manager.process_message(cid, "ada.example.com")
    assert manager.get_conversation_data(cid) == {"name": "Ada Lovelace"}
    assert manager.get_current_state(cid) == "ask_email"
    (change,) = manager.explain(cid).context_changes
    assert (change.key, change.applied, change.rule) == ("email", False, "format")


def test_init_never_overwrites_and_writes_nothing_when_one_file_exists(tmp_path: Path) -> None:
    (tmp_path / "conversations").mkdir()
    existing = tmp_path / "conversations" / "signup.conv.yaml"
    existing.write_text("mine\n", encoding="utf-8")
    result = invoke("init", "signup", "--dir", str(tmp_path))
    assert result.exit_code == 2
    assert "not overwriting" in result.output and str(existing) in result.output
    assert existing.read_text(encoding="utf-8") == "mine\n"
    assert not (tmp_path / "signup.yaml").exists()


@pytest.mark.parametrize("name", ["../escape", "has space", "9lives", "", "a/b"])
def test_a_name_that_is_not_a_plain_file_name_is_refused(tmp_path: Path, name: str) -> None:
    result = invoke("init", name, "--dir", str(tmp_path))
    assert result.exit_code == 2
    assert list(tmp_path.iterdir()) == []


def test_the_title_comes_from_the_name(tmp_path: Path) -> None:
    invoke("init", "customer_sign-up", "--dir", str(tmp_path))
    assert "name: Customer Sign Up\n" in (tmp_path / "customer_sign-up.yaml").read_text(encoding="utf-8")


def test_init_is_listed_in_the_help_with_an_example() -> None:
    assert "init" in invoke("--help").output
    assert "Example:" in invoke("init", "--help").output
