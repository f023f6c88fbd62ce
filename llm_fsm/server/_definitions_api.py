"""``/v1/definitions``: the definitions a server offers, the versions of each it holds, and each one's diagram.

(No ``from __future__ import annotations`` here: FastAPI reads the route signatures' types at run time.)
"""

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from llm_fsm.server._definitions import DefinitionRegistry, ServedDefinition
from llm_fsm.server._deps import Reader, Registry, served
from llm_fsm.server._models import (
    DEFINITION_NOT_FOUND,
    ERRORS,
    DefinitionItem,
    DefinitionList,
    DefinitionVersionOut,
    GraphOut,
)

router = APIRouter(prefix="/v1", tags=["definitions"], responses=ERRORS)


async def definition_item(registry: DefinitionRegistry, offered: ServedDefinition) -> DefinitionItem:
    """A served definition as the API lists it: the file now, and every version an alias keeps beside it."""
    definition = await offered.load()
    aliases = registry.aliases_of(offered.id)
    current = definition.content_hash
    versions = {current: DefinitionVersionOut(version=current, current=True, aliases=[])}
    for alias in aliases:
        versions.setdefault(alias.version, DefinitionVersionOut(version=alias.version, current=False, aliases=[]))
        versions[alias.version].aliases.append(alias.name)
    return DefinitionItem(
        id=offered.id,
        name=definition.name,
        description=definition.description,
        initial_state=definition.initial_state,
        states=list(definition.states),
        version=current,
        versions=list(versions.values()),
        aliases={alias.name: alias.version for alias in aliases},
    )


@router.get("/definitions", response_model=DefinitionList)
async def list_definitions(caller: Reader, registry: Registry) -> DefinitionList:
    """The definitions this server offers, with the versions of each it holds and the aliases naming them; start a
    conversation with one's `id` (and a `version` or an `alias`)."""
    return DefinitionList(definitions=[await definition_item(registry, offered) for offered in registry.by_id.values()])


@router.get("/definitions/{definition_id}", response_model=DefinitionItem, responses=DEFINITION_NOT_FOUND)
async def get_definition(definition_id: str, caller: Reader, registry: Registry) -> DefinitionItem:
    """One served definition, as the list shows it."""
    return await definition_item(registry, served(registry, definition_id))


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
