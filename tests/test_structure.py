"""The package's shape, checked like its behaviour: small modules, few loose ones at the root, no import cycle.

The runtime grew by addition until a 1,159-line manager and an import cycle made new paths easy to get wrong;
these limits (DESIGN.md: no module over 600 lines, at most a dozen at the root, arrows one way) keep the
next growth honest. The layers themselves are import-linter's contracts (``lint-imports`` in .ci/run).
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

PACKAGE = Path(__file__).resolve().parent.parent / "llm_fsm"
MAX_LINES = 600
MAX_ROOT_MODULES = 12


def test_no_module_is_over_six_hundred_lines() -> None:
    sizes = {path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    over = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines: {over}"


def test_at_most_a_dozen_modules_sit_at_the_package_root() -> None:
    root = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, f"{len(root)} modules at the root: {root}"


def test_no_module_of_the_package_imports_itself_back_through_others() -> None:
    graph = grimp.build_graph("llm_fsm", exclude_type_checking_imports=True)
    modules = sorted(m for m in graph.modules if m.startswith("llm_fsm"))
    edges = {
        m: sorted(t for t in graph.find_modules_directly_imported_by(m) if t.startswith("llm_fsm")) for m in modules
    }
    assert not _cycles(edges), f"import cycles: {_cycles(edges)}"


def _cycles(edges: dict[str, list[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(edges)))

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges.get(module, []):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    try:
        for module in edges:
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
