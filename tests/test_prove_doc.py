"""docs/prove.md's worked example runs as the page shows: the finding, the statuses, the replayed counterexample."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fsm.cli import main
from llm_fsm.cli.lint import fsm_lint

PAGE = Path(__file__).resolve().parent.parent / "docs" / "prove.md"
TEXT = PAGE.read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", TEXT, re.S | re.M)
DEFINITION = next(text for lang, text in BLOCKS if lang == "yaml" and text.startswith("name: refund\n"))
CONSOLE = next(text for lang, text in BLOCKS if lang == "console" and "--prove" in text)
PYTHON = next(text for lang, text in BLOCKS if lang == "python" and "prove(" in text)


def _shown(prefix: str) -> str:
    return next(line for line in CONSOLE.splitlines() if line.startswith(prefix))


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "refund.yaml").write_text(DEFINITION, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_prove_command_prints_the_finding_and_the_statuses_the_page_shows(folder: Path) -> None:
    result = CliRunner().invoke(fsm_lint, ["--prove", "--counterexamples", "out/", "refund.yaml"])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert _shown("refund.yaml:9: error FSM044") in lines
    assert _shown("    hint: a path of 1 turn") in lines
    status = re.sub(r"\[.*\]$", "", _shown("refund.yaml: proof:"))
    assert any(line.startswith(status) for line in lines)
    assert _shown("1 file(s) checked") in lines


def test_the_written_counterexample_replays_as_the_page_shows(folder: Path) -> None:
    CliRunner().invoke(fsm_lint, ["--prove", "--counterexamples", "out/", "refund.yaml"])
    result = CliRunner().invoke(main, ["test", "out/"])
    assert result.exit_code == 0, result.output
    assert _shown("PASS out/refund.01") in result.output.splitlines()


def test_the_python_example_runs(folder: Path) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(PYTHON, str(PAGE), "exec"), {"__name__": "docs_example"})
    assert "'no_model_gate': 'failed'" in printed.getvalue()
    assert (folder / "out" / "refund.01.no_model_gate.order.conv.yaml").is_file()


def test_the_page_explains_every_property_and_the_abstraction() -> None:
    for name in ("no_trap", "progress", "no_model_gate", "flows_return", "## The abstraction", "over-approximated"):
        assert name.lower() in TEXT.lower(), name
