"""``/v1/definitions``: the definitions a server offers, and each one's diagram.

(No ``from __future__ import annotations`` here: FastAPI reads the route signatures' types at run time.)
"""

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from llm_fsm.server._deps import Reader, Registry, served
from llm_fsm.server._models import DEFINITION_NOT_FOUND, ERRORS, DefinitionItem, DefinitionList, GraphOut

router = APIRouter(prefix="/v1", tags=["definitions"], responses=ERRORS)


@router.get("/definitions", response_model=DefinitionList)
async def list_definitions(caller: Reader, registry: Registry) -> DefinitionList:
    """The definitions this server offers; start a conversation with one's `id`."""
    items = []
    for offered in registry.by_id.values():
        definition = await offered.load()
        items.append(
            DefinitionItem(
                id=offered.id,
                name=definition.name,
                description=definition.description,
                initial_state=definition.initial_state,
                states=list(definition.states),
            )
        )
    return DefinitionList(definitions=items)


@router.get("/definitions/{definition_id}/graph", response_model=GraphOut, responses=DEFINITION_NOT_FOUND)
async def definition_graph(
    definition_id: str,
    caller: Reader,
    registry: Registry,
    format: Annotated[Literal["mermaid", "dot", "text"], Query(description="Diagram format.")] = "mermaid",
) -> GraphOut:
    """A definition's states and transitions as a diagram (Mermaid by default), as `llm-fsm graph` draws it."""
    from llm_fsm.definition._graph import graph_from_definition
    from llm_fsm.renderers import extras_from_definition, render

    definition = await served(registry, definition_id).load()
    text = render(graph_from_definition(definition), format, extras_from_definition(definition))
    return GraphOut(definition=definition_id, format=format, graph=text)


__all__ = ["router"]
