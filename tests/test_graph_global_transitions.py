"""Diagrams draw a global transition once (not once per state it applies in), and say where it applies; the
graph's walks see it from every state it applies in."""

from __future__ import annotations

import copy
from typing import Any

from llm_fsm.definition._graph import graph_from_document, reachable_from
from llm_fsm.renderers import dot, mermaid, text


def state(sid: str, *targets: str) -> dict[str, Any]:
    transitions = [{"target_state": t, "description": f"to {t}"} for t in targets]
    return {"id": sid, "description": sid, "purpose": sid, "transitions": transitions}


DOC: dict[str, Any] = {
    "name": "shop",
    "description": "d",
    "initial_state": "browse",
    "states": {
        "browse": state("browse", "cart"),
        "cart": state("cart", "pay"),
        "pay": state("pay", "done"),
        "person": state("person", "done"),
        "done": state("done"),
    },
    "global_transitions": [
        {"target_state": "person", "description": "talk to a person", "except_states": ["pay"], "priority": 5}
    ],
}


def test_the_graph_holds_a_global_transition_once_with_the_states_it_applies_in() -> None:
    graph = graph_from_document(DOC)
    [edge] = graph.global_edges
    assert (edge.target, edge.sources, edge.scope) == ("person", ("browse", "cart"), "from any state except pay")
    assert all(e.target != "person" for e in graph.edges)


def test_walks_follow_a_global_transition_from_every_state_it_applies_in() -> None:
    graph = graph_from_document(DOC)
    assert "person" in graph.successors["cart"] and "person" not in graph.successors["pay"]
    assert "person" in set(reachable_from(graph, "browse"))


def test_mermaid_draws_a_global_transition_once() -> None:
    drawn = mermaid.render(graph_from_document(DOC))
    assert 'state "global#58; from any state except pay" as g0' in drawn
    assert [line.strip() for line in drawn.splitlines() if "--> s3 :" in line] == [
        "g0 --> s3 : talk to a person<br/>priority 5"
    ]


def test_dot_draws_a_global_transition_once() -> None:
    drawn = dot.render(graph_from_document(DOC))
    assert 'g0 [label="global transition\\nfrom any state except pay", shape=note, style=dashed];' in drawn
    assert sum(1 for line in drawn.splitlines() if "-> s3 " in line) == 1


def test_text_lists_global_transitions_once_at_the_end() -> None:
    drawn = text.render(graph_from_document(DOC))
    assert drawn.endswith(
        "global transitions:\n  -> person  (from any state except pay; talk to a person; priority 5)\n"
    )
    assert drawn.count("-> person") == 1


def test_a_scope_of_states_and_groups_is_said_in_words() -> None:
    data = copy.deepcopy(DOC)
    data["state_groups"] = {"checkout": {"states": ["pay"]}}
    data["global_transitions"][0] = {
        "target_state": "person",
        "description": "x",
        "from_states": ["browse"],
        "from_groups": ["checkout"],
    }
    [edge] = graph_from_document(data).global_edges
    assert (edge.scope, edge.sources) == ("from browse, group checkout", ("browse", "pay"))
