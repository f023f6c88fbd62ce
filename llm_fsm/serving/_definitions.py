"""The definitions a server offers, by id: the only ones a client can start.

A client names a definition by its id (a file's stem, or a key of the mapping given to
``create_app``), never by a path: the server resolves ids itself, so no request can make it
read a file it was not told to serve. Conversations store the definition's absolute path
(or, for a definition given as an object, its name), as ``llm-fsm chat`` does, so every
worker and a later ``llm-fsm chat --resume`` find it again.

Aliases (``create_app(aliases=...)``, ``llm-fsm serve --alias NAME=FILE``) name a fixed version of a served
definition: the one whose ``name`` the alias's file has. Each is read once, at start, and kept by its content
hash, so ``staging`` and ``production`` are served side by side whatever the served file says later.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from llm_fsm._threads import run_blocking
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.errors import DefinitionNotFoundError, UsageError
from llm_fsm.loading import SUFFIXES, load_fsm_definition, resolve_definition_path
from llm_fsm.scripting._files import is_mcp_config_file, is_recording_file

DefinitionSource = str | os.PathLike[str] | FSMDefinition
_SKIP = (".conv.yaml", ".conv.yml", ".conv.json")


@dataclass(frozen=True)
class ServedDefinition:
    """One definition the API offers."""

    id: str
    location: str | FSMDefinition  # what the manager is given to start a conversation (and stores)
    stored_id: str  # what conversations store as their fsm_id

    async def load(self) -> FSMDefinition:
        """The definition now (a file is re-read when it changed, through the loader's cache)."""
        if isinstance(self.location, FSMDefinition):
            return self.location
        return await run_blocking(load_fsm_definition, self.location)


@dataclass(frozen=True)
class Alias:
    """A name for one version of a served definition (its content hash), read once at start."""

    name: str
    definition_id: str
    definition: FSMDefinition

    @property
    def version(self) -> str:
        return self.definition.content_hash


class DefinitionRegistry:
    """Ids → definitions, and back from what a conversation stores to the id clients know; aliases → versions."""

    def __init__(self, served: Iterable[ServedDefinition]) -> None:
        self.aliases: dict[str, Alias] = {}
        self.by_id: dict[str, ServedDefinition] = {}
        for item in served:
            if item.id in self.by_id:
                raise UsageError(f"two definitions are served under the id {item.id!r}; rename one file")
            self.by_id[item.id] = item
        self._by_stored = {item.stored_id: item.id for item in self.by_id.values()}

    def get(self, definition_id: str) -> ServedDefinition:
        served = self.by_id.get(definition_id)
        if served is None:
            raise DefinitionNotFoundError(f"no definition {definition_id!r} is served")
        return served

    def id_for(self, stored_id: str) -> str:
        """The id a client knows for a conversation's stored definition (a sub-flow's file: its stem)."""
        known = self._by_stored.get(stored_id)
        if known is not None:
            return known
        name = os.path.basename(stored_id)
        for suffix in SUFFIXES:
            if name.lower().endswith(suffix):
                return name[: -len(suffix)]
        return name

    def aliases_of(self, definition_id: str) -> list[Alias]:
        """The aliases of one served definition, in the order they were given."""
        return [alias for alias in self.aliases.values() if alias.definition_id == definition_id]

    def add_aliases(self, aliases: Mapping[str, DefinitionSource]) -> list[Alias]:
        """Load each alias's definition now and file it under the served definition of the same ``name``.

        A broken file, a name no served definition (or more than one) has, or an alias named twice stops the
        server at start (UsageError), as a broken served definition does.
        """
        names: dict[str, list[str]] = {}
        for item in self.by_id.values():
            location = item.location
            definition = location if isinstance(location, FSMDefinition) else load_fsm_definition(location)
            names.setdefault(definition.name, []).append(item.id)
        added = []
        for name, source in aliases.items():
            if not name or "/" in name or name in self.aliases:
                raise UsageError(f"an alias is a non-empty name without '/', given once, not {name!r}")
            definition = _loaded(source)
            owners = names.get(definition.name, [])
            if len(owners) != 1:
                which = "no served definition" if not owners else f"several served definitions ({', '.join(owners)})"
                raise UsageError(f"alias {name!r}: {which} is named {definition.name!r}, the name its definition has")
            self.aliases[name] = Alias(name, owners[0], definition)
            added.append(self.aliases[name])
        return added

    @classmethod
    def from_sources(cls, sources: Iterable[DefinitionSource] | Mapping[str, DefinitionSource]) -> DefinitionRegistry:
        """Files, folders (their definition files, not recursively) or ``{id: file or FSMDefinition}``.

        Every definition is loaded now, so a broken one stops the server at start instead of
        failing its first conversation.
        """
        if isinstance(sources, Mapping):
            return cls(_served(str(key), value) for key, value in sources.items())
        served: list[ServedDefinition] = []
        for source in sources:
            if isinstance(source, FSMDefinition):
                served.append(_served(source.name, source))
                continue
            path = Path(source).expanduser()
            if path.is_dir():
                files = sorted(p for p in path.iterdir() if p.is_file() and _is_definition_file(p))
                if not files:
                    raise UsageError(f"{source}: the folder holds no definition files ({', '.join(SUFFIXES)})")
                served.extend(_served(_stem(p), p) for p in files)
            else:
                resolved = resolve_definition_path(source)
                served.append(_served(_stem(resolved), resolved))
        if not served:
            raise UsageError("no definitions to serve: name at least one file or folder")
        return cls(served)


def _loaded(source: DefinitionSource) -> FSMDefinition:
    if isinstance(source, FSMDefinition):
        return source
    try:
        return load_fsm_definition(os.fspath(resolve_definition_path(source)))
    except DefinitionNotFoundError as exc:
        raise UsageError(str(exc)) from None


def _is_definition_file(path: Path) -> bool:
    name = path.name.lower()
    return (
        name.endswith(SUFFIXES)
        and not name.endswith(_SKIP)
        and not is_recording_file(path)
        and not is_mcp_config_file(path)  # the MCP servers definitions call (--mcp CONFIG), not a definition
    )


def _stem(path: Path) -> str:
    name = path.name
    for suffix in SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def _served(definition_id: str, source: DefinitionSource) -> ServedDefinition:
    if not definition_id or "/" in definition_id:
        raise UsageError(f"a definition id is a non-empty name without '/', not {definition_id!r}")
    if isinstance(source, FSMDefinition):
        return ServedDefinition(definition_id, source, source.name)
    try:
        location = os.fspath(resolve_definition_path(source))
    except DefinitionNotFoundError as exc:
        raise UsageError(str(exc)) from None
    load_fsm_definition(location)  # a DefinitionError names the file, the path and the line
    return ServedDefinition(definition_id, location, location)


__all__ = ["Alias", "DefinitionRegistry", "DefinitionSource", "ServedDefinition"]
