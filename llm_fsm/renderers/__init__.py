"""Diagram renderers: one module per output format, all reading the neutral ``llm_fsm.definition.Graph``.

Each renderer is a function ``render(graph) -> str``; ``RENDERERS`` maps the
format names the CLI accepts to them.
"""

from __future__ import annotations

from collections.abc import Callable

from llm_fsm.definition._graph import Graph
from llm_fsm.renderers import dot, mermaid, text
from llm_fsm.renderers._labels import edge_label_lines

RENDERERS: dict[str, Callable[[Graph], str]] = {
    "mermaid": mermaid.render,
    "dot": dot.render,
    "text": text.render,
}


def render(graph: Graph, fmt: str) -> str:
    """Render ``graph`` in ``fmt`` (one of ``RENDERERS``)."""
    return RENDERERS[fmt](graph)


__all__ = ["RENDERERS", "edge_label_lines", "render"]
