"""The examples in docs/definition-format.md run as the page says: a newcomer copies them first."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from llm_fsm.utilities import load_fsm_definition

PAGE = Path(__file__).resolve().parent.parent / "docs" / "definition-format.md"
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
DEFINITIONS = [text for lang, text in BLOCKS if lang == "yaml" and re.search(r"^states:", text, re.M)]


def test_the_page_has_a_complete_example_and_a_worked_hook_example() -> None:
    assert DEFINITIONS, "no complete YAML definition on the page"
    assert any(lang == "python" and "add_hook" in text for lang, text in BLOCKS)


@pytest.mark.parametrize("text", DEFINITIONS, ids=range(len(DEFINITIONS)))
def test_every_complete_yaml_example_loads(text: str, tmp_path: Path) -> None:
    path = tmp_path / "example.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_fsm_definition(str(path)).states


def test_the_worked_hook_example_prints_what_the_page_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "returns.yaml").write_text(DEFINITIONS[0], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    index = next(i for i, (lang, text) in enumerate(BLOCKS) if lang == "python" and "add_hook" in text)
    code, shown = BLOCKS[index][1], BLOCKS[index + 1][1]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(PAGE), "exec"), {"__name__": "docs_example"})
    assert printed.getvalue().strip() == shown.strip()


def test_the_actions_example_prints_what_the_page_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    definition = next(text for lang, text in BLOCKS if lang == "yaml" and text.startswith("name: order_status\n"))
    (tmp_path / "order_status.yaml").write_text(definition, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    index = next(i for i, (lang, text) in enumerate(BLOCKS) if lang == "python" and "actions.register" in text)
    code, shown = BLOCKS[index][1], BLOCKS[index + 1][1]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(PAGE), "exec"), {"__name__": "docs_example"})
    assert printed.getvalue().strip() == shown.strip()
