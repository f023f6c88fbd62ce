"""A YAML file of more values than its size cap allows is refused before the composer builds them.

Each composed YAML node costs about 500 bytes (the node, its two marks, its value, its line), so a 4.8 MB
list of scalars, under the 5 MiB cap and holding no container to count, cost ``fsm-lint`` 1.3 GB. In YAML
every value counts against the cap that JSON applies to objects and arrays: one per 10 bytes of the size cap.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_fsm.definition import _yaml_loader
from llm_fsm.definition._documents import parse_yaml
from llm_fsm.errors import DefinitionError
from llm_fsm.loading import DEFAULT_MAX_BYTES, read_document

MILLION_SCALARS = "[" + ",".join(["1"] * 1_000_000) + "]\n"
CAP = DEFAULT_MAX_BYTES // 10


@pytest.fixture
def many(tmp_path: Path) -> Path:
    path = tmp_path / "many.yaml"
    path.write_text(MILLION_SCALARS, encoding="utf-8")
    assert path.stat().st_size < DEFAULT_MAX_BYTES  # within the size cap: only the value cap can stop it
    return path


@pytest.fixture
def nodes_built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many YAML nodes were composed (libyaml's composer builds them with PyYAML's node classes too)."""
    built = [0]
    for kind in (yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode):
        original = kind.__init__

        def counting(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> None:
            built[0] += 1
            _original(self, *args, **kwargs)

        monkeypatch.setattr(kind, "__init__", counting)
    yield built


def test_a_yaml_list_of_a_million_scalars_is_a_definition_error_naming_the_cap(many: Path) -> None:
    with pytest.raises(DefinitionError) as refused:
        read_document(many)
    assert refused.value.message.startswith(f"more than {CAP:,} YAML values (scalars, objects and arrays)")
    assert refused.value.file == str(many)


def test_the_composer_builds_none_of_them(many: Path, nodes_built: list[int]) -> None:
    with pytest.raises(DefinitionError):
        read_document(many)
    assert nodes_built[0] == 0  # libyaml's event stream is counted first; the composer never starts


def test_without_libyaml_the_composer_stops_at_the_cap(nodes_built: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_yaml_loader, "_CLoader", None)  # PyYAML built without libyaml: the pure-Python composer
    with pytest.raises(DefinitionError, match="more than 1,000 YAML values"):
        parse_yaml(MILLION_SCALARS, file="many.yaml", max_nodes=1_000)
    assert nodes_built[0] <= 1_000  # it counts each node before composing it


PEAK_OF_FSM_LINT = """
import resource, sys
from llm_fsm.cli import lint_main
try:
    lint_main(sys.argv[1:])
except SystemExit as end:
    sys.stderr.write(f"peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n")
    raise
"""


def test_fsm_lint_reports_one_unreadable_file_exits_2_and_stays_small(many: Path) -> None:
    """Loosely: before the cap, ``fsm-lint`` on 4.8 MB of such a list peaked at 1.3 GB; now under 300 MB."""
    done = subprocess.run(
        [sys.executable, "-c", PEAK_OF_FSM_LINT, str(many)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr
    (finding,) = [line for line in done.stdout.splitlines() if " error " in line]
    assert finding.startswith(f"{many}: error FSM000 unreadable-input") and "YAML values" in finding
    assert "Traceback" not in done.stderr
    peak_kib = int(done.stderr.rsplit("peak ", 1)[1])
    assert peak_kib < 300 * 1024
