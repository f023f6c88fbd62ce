"""The manager's audit: verifying a stored conversation's decisions (``llm_fsm.audit``) and moving it to a new
definition version (``migrate``), each with its async twin.

Kept apart from the readers because it reads more than a conversation: the definition versions the conversation
ran on, from the manager's own definitions first and the store's version table after.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from llm_fsm._threads import run_blocking
from llm_fsm.audit._verify import Verification, unreadable, verify_instance
from llm_fsm.audit._versions import Versions
from llm_fsm.definition._migrations import Migrations
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._migrate import ROOT, MigrationResult
from llm_fsm.engine._migrate import migrate as migrate_instance
from llm_fsm.engine._timers import instant
from llm_fsm.engine._timers import migrated as migrated_timers
from llm_fsm.engine._turn import LoadDefinition
from llm_fsm.errors import DefinitionError, MigrationError, StoreCorruptedError
from llm_fsm.runtime._effects import LoadConversation
from llm_fsm.runtime._operations import Change, Operation, Unchanged, compare_and_set
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

    def migrate(
        self,
        conversation_id: str,
        definition: FSMDefinition,
        *,
        migrations: Migrations | None = None,
        flows: Mapping[str, FSMDefinition] | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> MigrationResult:
        """Move a conversation onto ``definition`` (a new version of the one it runs on), by ``migrations`` (default:
        the definition's own block), with compare-and-set under the conversation's lock: a turn in progress
        finishes first, and the move is recorded in the conversation's trail (``migrated``).

        Raises ``MigrationError`` when the new version cannot hold the conversation; it then stays on its own
        version, unchanged. A conversation already on ``definition`` is left as it is.
        """
        change = self._migration(definition, migrations, flows)
        load = LoadConversation(conversation_id, user_id, room_id)
        result: MigrationResult = self._run(compare_and_set(self.max_save_retries, load, change), lock=conversation_id)
        return result

    async def amigrate(
        self,
        conversation_id: str,
        definition: FSMDefinition,
        *,
        migrations: Migrations | None = None,
        flows: Mapping[str, FSMDefinition] | None = None,
        user_id: str | None = None,
        room_id: str | None = None,
    ) -> MigrationResult:
        change = self._migration(definition, migrations, flows)
        load = LoadConversation(conversation_id, user_id, room_id)
        result: MigrationResult = await self._arun(
            compare_and_set(self.max_save_retries, load, change), lock=conversation_id
        )
        return result

    def _migration(
        self, definition: FSMDefinition, migrations: Migrations | None, flows: Mapping[str, FSMDefinition] | None
    ) -> Change:
        # the performer stores every version a saved conversation runs on: it must hold the new ones
        for known in (definition, *(flows or {}).values()):
            self.definitions.remember(known)
        return migrating(
            definition, migrations, flows, self.config.max_trace_events, lambda: instant(self.config, time.time())
        )

    def versions_for(self, instance: FSMInstance, into: Versions | None = None) -> Versions:
        """Definitions by version for ``instance``: those this manager holds, the current ones of its flows when
        the loader finds them, then the store's version table. ``into``: add to these (a walk over many
        conversations reads each version once)."""
        read = getattr(self.store, "load_definition_version", None)
        versions = into if into is not None else Versions(read, *self.definitions.versions.values())
        for fsm_id in {instance.fsm_id, *(frame.fsm_id for frame in instance.flow_stack)}:
            try:
                versions.add(self.definitions.load(fsm_id))
            except (DefinitionError, OSError):
                continue  # not loadable here: the store's version table may still have it
        return versions


def migrating(
    definition: FSMDefinition,
    migrations: Migrations | None,
    flows: Mapping[str, FSMDefinition] | None,
    max_trace_events: int,
    now: Callable[[], float],
) -> Change:
    """The change ``migrate`` makes: the conversation moved as ``engine.migrate`` says, or ``MigrationError``; its
    timers follow the new version (``engine._timers.migrated``), ``now`` being the engine's clock."""

    def change(instance: FSMInstance) -> Operation[Any]:
        old: FSMDefinition = yield LoadDefinition(instance.fsm_id, version=instance.definition_hash)
        result = migrate_instance(instance, definition, migrations, flows=flows)
        if not result.ok:
            reasons = "; ".join(problem.message for problem in result.problems[:3])
            raise MigrationError(
                f"conversation {instance.conversation_id} cannot move to {definition.name} version "
                f"{definition.content_hash}: {reasons}; it stays on version {instance.definition_hash}"
            )
        if not result.changes:
            return Unchanged(result)
        moved = result.instance
        previous = instance.definition_hash
        active = definition if not moved.flow_stack else (flows or {}).get(moved.flow_name or "")
        if active is not None:
            where = ROOT if not moved.flow_stack else moved.flow_name
            renamed = any(c.kind == "state" and c.where == where for c in result.changes)
            known = old.states.get(instance.current_state) if old.content_hash == previous else None
            migrated_timers(known, active.states.get(moved.current_state), moved, now, moved=renamed)
        for name in type(instance).model_fields:
            if name not in ("version", "turns", "processed_messages"):
                setattr(instance, name, getattr(moved, name))
        instance.add_trace(
            "migrated",
            {
                "from": previous,
                "to": instance.definition_hash,
                "changes": [change.message for change in result.changes][:20],
            },
            max_trace_events,
        )
        return result

    return change


__all__ = ["AuditAPI", "migrating"]
