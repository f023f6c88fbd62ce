"""fsm-lint finds nothing to say about the examples.

The examples are the format's showcase, so they must be clean under the same
linter authors run. The seed's own Customer Support Router, kept verbatim as
test data (tests/data/seed/), reads three keys the application is expected to
pass in ``initial_context`` without declaring them, and the linter says so as
warnings; definitions/ has the router that looks them up by an action instead.
That expectation is pinned here so a change in either the file or the linter
is noticed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llm_fsm.definition._documents import parse_text
from llm_fsm.lint._linter import lint_document
from llm_fsm.scripting._files import is_mcp_config_file

DEFINITIONS_DIR = Path(__file__).resolve().parents[1] / "definitions"
SEED_ROUTER = Path(__file__).resolve().parent / "data" / "seed" / "customer_support_router.json"

EXAMPLES = sorted(
    path
    for pattern in ("*.json", "*.yaml", "*.yml")
    for path in DEFINITIONS_DIR.rglob(pattern)
    if not path.name.endswith(".conv.yaml") and not is_mcp_config_file(path)  # mcp/mcp.json: the servers it calls
)


def _findings(path: Path) -> list[tuple[str, str, str]]:
    result = lint_document(parse_text(path.read_bytes(), file=path.name))
    return [(d.code, d.severity.value, d.message) for d in result.diagnostics]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.relative_to(DEFINITIONS_DIR).as_posix())
def test_example_lints_without_any_finding(path: Path) -> None:
    assert _findings(path) == []


def test_seed_router_has_no_errors_only_warnings_about_keys_the_application_must_supply() -> None:
    findings = _findings(SEED_ROUTER)
    assert {(code, severity) for code, severity, _ in findings} == {("FSM014", "warning")}
    keys = sorted(message.split("'")[1] for _, _, message in findings)
    assert keys == ["customer.lifetime_value", "customer.tier", "issue.category"]
