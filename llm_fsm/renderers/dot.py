"""Graphviz DOT.

Nodes get generated ids (``s0``…) with the state name as a quoted label; inside
quoted strings backslashes and quotes are escaped and line breaks become
``\\n``. The initial state is entered from a point; terminal states are drawn
with a double border; undeclared targets dashed and red.
"""

from __future__ import annotations

from llm_fsm.definition._graph import Graph
from llm_fsm.renderers._labels import edge_label_lines


def quote(text: str) -> str:
    """A DOT double-quoted string; escape sequences like ``\\N`` cannot be smuggled in."""
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif char == "\n":
            out.append("\\n")
        elif ord(char) < 32 or ord(char) == 127:
            out.append(" ")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def render(graph: Graph) -> str:
    ids = {node: f"s{i}" for i, node in enumerate(graph.nodes)}
    lines = [
        f"digraph {quote(graph.name or 'fsm')} {{",
        "    rankdir=LR;",
        '    node [shape=box, style=rounded, fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    for node in graph.nodes.values():
        attrs = [f"label={quote(node.id if node.declared else node.id + chr(10) + '(undeclared)')}"]
        if node.initial:
            attrs.append("penwidth=2")
        if node.terminal and node.declared:
            attrs.append("peripheries=2")
        if not node.declared:
            attrs.append('style="rounded,dashed", color=red')
        lines.append(f"    {ids[node.id]} [{', '.join(attrs)}];")
    if graph.initial in ids:
        lines.append('    __start [shape=point, label=""];')
        lines.append(f"    __start -> {ids[graph.initial]};")
    for edge in graph.edges:
        label = quote("\n".join(" ".join(line.split()) for line in edge_label_lines(edge)))
        lines.append(f"    {ids[edge.source]} -> {ids[edge.target]} [label={label}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
