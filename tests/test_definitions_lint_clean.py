"""Every file in definitions/ passes fsm-lint, loads, and draws, through the same entry points users run.

``test_definitions_lint.py`` pins the exact findings of each example; this file
checks the user-facing contract: ``fsm-lint definitions/`` exits 0, every file
loads with ``load_fsm_definition`` and renders in every diagram format, with
no warning at all.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fsm.cli._app import main
from llm_fsm.lint._linter import lint_document
from llm_fsm.loading import load_fsm_definition, read_document
from llm_fsm.scripting._files import is_mcp_config_file

DEFINITIONS = Path(__file__).resolve().parent.parent / "definitions"
FILES = sorted(
    p
    for p in DEFINITIONS.rglob("*")
    if p.suffix in (".json", ".yaml", ".yml") and ".conv." not in p.name and not is_mcp_config_file(p)
)


def test_the_definitions_folder_has_examples() -> None:
    assert len(FILES) >= 3


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_example_has_no_lint_finding(path: Path) -> None:
    diagnostics = lint_document(read_document(path)).diagnostics
    assert [(d.code, d.severity, d.message) for d in diagnostics] == []


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_example_loads(path: Path) -> None:
    assert load_fsm_definition(path, cache=None).initial_state


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("fmt", ["mermaid", "dot", "text"])
def test_example_renders(path: Path, fmt: str) -> None:
    result = CliRunner().invoke(main, ["graph", str(path), "--format", fmt])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("path", [p for p in FILES if p.suffix in (".yaml", ".yml")], ids=lambda p: p.name)
def test_yaml_example_points_editors_at_the_schema(path: Path) -> None:
    schema = os.path.relpath(DEFINITIONS.parent / "schemas" / "fsm_definition.schema.json", path.parent)
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first == f"# yaml-language-server: $schema={Path(schema).as_posix()}"


def test_fsm_lint_over_the_folder_exits_0() -> None:
    result = CliRunner().invoke(main, ["lint", str(DEFINITIONS)])
    assert result.exit_code == 0, result.output
    assert f"{len(FILES)} file(s) checked: 0 error(s)" in result.output
