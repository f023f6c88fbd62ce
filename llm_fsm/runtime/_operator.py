"""The operator API of ``FSMManager``: force a state, start or finish a sub-flow, write context, hand a
conversation to a person and back, and the seed's ``instances[...]`` view.

A class of its own rather than more of ``_manager.py``, which runs turns: these are changes made from
outside a turn. They share the runtime's machinery (the per-conversation lock, the drivers, the one
compare-and-set loop of ``_operations.py``) but none of the turn's, so they read better on their own;
``FSMManager`` inherits them. The rules themselves (what is refused, what is recorded) are pure functions in
``llm_fsm.engine._operator``; this module only loads, calls and saves.

Every method has an async twin (``a`` + name), takes ``actor`` (who is acting, recorded in the trace
with the reason) and ``user_id`` / ``room_id`` like every other call on a conversation.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any, TypeVar

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine import _operator as ops
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._turn import LoadDefinition, LoadFlow
from llm_fsm.errors import ConversationNotFoundError, InvalidMessageError, OperatorError
from llm_fsm.runtime._effects import LoadActiveDefinition, LoadConversation
from llm_fsm.runtime._operations import Unchanged, compare_and_set
from llm_fsm.runtime._readers import ReadersAPI

_R = TypeVar("_R")

Change = Callable[[FSMInstance], Generator[Any, Any, _R]]
"""An operator change: a generator on the loaded instance that may yield ``LoadDefinition`` / ``LoadFlow``."""

APPLICATION_ACTOR = "application"
"""The actor of a state set through ``instances[...]``, the seed's way."""


def _operator_key(message_id: str | None) -> str | None:
    """Where an operator message's id is remembered among the processed ids: apart from the users' ids, because
    the desk and the user's channel number their messages independently ("42" on each side are two messages,
    and a user's "42" taken for a retry would be dropped unanswered)."""
    return None if message_id is None else f"operator:{message_id}"


class OperatorAPI(ReadersAPI):
    """The operator methods ``FSMManager`` inherits (see the module docstring)."""

    # --- the machinery --------------------------------------------------------------------

    def _operate(
        self,
        conversation_id: str,
        user_id: str | None,
        room_id: str | None,
        change: Change[Any],
        message_id: str | None = None,
    ) -> Any:
        load = LoadConversation(conversation_id, user_id, room_id, message_id)
        return self._run(compare_and_set(self.max_save_retries, load, change), lock=conversation_id)

    async def _aoperate(
        self,
        conversation_id: str,
        user_id: str | None,
        room_id: str | None,
        change: Change[Any],
        message_id: str | None = None,
    ) -> Any:
        load = LoadConversation(conversation_id, user_id, room_id, message_id)
        return await self._arun(compare_and_set(self.max_save_retries, load, change), lock=conversation_id)

    def _active_definition(self, instance: FSMInstance) -> Generator[Any, Any, FSMDefinition]:
        definition: FSMDefinition = yield LoadActiveDefinition(instance)
        return definition

    # --- the changes ------------------------------------------------------------------------

    def _force(self, state: str, reason: str, actor: str) -> Change[None]:
        def change(instance: FSMInstance) -> Generator[Any, Any, None]:
            definition = yield from self._active_definition(instance)
            ops.force_state(definition, instance, state, reason, actor, self.config)

        return change

    def _push(self, flow: str, inputs: Mapping[str, Any] | None, actor: str, reason: str | None) -> Change[None]:
        def change(instance: FSMInstance) -> Generator[Any, Any, None]:
            definition = yield from self._active_definition(instance)
            declaration = ops.find_flow(definition, instance.current_state, flow)
            ops.check(instance, actor)  # before loading the sub-flow's file
            child_id, child = yield LoadFlow(declaration, definition)
            ops.push_flow(definition, instance, declaration, child, child_id, inputs, actor, reason, self.config)

        return change

    def _pop(self, outputs: Mapping[str, Any] | None, actor: str, reason: str | None) -> Change[None]:
        def change(instance: FSMInstance) -> Generator[Any, Any, None]:
            child = yield from self._active_definition(instance)
            ops.check(instance, actor)
            parent = child
            if instance.flow_stack:
                frame = instance.flow_stack[-1]
                parent = yield LoadDefinition(frame.fsm_id, frame.definition_hash)
            ops.pop_flow(child, parent, instance, outputs, actor, reason, self.config)

        return change

    def _set(self, updates: Mapping[str, Any], actor: str, reason: str | None) -> Change[dict[str, Any]]:
        def change(instance: FSMInstance) -> Generator[Any, Any, dict[str, Any]]:
            definition = yield from self._active_definition(instance)
            ops.set_context(definition, instance, updates, actor, reason, self.config)
            return instance.context.data

        return change

    def _handoff(self, reason: str, actor: str) -> Change[None]:
        def change(instance: FSMInstance) -> Generator[Any, Any, None]:
            ops.hand_off(instance, reason, actor, self.config)
            yield from ()

        return change

    def _resume(self, actor: str, state: str | None, reason: str | None) -> Change[None]:
        def change(instance: FSMInstance) -> Generator[Any, Any, None]:
            definition = yield from self._active_definition(instance)
            ops.resume_bot(definition, instance, actor, state, reason, self.config)

        return change

    def _post(self, text: str, actor: str, message_id: str | None) -> Change[Any]:
        if not isinstance(text, str):  # a person's reply is text; images go through the application's channel
            raise InvalidMessageError(f"an operator message is text, not {type(text).__name__}")
        text = self._check_message(text, message_id).text

        key = _operator_key(message_id)

        def change(instance: FSMInstance) -> Generator[Any, Any, Any]:
            if key is not None and key in instance.processed_messages:
                return Unchanged(None)  # a retried delivery: recorded once
            ops.operator_message(instance, text, actor, self.config, message_id=message_id)
            if key is not None:
                instance.processed_messages[key] = ""
                while len(instance.processed_messages) > self.config.max_processed_message_ids:
                    instance.processed_messages.pop(next(iter(instance.processed_messages)))
            yield from ()
            return None

        return change

    # --- the API ---------------------------------------------------------------------------

    def force_state(
        self,
        conversation_id: str,
        state: str,
        reason: str,
        *,
        actor: str,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        """Put the conversation's active flow in ``state``, any state its definition declares.

        Transitions and conditions are not consulted (operators are trusted); a state declared ``handoff``
        hands off, a terminal state of the root flow ends the conversation. Refused: an undeclared state
        (``UnknownStateError``), a terminal state of a sub-flow (finish it with ``pop_flow``), an ended
        conversation (``ConversationEndedError``), no actor (``OperatorError``).
        """
        self._operate(conversation_id, user_id, room_id, self._force(state, reason, actor))

    async def aforce_state(
        self,
        conversation_id: str,
        state: str,
        reason: str,
        *,
        actor: str,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        await self._aoperate(conversation_id, user_id, room_id, self._force(state, reason, actor))

    def push_flow(
        self,
        conversation_id: str,
        flow: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        actor: str,
        reason: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        """Start the sub-flow ``flow`` declared for the current state (or the whole definition).

        Its conditions are not checked; its declared inputs are handed over, then ``inputs`` (the sub-flow's
        keys, checked by its declarations). Refused: a flow not declared there, the depth limit
        (``OperatorFlowError``).
        """
        self._operate(conversation_id, user_id, room_id, self._push(flow, inputs, actor, reason))

    async def apush_flow(
        self,
        conversation_id: str,
        flow: str,
        inputs: Mapping[str, Any] | None = None,
        *,
        actor: str,
        reason: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        await self._aoperate(conversation_id, user_id, room_id, self._push(flow, inputs, actor, reason))

    def pop_flow(
        self,
        conversation_id: str,
        outputs: Mapping[str, Any] | None = None,
        *,
        actor: str,
        reason: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        """Finish the active sub-flow as completed: ``outputs`` (its keys) are written, then the declared output
        mapping hands the parent its values, each checked by the parent's declarations (an invalid one raises
        ``ContextValidationError`` and nothing changes). Refused at the root (``OperatorFlowError``)."""
        self._operate(conversation_id, user_id, room_id, self._pop(outputs, actor, reason))

    async def apop_flow(
        self,
        conversation_id: str,
        outputs: Mapping[str, Any] | None = None,
        *,
        actor: str,
        reason: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        await self._aoperate(conversation_id, user_id, room_id, self._pop(outputs, actor, reason))

    def set_context(
        self,
        conversation_id: str,
        updates: Mapping[str, Any],
        *,
        actor: str,
        reason: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> dict[str, Any]:
        """``update_context`` as an operator: the same rules (protected keys allowed, declared keys checked,
        ``None`` removes), recorded with the actor. Returns the active flow's data."""
        data: dict[str, Any] = self._operate(conversation_id, user_id, room_id, self._set(updates, actor, reason))
        return data

    async def aset_context(
        self,
        conversation_id: str,
        updates: Mapping[str, Any],
        *,
        actor: str,
        reason: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> dict[str, Any]:
        data: dict[str, Any] = await self._aoperate(
            conversation_id, user_id, room_id, self._set(updates, actor, reason)
        )
        return data

    def hand_off(
        self,
        conversation_id: str,
        reason: str,
        *,
        actor: str,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        """Give the conversation to a person. Until ``resume_bot``, ``process_message`` records the user's
        messages, calls no model and returns ``""``; the person answers with ``post_operator_message``."""
        self._operate(conversation_id, user_id, room_id, self._handoff(reason, actor))

    async def ahand_off(
        self,
        conversation_id: str,
        reason: str,
        *,
        actor: str,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        await self._aoperate(conversation_id, user_id, room_id, self._handoff(reason, actor))

    def post_operator_message(
        self,
        conversation_id: str,
        text: str,
        *,
        actor: str,
        message_id: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        """Record the person's reply in the transcript (``{"operator": text}``); only while handed off.

        A repeated ``message_id`` is recorded once. Delivering the text to the user is the application's
        job, as it is for the bot's replies.
        """
        self._operate(conversation_id, user_id, room_id, self._post(text, actor, message_id), _operator_key(message_id))

    async def apost_operator_message(
        self,
        conversation_id: str,
        text: str,
        *,
        actor: str,
        message_id: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        await self._aoperate(
            conversation_id, user_id, room_id, self._post(text, actor, message_id), _operator_key(message_id)
        )

    def resume_bot(
        self,
        conversation_id: str,
        *,
        actor: str,
        state: str | None = None,
        reason: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        """Hand the conversation back to the bot, where it was or in ``state``. The model then sees the
        person's messages in its history as a human agent's. Refused when no person has it (``HandoffError``)."""
        self._operate(conversation_id, user_id, room_id, self._resume(actor, state, reason))

    async def aresume_bot(
        self,
        conversation_id: str,
        *,
        actor: str,
        state: str | None = None,
        reason: str | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> None:
        await self._aoperate(conversation_id, user_id, room_id, self._resume(actor, state, reason))

    @property
    def instances(self) -> InstancesView:
        """The seed's ``fsm_manager.instances[conversation_id]``: a read-only view of every stored conversation.

        ``instances[cid].current_state = "x"`` is ``force_state(cid, "x", actor="application")``.
        """
        return InstancesView(self)


class InstancesView(Mapping[str, "InstanceProxy"]):
    """Conversations by id, read from the store on every access (nothing is cached, so nothing goes stale).

    An operator's view: iteration and ``len`` cover every user's conversations.
    """

    def __init__(self, manager: OperatorAPI) -> None:
        self._manager = manager

    def _owner(self, conversation_id: str) -> tuple[str | None, str | None]:
        try:
            self._manager.store.load(conversation_id)
            return None, None
        except ConversationNotFoundError:
            pass
        for summary in self._manager.list_conversations(all_users=True):
            if summary.conversation_id == conversation_id:
                return summary.user_id, summary.room_id
        raise KeyError(conversation_id)

    def __getitem__(self, conversation_id: str) -> InstanceProxy:
        if not isinstance(conversation_id, str):
            raise KeyError(conversation_id)
        user_id, room_id = self._owner(conversation_id)
        return InstanceProxy(self._manager, conversation_id, user_id, room_id)

    def __contains__(self, conversation_id: object) -> bool:
        try:
            self[conversation_id]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter([s.conversation_id for s in self._manager.list_conversations(all_users=True)])

    def __len__(self) -> int:
        return len(self._manager.list_conversations(all_users=True))


class InstanceProxy:
    """One conversation as the seed's code expects an instance: attributes read the stored ``FSMInstance``.

    Writing ``current_state`` forces the state (recorded with actor ``application``); every other write is
    refused, because a change made behind the engine's back would skip its checks and its trace.
    """

    __slots__ = ("_cid", "_manager", "_owner")

    def __init__(self, manager: OperatorAPI, conversation_id: str, user_id: str | None, room_id: str | None) -> None:
        object.__setattr__(self, "_manager", manager)
        object.__setattr__(self, "_cid", conversation_id)
        object.__setattr__(self, "_owner", (user_id, room_id))

    def _load(self) -> FSMInstance:
        user_id, room_id = self._owner
        instance: FSMInstance = self._manager.get_instance(self._cid, user_id=user_id, room_id=room_id)
        return instance

    def __getattr__(self, name: str) -> Any:
        return getattr(self._load(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "current_state":
            user_id, room_id = self._owner
            self._manager.force_state(
                self._cid,
                value,
                "set through instances[...]",
                actor=APPLICATION_ACTOR,
                user_id=user_id,
                room_id=room_id,
            )
            return
        raise OperatorError(
            f"instances[...].{name} cannot be set: change a conversation with force_state (its state) or "
            "set_context (its data), so the change is checked and recorded"
        )

    def __delattr__(self, name: str) -> None:
        raise OperatorError(f"instances[...].{name} cannot be deleted")

    def __repr__(self) -> str:
        return f"<instance {self._cid}>"


__all__ = ["APPLICATION_ACTOR", "InstanceProxy", "InstancesView", "OperatorAPI"]
