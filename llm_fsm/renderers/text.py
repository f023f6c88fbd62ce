"""Plain text: one block per state, its transitions indented below it.

For terminals and reviews of a diff. Control characters in names and labels are
shown escaped (``\\n``) so one state always takes one line.
"""

from __future__ import annotations

from llm_fsm.definition._graph import Graph
from llm_fsm.renderers._labels import edge_label_lines


def clean(text: str) -> str:
    """One printable line: control characters shown as escapes."""
    out = []
    for char in text:
        if char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 32 or ord(char) == 127:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "".join(out)


def render(graph: Graph) -> str:
    lines = [clean(graph.name or "(unnamed FSM)"), f"initial: {clean(graph.initial or '(none)')}", ""]
    for node in graph.nodes.values():
        marks = [
            m
            for m, on in (
                ("initial", node.initial),
                ("terminal", node.terminal and node.declared),
                ("undeclared", not node.declared),
            )
            if on
        ]
        lines.append(clean(node.id) + (f"  [{', '.join(marks)}]" if marks else ""))
        for edge in graph.edges_from(node.id):
            lines.append(f"  -> {clean(edge.target)}  ({'; '.join(clean(x) for x in edge_label_lines(edge))})")
    return "\n".join(lines) + "\n"
