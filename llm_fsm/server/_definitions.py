"""The served definitions by id: they live in ``llm_fsm.serving._definitions`` (shared with the MCP server);
re-exported here, where the HTTP API and its users import them from."""

from __future__ import annotations

from llm_fsm.serving._definitions import (
    _SKIP,
    Alias,
    DefinitionRegistry,
    DefinitionSource,
    ServedDefinition,
    _is_definition_file,
    _loaded,
    _served,
    _stem,
)

__all__ = [
    "_SKIP",
    "Alias",
    "DefinitionRegistry",
    "DefinitionSource",
    "ServedDefinition",
    "_is_definition_file",
    "_loaded",
    "_served",
    "_stem",
]
