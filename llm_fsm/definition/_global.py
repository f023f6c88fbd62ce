"""A definition's global transitions, read per state: the mixin that gives ``FSMDefinition`` its
``transitions_from`` and the lookups around it.

Its own module so the definition model stays a list of fields; the rule of where a global transition applies is
``_graph.global_applies`` (shared with raw documents). The model's fields it reads are declared for the type
checker only: ``FSMDefinition`` has them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from llm_fsm.definition._graph import global_applies

if TYPE_CHECKING:
    from llm_fsm.definition._model import GlobalTransition, State, StateGroup, Transition


class GlobalTransitions:
    """Mixin of ``FSMDefinition`` (no fields of its own)."""

    if TYPE_CHECKING:
        states: dict[str, State]
        global_transitions: list[GlobalTransition] | None
        state_groups: dict[str, StateGroup] | None

        def get_state(self, state_id: str) -> State: ...

    def transitions_from(self, state_id: str) -> list[Transition]:
        """The transitions a conversation in ``state_id`` may take: the state's own, then the global ones that
        apply to it (``GlobalTransition``). Every reader of transitions (engine, lint, prover, graph, explain,
        coverage) goes through here, so a transition index means the same everywhere."""
        state = self.get_state(state_id)
        if not self.global_transitions:
            return state.transitions
        return self.effective_transitions[state_id]

    def applies_in(self, transition: GlobalTransition, state_id: str) -> bool:
        """Whether a global transition is a candidate in ``state_id`` (the rule: ``_graph.global_applies``)."""
        state = self.states.get(state_id)
        return state is not None and global_applies(
            state_id,
            terminal=state.is_terminal,
            target=transition.target_state,
            from_states=transition.from_states,
            from_groups=transition.from_groups,
            except_states=transition.except_states,
            groups=self.group_members,
        )

    @functools.cached_property
    def group_members(self) -> dict[str, set[str]]:
        """The states of each declared group, as sets."""
        return {name: set(group.states) for name, group in (self.state_groups or {}).items()}

    @functools.cached_property
    def effective_transitions(self) -> dict[str, list[Transition]]:
        """``transitions_from`` of every state, computed once (definitions are not edited in place)."""
        return {
            state_id: [
                *state.transitions,
                *(g for g in self.global_transitions or () if self.applies_in(g, state_id)),
            ]
            for state_id, state in self.states.items()
        }

    def global_index(self, state_id: str, index: int) -> int | None:
        """The position in ``global_transitions`` of the transition at ``index`` of ``transitions_from(state_id)``,
        or None when it is the state's own (or no transition)."""
        own = len(self.get_state(state_id).transitions)
        effective = self.transitions_from(state_id)
        if index < own or index >= len(effective):
            return None
        taken = effective[index]
        return next(i for i, g in enumerate(self.global_transitions or ()) if g is taken)

    def transition_path(self, state_id: str, index: int) -> tuple[str | int, ...]:
        """Where the transition at ``index`` of ``transitions_from(state_id)`` is declared, as a JSON path's parts."""
        position = self.global_index(state_id, index)
        if position is None:
            return ("states", state_id, "transitions", index)
        return ("global_transitions", position)


__all__ = ["GlobalTransitions"]
