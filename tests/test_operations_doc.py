"""The examples of docs/operations.md run and print what the page shows (newcomers copy them first)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "operations.md"
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)


def test_each_python_example_prints_the_text_shown_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the examples name definitions/ relative to the repository
    scope: dict[str, object] = {"__name__": "docs_example"}
    examples = [(code, BLOCKS[i + 1][1]) for i, (lang, code) in enumerate(BLOCKS) if lang == "python"]
    assert len(examples) == 4
    for code, shown in examples:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(PAGE), "exec"), scope)  # one namespace: later examples reuse say()
        assert printed.getvalue().strip() == shown.strip()


def test_the_yaml_example_is_a_state_the_loader_takes() -> None:
    import yaml

    from llm_fsm.definition._model import State

    (state,) = yaml.safe_load(next(text for lang, text in BLOCKS if lang == "yaml")).values()
    assert State.model_validate(state).confirmation.changeable_keys == ["time", "party_size"]


def test_no_python_example_hides_in_a_list_where_the_run_above_would_miss_it() -> None:
    indented = re.findall(r"^[ \t]+```python", PAGE.read_text(encoding="utf-8"), re.M)
    assert not indented, "an indented python block is never executed by these tests: move it to the top level"
