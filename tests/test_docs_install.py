"""The install commands the docs give install this project: ``llm-fsm`` on PyPI is the original project.

``pip install 'llm_fsm[server]'`` (the first command of docs/server.md) and ``pip install "llm-fsm[otel]"`` name the
package index's ``llm-fsm`` (the names are the same once normalised), the 0.1.1 the benchmarks compare against,
which has none of these extras: a newcomer got another project. From a checkout it is ``pip install -e '.[extra]'``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "definitions" / "README.md"]
BY_NAME = re.compile(r"pip install[^`\n]*?['\"]?llm[-_]fsm\[", re.I)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_no_page_installs_the_package_by_its_name_from_the_index(page: Path) -> None:
    found = [line.strip() for line in page.read_text("utf-8").splitlines() if BY_NAME.search(line)]
    assert found == [], f"{page.relative_to(ROOT)}: {found}"
