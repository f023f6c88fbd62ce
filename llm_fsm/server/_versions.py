"""Which version of a served definition a conversation starts on: the served file's now, a ``version`` (content
hash) the server holds or its store keeps, or the one an ``alias`` names.

A version must be one of the definition named: a hash of another definition's version, kept in the same store,
would start a conversation filed under this id that runs something else entirely, so it is refused as unknown.

The manager is reached through what ``FSMManager`` has beside the server's protocol (``definitions`` to hold an
alias's version, ``store`` to read a kept one); a manager without them serves the current version and aliases
its own loader can find, and answers 404 for any other version.
"""

from __future__ import annotations

from llm_fsm.audit._versions import definition_of
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.errors import DefinitionVersionNotFoundError
from llm_fsm.server._definitions import DefinitionRegistry, ServedDefinition
from llm_fsm.server._deps import alias_for
from llm_fsm.server._errors import ApiError, safe_id
from llm_fsm.server._protocol import ManagerProtocol


def hold(manager: ManagerProtocol, definition: FSMDefinition) -> None:
    """Have the manager hold ``definition`` by its version, so a conversation can start and stay on it."""
    remember = getattr(getattr(manager, "definitions", None), "remember", None)
    if callable(remember):
        remember(definition)


async def chosen_version(
    manager: ManagerProtocol,
    registry: DefinitionRegistry,
    offered: ServedDefinition,
    version: str | None,
    alias: str | None,
) -> tuple[str | None, str | None]:
    """(version to start on or None for the current one, alias used or None); 422 for both, 404 for unknown."""
    if version is not None and alias is not None:
        raise ApiError(422, "invalid_request", "give either a `version` or an `alias`, not both")
    if alias is not None:
        named = alias_for(registry, offered.id, alias)
        hold(manager, named.definition)  # again: the manager keeps a bounded number of versions
        return named.version, named.name
    if version is None:
        return None, None
    current = await offered.load()
    if version == current.content_hash:
        return version, None
    for named in registry.aliases_of(offered.id):
        if named.version == version:
            hold(manager, named.definition)
            return version, None
    kept = await _kept(manager, version)
    if kept is None or kept.name != current.name:
        raise ApiError(
            404,
            "version_not_found",
            f"definition '{safe_id(offered.id)}' has no version {version} on this server "
            "(GET /v1/definitions lists the versions held; the store may keep older ones)",
        )
    return version, None


async def _kept(manager: ManagerProtocol, version: str) -> FSMDefinition | None:
    """The version as the manager holds it or its store keeps it; None when neither has it."""
    held = getattr(getattr(manager, "definitions", None), "versions", None)
    if isinstance(held, dict):
        found = held.get(version)
        if isinstance(found, FSMDefinition):
            return found
    read = getattr(getattr(manager, "store", None), "aload_definition_version", None)
    if not callable(read):
        return None
    try:
        document = await read(version)
    except DefinitionVersionNotFoundError:
        return None
    return definition_of(version, str(document))


__all__ = ["chosen_version", "hold"]
