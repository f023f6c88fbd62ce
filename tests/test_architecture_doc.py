"""docs/architecture.md stays true to the tree: its module map names every module, and nothing that is gone.

The map went stale once already (it omitted three engine modules and described the old CLI); a test is the
only reviewer that reads it on every change.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "llm_fsm"
DOC = ROOT / "docs" / "architecture.md"


def _module_map() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Module map")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _modules() -> list[str]:
    """Every module of the package, as the map names it: its path under ``llm_fsm/``."""
    return sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "static" not in path.parts and path.name != "__init__.py"
    )


def test_the_module_map_names_every_module_of_the_package() -> None:
    section = _module_map()
    missing = [module for module in _modules() if f"`{module}`" not in section]
    assert not missing, f"docs/architecture.md's module map does not name: {', '.join(missing)}"


def test_every_module_the_map_names_exists() -> None:
    named = set(re.findall(r"`([a-z_/]+\.py)`", _module_map()))
    gone = sorted(name for name in named if not (PACKAGE / name).is_file())
    assert not gone, f"docs/architecture.md's module map names modules that are not there: {', '.join(gone)}"
