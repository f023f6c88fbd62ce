"""Keys set on every path into each state: a must-analysis over the declared graph (FSM067).

An approved text is said only when all its placeholders fill, so a placeholder must name a key that is set whenever
the text is said. Once set, a key stays set within its flow (the model cannot erase a value: empty values are
ignored, refused ones are not stored), so a key is set in a state when, on every way into it, the application
provides it or a condition on the way required it. That is a greatest fixed point over the graph's edges (declared
transitions and actions' and retrievals' ``on_error`` moves), cheap enough for every lint run: no prover needed.

Not followed: an operator's ``force_state`` or a ``null`` the application writes (both outside the conversation), a
sub-flow's inputs (a sub-flow linted alone starts with what its application provides), and action outputs (an
action may not run, or fail).
"""

from __future__ import annotations

from llm_fsm.definition._model import FSMDefinition, Transition


def required_by(transition: Transition) -> frozenset[str]:
    """Keys a transition's conditions require: set whenever it is taken."""
    return frozenset(key for c in transition.conditions or () for key in c.requires_context_keys or ())


def always_set(definition: FSMDefinition) -> dict[str, frozenset[str]]:
    """For each state reachable from the initial one, the keys set whenever a conversation is in it (states absent:
    not reachable by the declared graph)."""
    provided = frozenset(definition.provided_context_keys)
    incoming: dict[str, list[tuple[str, frozenset[str]]]] = {}
    for source, state in definition.states.items():
        for transition in definition.transitions_from(source):  # global transitions lead in from many states
            incoming.setdefault(transition.target_state, []).append((source, required_by(transition)))
        for action in state.actions or ():
            incoming.setdefault(action.on_error, []).append((source, frozenset()))
        retrieve = definition.retrieve_for(source)
        if retrieve is not None:  # a failed retrieval's on_error moves too ("continue" is no state: skipped below)
            incoming.setdefault(retrieve.on_error, []).append((source, frozenset()))
    known: dict[str, frozenset[str]] = {definition.initial_state: provided}
    changed = True
    while changed:  # every value only shrinks, or appears once: this ends
        changed = False
        for target, edges in incoming.items():
            if target not in definition.states:
                continue
            ways = [known[source] | added for source, added in edges if source in known]
            if not ways:
                continue
            value = frozenset.intersection(*ways)
            if target == definition.initial_state:
                value &= provided  # the conversation starts there too, with only what the application gives
            if known.get(target) != value:
                known[target] = value
                changed = True
    return known
