"""Where a conversation's definition comes from, and whether the conversation may still run on it.

Split from the performer because the cache and the ``on_definition_change`` policy are decisions, not
I/O: ``cached`` never touches a file, so the performer asks it first and hands a driver a blocking load
only when the loader is due again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Literal

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import DefinitionChangedError
from llm_fsm.runtime._loading import resolve_flow_reference

logger = logging.getLogger("llm_fsm.runtime")

DefinitionPolicy = Literal["pin", "continue", "error"]

MAX_VERSIONS_HELD = 1024
"""Definition versions a manager keeps parsed in memory (each conversation's own, for pinned conversations)."""


class DefinitionSource:
    """The manager's definitions: its loader, asked again at most every ``recheck_seconds`` per id, and the
    definitions handed to ``start_conversation`` as objects (no loader could find those again)."""

    def __init__(
        self,
        loader: Callable[[str], FSMDefinition],
        recheck_seconds: float,
        policy: Callable[[], DefinitionPolicy],
    ) -> None:
        self.loader = loader
        self.recheck_seconds = recheck_seconds
        self._policy = policy
        self._cache: dict[str, tuple[FSMDefinition, float]] = {}
        self.given: dict[str, FSMDefinition] = {}
        self.versions: dict[str, FSMDefinition] = {}
        """Definitions by version (content hash): every one this manager loaded or read from the store."""
        self._stored: tuple[object, set[str]] = (None, set())

    def stored_in(self, store: object) -> set[str]:
        """Versions this manager knows ``store`` keeps (saved or read back), so each is written once per store."""
        if self._stored[0] is not store:
            self._stored = (store, set())
        return self._stored[1]

    def remember(self, definition: FSMDefinition) -> FSMDefinition:
        """Keep ``definition`` by its version, for the conversations pinned to it."""
        if definition.content_hash not in self.versions:
            if len(self.versions) >= MAX_VERSIONS_HELD:
                self.versions.pop(next(iter(self.versions)))
            self.versions[definition.content_hash] = definition
        return definition

    @property
    def policy(self) -> DefinitionPolicy:
        return self._policy()

    def cached(self, fsm_id: str | FSMDefinition) -> FSMDefinition | None:
        """The definition when no loader call is due (no I/O), else None."""
        if isinstance(fsm_id, FSMDefinition):
            return self.remember(fsm_id)
        given = self.given.get(fsm_id)
        if given is not None:
            return self.remember(given)
        cached = self._cache.get(fsm_id)
        if cached is not None and time.monotonic() - cached[1] < self.recheck_seconds:
            return cached[0]  # remembered when it was loaded
        return None

    def load(self, fsm_id: str | FSMDefinition) -> FSMDefinition:
        """The definition, asking the loader when the cache has none fresh (this may read files)."""
        cached = self.cached(fsm_id)
        if cached is not None:
            return cached
        assert isinstance(fsm_id, str)  # an FSMDefinition is always "cached"
        definition = self.remember(self.loader(fsm_id))
        self._cache[fsm_id] = (definition, time.monotonic())
        return definition

    def flow_reference(self, declaration: FlowDeclaration, parent: FSMDefinition) -> str:
        """A sub-flow's id for the loader, found exactly where fsm-lint looks (next to the parent's file first)."""
        return resolve_flow_reference(declaration.definition, parent.source)

    def checked(self, instance: FSMInstance, definition: FSMDefinition) -> FSMDefinition:
        """The definition, if the conversation may run on it (see ``FSMManager(on_definition_change=...)``).

        Under "pin" the performer first looks for the conversation's own version; this is asked only when that
        version is nowhere to be found (a conversation started before versions were stored), and then the
        conversation continues on the current definition, as under "continue".
        """
        if instance.definition_hash and definition.content_hash != instance.definition_hash:
            if self._policy() == "error":
                raise DefinitionChangedError(
                    f"definition {instance.fsm_id!r} changed since conversation {instance.conversation_id} started "
                    f"(hash {instance.definition_hash} → {definition.content_hash})"
                )
            if instance.current_state not in definition.states:
                raise DefinitionChangedError(
                    f"definition {instance.fsm_id!r} changed and no longer declares state {instance.current_state!r}, "
                    f"where conversation {instance.conversation_id} is"
                )
            logger.warning(
                "definition %s changed since conversation %s started; continuing",
                instance.fsm_id,
                instance.conversation_id,
            )
        return definition


__all__ = ["DefinitionPolicy", "DefinitionSource"]
