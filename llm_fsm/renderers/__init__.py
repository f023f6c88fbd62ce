"""Diagram renderers: one module per output format, all reading the neutral ``llm_fsm.definition.Graph``.

Each renderer is a function ``render(graph, extras=None) -> str``; ``RENDERERS``
maps the format names the CLI accepts to them. ``extras`` (``_extras.Extras``,
read from the same document) adds declared sub-flows and confirmation steps, and ``Proof`` the prover's
statuses per state (``llm-fsm graph --prove``).
"""

from __future__ import annotations

from collections.abc import Callable

from llm_fsm.definition._graph import Graph
from llm_fsm.renderers import dot, mermaid, text
from llm_fsm.renderers._extras import Extras, Proof, ProofMark, extras_from_definition, extras_from_document
from llm_fsm.renderers._labels import edge_label_lines

RENDERERS: dict[str, Callable[[Graph, Extras | None], str]] = {
    "mermaid": mermaid.render,
    "dot": dot.render,
    "text": text.render,
}


def render(graph: Graph, fmt: str, extras: Extras | None = None) -> str:
    """Render ``graph`` in ``fmt`` (one of ``RENDERERS``), with its sub-flows and confirmation steps when given."""
    return RENDERERS[fmt](graph, extras)


__all__ = [
    "RENDERERS",
    "Extras",
    "Proof",
    "ProofMark",
    "edge_label_lines",
    "extras_from_definition",
    "extras_from_document",
    "render",
]
