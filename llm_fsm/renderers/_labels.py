"""What every format writes on an edge, so the three diagrams always say the same thing."""

from __future__ import annotations

from llm_fsm.definition._graph import Edge, GlobalEdge


def edge_label_lines(edge: Edge | GlobalEdge) -> list[str]:
    """What the transition is for, when it fires (its conditions) and its priority."""
    lines = [" ".join(edge.description.split())] if edge.description.strip() else []
    if edge.conditions:
        lines.append("when " + " and ".join(edge.conditions))
    lines.append(f"priority {edge.priority}")
    return lines
