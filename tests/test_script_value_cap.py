"""Scripts and ``scripted:`` reply files are capped in values as definitions are, before anything is built.

A 2 MiB script (its byte cap) of short scalars is 700,000 values: composed, several hundred MB. Like a definition,
a script may hold one value per 10 bytes of its byte cap, and the refusal speaks of a script, not a definition.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fsm.cli._models import ReplyFileModel
from llm_fsm.errors import ScriptError
from llm_fsm.scripting._scripts import MAX_SCRIPT_BYTES, load_script

MANY = "[" + ",".join(["1"] * 600_000) + "]\n"  # 1.2 MB: under the byte cap, over the value cap


def test_a_script_of_more_values_than_its_cap_is_a_script_error_that_speaks_of_scripts(tmp_path: Path) -> None:
    path = tmp_path / "many.conv.yaml"
    path.write_text("definition: x.yaml\nturns: " + MANY, encoding="utf-8")
    assert path.stat().st_size < MAX_SCRIPT_BYTES
    with pytest.raises(ScriptError) as refused:
        load_script(path)
    assert f"more than {MAX_SCRIPT_BYTES // 10:,} YAML values" in refused.value.message
    assert "a script has far fewer" in refused.value.message and "definition" not in refused.value.message


def test_a_reply_file_of_more_values_than_its_cap_is_refused_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "replies.yaml"
    path.write_text(MANY, encoding="utf-8")
    with pytest.raises(ScriptError) as refused:
        ReplyFileModel.from_file(str(path))
    assert "a reply file has far fewer" in refused.value.message


def test_a_json_reply_file_counts_its_objects_and_arrays(tmp_path: Path) -> None:
    path = tmp_path / "replies.json"
    path.write_text("[" + ",".join(["{}"] * 300_000) + "]", encoding="utf-8")
    with pytest.raises(ScriptError) as refused:
        ReplyFileModel.from_file(str(path))
    assert "objects and arrays; a reply file has far fewer" in refused.value.message
