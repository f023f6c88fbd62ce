"""``llm-fsm init NAME``: what it writes lints clean and tests clean, and it never overwrites."""

from __future__ import annotations

from pathlib import Path

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
        input="I'm Ada\nada.example.com\nada@example.com\nyes\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "conversation ended in state done" in result.output


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
