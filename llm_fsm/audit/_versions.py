"""Definition versions as stored text: the canonical JSON a content hash names, and back.

A conversation pins the version it started on (``FSMInstance.definition_hash``); the store keeps each version's
document once (``DefinitionVersionStore``), so the conversation, its audit and its replay can always read the
definition it ran on, whatever the file says today.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.errors import DefinitionError


def version_document(definition: FSMDefinition) -> str:
    """The text stored for a version: the definition's canonical JSON, exactly what its content hash covers."""
    return json.dumps(definition.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":"))


def definition_of(version: str, document: str) -> FSMDefinition:
    """The definition a stored document holds; DefinitionError when it is not the version it is filed under."""
    definition = FSMDefinition.model_validate_json(document)
    if definition.content_hash != version:
        raise DefinitionError(
            f"stored definition version {version} holds a definition whose hash is {definition.content_hash}: "
            "the version table was edited"
        )
    return definition


class Versions:
    """Definitions by version, read once each: from the definitions at hand, else from ``read`` (the store)."""

    def __init__(self, read: Callable[[str], str] | None = None, *known: FSMDefinition) -> None:
        self._read = read
        self._known: dict[str, FSMDefinition] = {}
        for definition in known:
            self.add(definition)

    def add(self, definition: FSMDefinition) -> None:
        self._known.setdefault(definition.content_hash, definition)

    def __call__(self, version: str) -> FSMDefinition:
        found = self._known.get(version)
        if found is None:
            if self._read is None:
                raise DefinitionError(f"definition version {version} is not at hand and no store keeps versions")
            found = definition_of(version, self._read(version))
            self._known[version] = found
        return found


__all__ = ["Versions", "definition_of", "version_document"]
