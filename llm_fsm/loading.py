"""Reading definition files: the documented path ``llm_fsm.loading`` (the implementation is the runtime's).

Kept at the package root because applications, the CLI and the server import the loader from here; the code
lives in ``llm_fsm.runtime._loading`` with the rest of the conversation runtime.
"""

from __future__ import annotations

from llm_fsm.definition._documents import parse_text
from llm_fsm.definition._migrations import Migrations, migrations_from_document
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
    sub_flows,
)


def load_migrations(path: PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Migrations:
    """A standalone migrations file (``--migrations FILE``): the block at its top level or under ``migrations:``.

    Read under the same caps as a definition; raises ``DefinitionNotFoundError`` or ``DefinitionError`` with
    the file, the JSON path and the line.
    """
    name = str(path)
    raw = read_capped(name, max_bytes=max_bytes, what="migrations file")
    document = parse_text(raw, file=name, max_containers=max_bytes // BYTES_PER_CONTAINER, kind="migrations file")
    return migrations_from_document(document)


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
    "load_migrations",
    "read_capped",
    "read_document",
    "resolve_definition_path",
    "resolve_flow_reference",
    "sub_flows",
]
