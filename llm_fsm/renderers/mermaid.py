"""Mermaid ``stateDiagram-v2``.

States get generated ids (``s0``, ``s1``…) and their names as labels, so no
state name can break the syntax; label text is written with Mermaid entity
codes (``#quot;``, ``#58;``…) for every character Mermaid gives a meaning to.
``[*] --> s`` marks the initial state, ``s --> [*]`` each terminal state.
A confirmation step gets the ``confirmation`` class and a note saying where
yes and no go; a state with actions, a note on its left listing them; each
declared sub-flow is a state ``f0``… of class ``subflow``, entered with
``start_flow`` from the states that declare it (a ``call`` flow ``returns``
to them); a definition-wide flow says "from any state". A global transition is drawn once: a state ``g0``… of
class ``global`` saying where it applies ("from any state except pay"), with one edge to its target. With the
prover's statuses (``--prove``) each state gets the class ``proof_failed`` (red), ``proof_unknown`` or
``proof_proved``, a failed or unknown one its properties under its name, and a comment line gives each
property's status.
"""

from __future__ import annotations

import json

from llm_fsm.definition._graph import Graph
from llm_fsm.renderers._extras import NO_EXTRAS, Extras
from llm_fsm.renderers._labels import edge_label_lines

_ENTITIES = {
    '"': "#quot;",
    "#": "#35;",
    ";": "#59;",
    ":": "#58;",
    "<": "#lt;",
    ">": "#gt;",
    "&": "#amp;",
    "{": "#123;",
    "}": "#125;",
    "[": "#91;",
    "]": "#93;",
    "(": "#40;",
    ")": "#41;",
    "%": "#37;",
    "`": "#96;",
    "|": "#124;",
    "\\": "#92;",
    "-": "#45;",
}


def escape(text: str) -> str:
    """Label text safe inside ``state "…"`` and after ``:`` on a transition (one line)."""
    out = []
    for char in " ".join(text.split()):
        if char in _ENTITIES:
            out.append(_ENTITIES[char])
        elif ord(char) < 32 or ord(char) == 127:
            out.append(" ")
        else:
            out.append(char)
    return "".join(out)


def render(graph: Graph, extras: Extras | None = None) -> str:
    extras = extras or NO_EXTRAS
    ids = {node: f"s{i}" for i, node in enumerate(graph.nodes)}
    lines = []
    if graph.name:
        lines += ["---", f"title: {json.dumps(' '.join(graph.name.split()))}", "---"]
    lines.append("stateDiagram-v2")
    proof = extras.proof.states if extras.proof is not None else {}
    if extras.proof is not None:
        lines.append(f"    %% {extras.proof.summary()}")
    for node in graph.nodes.values():
        label = escape(node.id if node.declared else f"{node.id} (undeclared)")
        proved = proof.get(node.id) if node.declared else None
        if proved is not None and proved.status != "proved":
            label += "<br/>" + escape(proved.summary())
        lines.append(f'    state "{label}" as {ids[node.id]}')
    flow_ids = {flow.index: f"f{flow.index}" for flow in extras.flows}
    for flow in extras.flows:
        label = flow.label() + (" from any state" if flow.from_any_state else "")
        lines.append(f'    state "{escape(label)}" as {flow_ids[flow.index]}')
    for global_edge in graph.global_edges:
        lines.append(f'    state "{escape("global: " + global_edge.scope)}" as g{global_edge.index}')
    if graph.initial in ids:
        lines.append(f"    [*] --> {ids[graph.initial]}")
    for edge in graph.edges:
        label = "<br/>".join(escape(line) for line in edge_label_lines(edge))
        lines.append(f"    {ids[edge.source]} --> {ids[edge.target]} : {label}")
    for global_edge in graph.global_edges:
        label = "<br/>".join(escape(line) for line in edge_label_lines(global_edge))
        lines.append(f"    g{global_edge.index} --> {ids[global_edge.target]} : {label}")
    for flow in extras.flows:
        for source in flow.sources:
            if source not in ids:
                continue
            lines.append(f"    {ids[source]} --> {flow_ids[flow.index]} : start_flow")
            if flow.mode == "call":
                lines.append(f"    {flow_ids[flow.index]} --> {ids[source]} : returns")
    for node in graph.nodes.values():
        if node.terminal and node.declared:
            lines.append(f"    {ids[node.id]} --> [*]")
    for state, mark in extras.confirmations.items():
        if state in ids:
            lines.append(f"    note right of {ids[state]} : {escape(mark.summary())}")
    for state, actions in extras.actions.items():
        if state in ids:
            lines.append(f"    note left of {ids[state]} : {'<br/>'.join(escape(a.summary()) for a in actions)}")
    lines.append("    classDef initial stroke-width:3px")
    lines.append("    classDef terminal stroke-width:3px,stroke-dasharray:0")
    lines.append("    classDef undeclared stroke-dasharray:5 5,color:#b00")
    if extras.confirmations:
        lines.append("    classDef confirmation stroke:#06c,stroke-width:3px")
    if graph.global_edges:
        lines.append("    classDef global stroke-dasharray:2 2,fill:#f7f7f7")
    if extras.flows:
        lines.append("    classDef subflow stroke-dasharray:3 3,fill:#f4f4ff")
    if extras.proof is not None:
        lines.append("    classDef proof_failed fill:#fdd,stroke:#c00,color:#900")
        lines.append("    classDef proof_unknown fill:#fff3cd,stroke:#b80")
        lines.append("    classDef proof_proved fill:#e6f4ea,stroke:#080")
    for cls, members in (
        ("initial", [ids[n.id] for n in graph.nodes.values() if n.initial]),
        ("terminal", [ids[n.id] for n in graph.nodes.values() if n.terminal and n.declared]),
        ("undeclared", [ids[n.id] for n in graph.nodes.values() if not n.declared]),
        ("confirmation", [ids[state] for state in extras.confirmations if state in ids]),
        ("subflow", list(flow_ids.values())),
        ("global", [f"g{global_edge.index}" for global_edge in graph.global_edges]),
        *(
            (f"proof_{status}", [ids[state] for state, mark in proof.items() if state in ids and mark.status == status])
            for status in ("failed", "unknown", "proved")
        ),
    ):
        if members:
            lines.append(f"    class {','.join(members)} {cls}")
    return "\n".join(lines) + "\n"
