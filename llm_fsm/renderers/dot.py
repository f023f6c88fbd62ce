"""Graphviz DOT.

Nodes get generated ids (``s0``…) with the state name as a quoted label; inside
quoted strings backslashes and quotes are escaped and line breaks become
``\\n``. The initial state is entered from a point; terminal states are drawn
with a double border; undeclared targets dashed and red. A confirmation step
is drawn bold and blue with where yes and no go under its name, and a state's
actions are listed under its name (``⚙ lookup_order (collected)``); each declared
sub-flow is a dashed ``f0``… node entered by a dashed ``start_flow`` edge from
the states that declare it (a ``call`` flow ``returns`` by a dotted edge). With the prover's statuses
(``--prove``) each state is filled red (a property failed there), amber (unknown) or green (proved), its
statuses under its name, and the graph's label gives each property's. A global transition is drawn once: a
dashed note ``g0``… saying where it applies, with one dashed edge to its target.
"""

from __future__ import annotations

from llm_fsm.definition._graph import Graph
from llm_fsm.renderers._extras import NO_EXTRAS, Extras
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


_FILL = {"failed": "#ffdddd", "unknown": "#fff3cd", "proved": "#e6f4ea"}
"""A state's fill under the prover's statuses: red where a property failed, amber where one is unknown."""


def render(graph: Graph, extras: Extras | None = None) -> str:
    extras = extras or NO_EXTRAS
    ids = {node: f"s{i}" for i, node in enumerate(graph.nodes)}
    lines = [
        f"digraph {quote(graph.name or 'fsm')} {{",
        "    rankdir=LR;",
        '    node [shape=box, style=rounded, fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    for node in graph.nodes.values():
        label = node.id if node.declared else node.id + "\n(undeclared)"
        confirmation = extras.confirmations.get(node.id)
        if confirmation is not None and node.declared:
            label += "\n" + confirmation.summary()
        if node.declared:
            label += "".join("\n" + action.summary() for action in extras.actions.get(node.id, ()))
        mark = extras.proof.states.get(node.id) if extras.proof is not None and node.declared else None
        if mark is not None:
            label += "\n" + mark.summary()
        attrs = [f"label={quote(label)}"]
        if node.initial:
            attrs.append("penwidth=2")
        if node.terminal and node.declared:
            attrs.append("peripheries=2")
        style, colors = ["rounded"], []
        if not node.declared:
            style, colors = [*style, "dashed"], ["color=red"]
        elif confirmation is not None:
            style, colors = [*style, "bold"], ["color=blue"]
        if mark is not None:
            style.append("filled")
            colors = colors or (["color=red"] if mark.status == "failed" else [])
            colors.append(f"fillcolor={quote(_FILL[mark.status])}")
        if len(style) > 1:
            attrs += [f'style="{",".join(style)}"', *colors]
        lines.append(f"    {ids[node.id]} [{', '.join(attrs)}];")
    for flow in extras.flows:
        label = f"flow {flow.name} ({flow.mode})\n{flow.definition}" + (
            "\nfrom any state" if flow.from_any_state else ""
        )
        lines.append(f"    f{flow.index} [label={quote(label)}, shape=component, style=dashed];")
    for global_edge in graph.global_edges:  # drawn once, not once per state it applies in
        label = quote("global transition\n" + global_edge.scope)
        lines.append(f"    g{global_edge.index} [label={label}, shape=note, style=dashed];")
    if graph.initial in ids:
        lines.append('    __start [shape=point, label=""];')
        lines.append(f"    __start -> {ids[graph.initial]};")
    for edge in graph.edges:
        label = quote("\n".join(" ".join(line.split()) for line in edge_label_lines(edge)))
        lines.append(f"    {ids[edge.source]} -> {ids[edge.target]} [label={label}];")
    for global_edge in graph.global_edges:
        label = quote("\n".join(" ".join(line.split()) for line in edge_label_lines(global_edge)))
        lines.append(f"    g{global_edge.index} -> {ids[global_edge.target]} [label={label}, style=dashed];")
    for flow in extras.flows:
        for source in flow.sources:
            if source not in ids:
                continue
            lines.append(f'    {ids[source]} -> f{flow.index} [label="start_flow", style=dashed];')
            if flow.mode == "call":
                lines.append(f'    f{flow.index} -> {ids[source]} [label="returns", style=dotted];')
    if extras.proof is not None:
        lines.append(f"    label={quote(extras.proof.summary())};")
        lines.append("    labelloc=t;")
    lines.append("}")
    return "\n".join(lines) + "\n"
