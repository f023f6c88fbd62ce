"""Diagnostics with stable codes: one document's schema, graph and conditions, sub-flows across files, and a
migrations block against the previous version.

The loader refuses a definition only for the findings marked ``blocks_loading``; the rest are fsm-lint's business.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_fsm._lazy import lazy_exports
from llm_fsm.lint._checks_migrations import lint_migrations
from llm_fsm.lint._flows import lint_flows
from llm_fsm.lint._linter import lint_data, lint_definition, lint_document
from llm_fsm.lint._rules import (
    RULES,
    RULES_BY_CODE,
    Diagnostic,
    LintResult,
    Rule,
    Severity,
)

if TYPE_CHECKING:
    from llm_fsm.lint.proof import (
        PROPERTIES,
        ProofFinding,
        ProofReport,
        ProofStep,
        PropertyResult,
        prove,
        write_counterexamples,
    )

#: the prover runs the engine's turn, so it is imported when first asked for: plain lint (and a cold
#: ``fsm-lint``) loads none of the engine's turn modules
_PROOF = ("PROPERTIES", "ProofFinding", "ProofReport", "ProofStep", "PropertyResult", "prove", "write_counterexamples")

__all__ = [
    "PROPERTIES",
    "Diagnostic",
    "ProofFinding",
    "ProofReport",
    "ProofStep",
    "PropertyResult",
    "LintResult",
    "RULES",
    "RULES_BY_CODE",
    "Rule",
    "Severity",
    "lint_data",
    "lint_definition",
    "lint_document",
    "lint_flows",
    "lint_migrations",
    "prove",
    "write_counterexamples",
]

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(_PROOF, "llm_fsm.lint.proof"), globals())
