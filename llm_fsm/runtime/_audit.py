"""The manager's audit: verifying a stored conversation's decisions (``llm_fsm.audit``), with its async twin.

Kept apart from the readers because it reads more than a conversation: the definition versions the conversation
ran on, from the manager's own definitions first and the store's version table after.
"""

from __future__ import annotations

from llm_fsm._threads import run_blocking
from llm_fsm.audit._verify import Verification, unreadable, verify_instance
from llm_fsm.audit._versions import Versions
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import DefinitionError, StoreCorruptedError
from llm_fsm.runtime._operator import OperatorAPI


class AuditAPI(OperatorAPI):
    """``verify`` and what it needs; ``FSMManager`` inherits it."""

    def verify(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> Verification:
        """Check a conversation's hash chain and decide every recorded turn again with the definition version it
        ran on (no model or action is called). ``Verification.ok`` is False at the first edited record or
        decision that comes out differently, which ``Verification.failure`` names."""
        try:
            instance = self.get_instance(conversation_id, user_id=user_id, room_id=room_id)
        except StoreCorruptedError as exc:
            return unreadable(conversation_id, exc)
        return verify_instance(instance, self.versions_for(instance), config=self.config, key=self.config.audit_key)

    async def averify(
        self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None
    ) -> Verification:
        try:
            instance = await self.aget_instance(conversation_id, user_id=user_id, room_id=room_id)
        except StoreCorruptedError as exc:
            return unreadable(conversation_id, exc)
        versions = self.versions_for(instance)
        # deciding every turn again is CPU work over definitions the store may be asked for: off the event loop
        return await run_blocking(verify_instance, instance, versions, config=self.config, key=self.config.audit_key)

    def versions_for(self, instance: FSMInstance) -> Versions:
        """Definitions by version for ``instance``: those this manager holds, the current ones of its flows when
        the loader finds them, then the store's version table."""
        read = getattr(self.store, "load_definition_version", None)
        versions = Versions(read, *self.definitions.versions.values())
        for fsm_id in {instance.fsm_id, *(frame.fsm_id for frame in instance.flow_stack)}:
            try:
                versions.add(self.definitions.load(fsm_id))
            except (DefinitionError, OSError):
                continue  # not loadable here: the store's version table may still have it
        return versions


__all__ = ["AuditAPI"]
