"""Plain text: one block per state, its transitions indented below it.

For terminals and reviews of a diff. Control characters in names and labels are
shown escaped (``\\n``) so one state always takes one line. A confirmation step
is marked on its state's line; the sub-flows a state may start are listed
under it (``=> flow``), the definition-wide ones at the end; its actions
follow (``⚙ lookup_order (collected, on error → support)``). With the prover's statuses (``--prove``) a line
under the name gives each property's, and each state's line is marked ``✓ proved`` or with what failed or is
unknown there (``✗ failed: progress``). Global transitions are listed once, at the end, with where they apply.
"""

from __future__ import annotations

from llm_fsm.definition._graph import Graph
from llm_fsm.renderers._extras import NO_EXTRAS, Extras, FlowLink
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


def _flow_line(flow: FlowLink) -> str:
    return f"=> {clean(flow.label())}" + (f"  ({clean(flow.description)})" if flow.description else "")


def render(graph: Graph, extras: Extras | None = None) -> str:
    extras = extras or NO_EXTRAS
    lines = [clean(graph.name or "(unnamed FSM)"), f"initial: {clean(graph.initial or '(none)')}", ""]
    if extras.proof is not None:
        lines.insert(2, clean(extras.proof.summary()))
    for node in graph.nodes.values():
        confirmation = extras.confirmations.get(node.id) if node.declared else None
        proved = extras.proof.states.get(node.id) if extras.proof is not None and node.declared else None
        marks = [
            m
            for m, on in (
                ("initial", node.initial),
                ("terminal", node.terminal and node.declared),
                ("undeclared", not node.declared),
                (clean(confirmation.summary()) if confirmation else "", confirmation is not None),
                (clean(proved.summary()) if proved else "", proved is not None),
            )
            if on
        ]
        lines.append(clean(node.id) + (f"  [{', '.join(marks)}]" if marks else ""))
        for edge in graph.edges_from(node.id):
            lines.append(f"  -> {clean(edge.target)}  ({'; '.join(clean(x) for x in edge_label_lines(edge))})")
        for flow in extras.flows_from(node.id):
            lines.append("  " + _flow_line(flow))
        if node.declared:
            lines.extend("  " + clean(action.summary()) for action in extras.actions.get(node.id, ()))
    if graph.global_edges:
        lines += ["", "global transitions:"]
        lines += [
            f"  -> {clean(edge.target)}  ({'; '.join(clean(x) for x in [edge.scope, *edge_label_lines(edge)])})"
            for edge in graph.global_edges
        ]
    anywhere = [flow for flow in extras.flows if flow.from_any_state]
    if anywhere:
        lines += ["", "from any state:"]
        lines += ["  " + _flow_line(flow) for flow in anywhere]
    return "\n".join(lines) + "\n"
