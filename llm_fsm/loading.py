"""Reading definition files: the documented path ``llm_fsm.loading`` (the implementation is the runtime's).

Kept at the package root because applications, the CLI and the server import the loader from here; the code
lives in ``llm_fsm.runtime._loading`` with the rest of the conversation runtime.
"""

from __future__ import annotations

from llm_fsm.runtime._loading import (
    BYTES_PER_CONTAINER,
    DEFAULT_MAX_BYTES,
    DEFINITIONS_ENV,
    SUFFIXES,
    DefinitionCache,
    PathLike,
    attach_source,
    clear_definition_cache,
    default_search_path,
    definition_from_document,
    flow_resolver,
    load_fsm_definition,
    read_capped,
    read_document,
    resolve_definition_path,
    resolve_flow_reference,
)

__all__ = [
    "BYTES_PER_CONTAINER",
    "DEFAULT_MAX_BYTES",
    "DEFINITIONS_ENV",
    "SUFFIXES",
    "DefinitionCache",
    "PathLike",
    "attach_source",
    "clear_definition_cache",
    "default_search_path",
    "definition_from_document",
    "flow_resolver",
    "load_fsm_definition",
    "read_capped",
    "read_document",
    "resolve_definition_path",
    "resolve_flow_reference",
]
