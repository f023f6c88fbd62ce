"""The prover (``fsm-lint --prove``): a model checker over a finite abstraction of a definition, whose every step
is a turn of the engine itself (docs/prove.md).

``_cells`` abstracts the data, ``_moves`` chooses the replies, ``_drive`` runs the engine on them, ``_explore``
walks the configurations, ``_properties`` judges them, ``_report`` says what was found and writes counterexamples.
"""

from __future__ import annotations

from llm_fsm.lint.proof._prove import DEFAULT_MAX_CONFIGURATIONS, prove
from llm_fsm.lint.proof._report import (
    CODES,
    PROPERTIES,
    ProofFinding,
    ProofReport,
    ProofStep,
    PropertyResult,
    write_counterexamples,
)

__all__ = [
    "CODES",
    "DEFAULT_MAX_CONFIGURATIONS",
    "PROPERTIES",
    "ProofFinding",
    "ProofReport",
    "ProofStep",
    "PropertyResult",
    "prove",
    "write_counterexamples",
]
