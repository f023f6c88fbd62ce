"""The definition language as data: the model of an FSM file, documents (text to data with positions), the neutral
graph,
the JSON Schema.

Pure: no file system, no model, no store. Reading files is ``llm_fsm.loading``'s job.
"""

from __future__ import annotations

from llm_fsm.definition._actions import ActionDeclaration
from llm_fsm.definition._documents import ParsedDocument, Path, format_path, parse_text
from llm_fsm.definition._graph import (
    Edge,
    GlobalEdge,
    Graph,
    Node,
    graph_from_definition,
    graph_from_document,
)
from llm_fsm.definition._migrations import Migrations, migrations_from_document
from llm_fsm.definition._model import (
    SCHEMA_ID,
    SUPPORTED_VERSIONS,
    Confirmation,
    FlowDeclaration,
    FSMDefinition,
    GlobalTransition,
    State,
    StateGroup,
    Transition,
    TransitionCondition,
)
from llm_fsm.definition._retrieval import RetrieveDeclaration
from llm_fsm.definition._schema import build_schema, render_schema

__all__ = [
    "ActionDeclaration",
    "Confirmation",
    "Edge",
    "FSMDefinition",
    "FlowDeclaration",
    "GlobalEdge",
    "GlobalTransition",
    "Graph",
    "Migrations",
    "Node",
    "ParsedDocument",
    "Path",
    "RetrieveDeclaration",
    "SCHEMA_ID",
    "SUPPORTED_VERSIONS",
    "State",
    "StateGroup",
    "Transition",
    "TransitionCondition",
    "build_schema",
    "format_path",
    "graph_from_definition",
    "graph_from_document",
    "migrations_from_document",
    "parse_text",
    "render_schema",
]
