"""Handing a conversation to a person: the one function every route to a handoff calls.

A conversation is handed off by an operator (``FSMManager.hand_off``), by reaching a state declared
``handoff: true`` (the turn), or by application code acting on an instance (an action's result). All
of them end here, so the instance says the same thing whoever handed off: ``mode`` is ``"human"``,
``handoff`` records who, why, when and from where, and the trace has a ``handoff`` event.

A module of its own, importing nothing of the turn, so the turn (``_turn``), the operator changes
(``_operator``) and actions can all call it without importing one another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_fsm.engine._data import now
from llm_fsm.engine._instance import FSMInstance, Handoff
from llm_fsm.errors import ConversationEndedError, HandoffError, OperatorError

if TYPE_CHECKING:
    from llm_fsm.definition._model import FSMDefinition
    from llm_fsm.engine._turn import EngineConfig

DEFINITION_ACTOR = "definition"
"""The actor of a handoff that a state declared ``handoff: true`` made."""


def conversation_ended(instance: FSMInstance, then: str = "") -> ConversationEndedError:
    """The error for a change to a conversation that is over, saying once how it ended ("has ended (ended)" read
    twice). ``then`` adds what follows, for the one who tried."""
    how = "was cancelled" if instance.status == "cancelled" else "has ended"
    return ConversationEndedError(f"conversation {instance.conversation_id} {how}{then}")


def _give(instance: FSMInstance, reason: str, actor: str, config: EngineConfig) -> None:
    instance.mode = "human"
    instance.timers = []  # a person has it: nothing fires while they do (resume_bot arms the state's anew)
    instance.pending_cancel = False  # the person, not a yes/no from the user, decides now
    instance.handoff = Handoff(reason=reason, actor=actor, since=now(), from_state=instance.current_state)
    instance.add_trace(
        "handoff", {"actor": actor, "reason": reason, "state": instance.current_state}, config.max_trace_events
    )
    instance.updated_at = now()


def hand_off(instance: FSMInstance, reason: str, actor: str, config: EngineConfig) -> None:
    """Give the conversation to a person: from now on turns record the user's messages and call no model.

    Needs no definition and does no I/O, so an action's result (or any code holding an instance) can call
    it. Refused: no actor, an ended conversation, a conversation a person already has.
    """
    if not isinstance(actor, str) or not actor.strip():
        raise OperatorError("a handoff needs an actor: who is handing off (a name, a service, a key)")
    if instance.ended:
        raise conversation_ended(instance)
    if instance.mode == "human" and instance.handoff is not None:
        raise HandoffError(
            f"conversation {instance.conversation_id} is already with a person "
            f"(handed off by {instance.handoff.actor}: {instance.handoff.reason})"
        )
    _give(instance, reason, actor, config)


def hand_off_declared(definition: FSMDefinition, instance: FSMInstance, config: EngineConfig) -> bool:
    """Hand off when the conversation's state is declared ``handoff: true`` and the bot has it; True if it did."""
    state = definition.states.get(instance.current_state)
    if state is None or not state.handoff or instance.mode != "bot" or instance.ended:
        return False
    _give(instance, f"state {state.id!r} hands off", DEFINITION_ACTOR, config)
    return True


__all__ = ["DEFINITION_ACTOR", "hand_off", "hand_off_declared"]
