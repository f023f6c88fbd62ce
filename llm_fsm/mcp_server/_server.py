"""``create_mcp_server``: the SDK's ``MCPServer`` with the five conversation tools, for any transport.

The tools' signatures are their input schemas (the SDK reads them, with each ``Field``'s description), and each
returns a ``CallToolResult`` annotated with its answer's model, so the output schema is published and every answer
is checked against it. The descriptions are written for the agent that reads them: the order of the calls, and
what to read when a conversation ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from llm_fsm.manager import FSMManager
from llm_fsm.mcp_server._models import DefinitionsOut, ExplainOut, StartedOut, StateOut, TurnOut
from llm_fsm.mcp_server._tools import ConversationTools, Tenant
from llm_fsm.serving._definitions import DefinitionRegistry, DefinitionSource

SERVER_NAME = "llm-fsm"
DEFAULT_RECENT_MESSAGES = 20

INSTRUCTIONS = """\
Conversations run by declarative state machines (llm_fsm): each definition collects a set of typed values \
(a booking, a form) by talking with a user. To hand a sub-task to one: list_definitions to see what each \
collects; start_conversation with its id; then send_message with the user's words, showing each reply, until \
`ended` is true; the collected values are in `data` (typed as list_definitions says). get_state reads a \
conversation at any time; explain says why a turn went where it did."""

_READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

ConversationId = Annotated[str, Field(description="The conversation_id start_conversation returned.")]


def create_mcp_server(
    manager: FSMManager,
    definitions: DefinitionRegistry | Iterable[DefinitionSource] | Mapping[str, DefinitionSource],
    *,
    user_id: str | None = None,
    room_id: str | None = None,
    name: str = SERVER_NAME,
) -> MCPServer:
    """An MCP server offering ``definitions`` (files, folders, ``{id: file or FSMDefinition}`` or a registry) to
    agents, every conversation started and read as ``user_id`` / ``room_id``.

    Run it with ``.run("stdio")``, or serve ``.streamable_http_app()`` under any ASGI server.
    """
    registry = (
        definitions if isinstance(definitions, DefinitionRegistry) else DefinitionRegistry.from_sources(definitions)
    )
    tools = ConversationTools(manager, registry, Tenant(user_id, room_id))
    server: MCPServer = MCPServer(name, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(
        description="The definitions you can start: each one's id, what it does, its states, and the keys it "
        "collects with the JSON Schema of their values (what `data` will hold when it ends).",
        annotations=_READ_ONLY,
    )
    async def list_definitions() -> Annotated[CallToolResult, DefinitionsOut]:
        return await tools.answer(tools.list_definitions())

    @server.tool(
        description="Start a conversation of a definition (an id from list_definitions). Returns its "
        "conversation_id and the assistant's opening message; then call send_message with the user's answers "
        "until `ended` is true.",
        annotations=_WRITES,
    )
    async def start_conversation(
        definition: Annotated[str, Field(description="The definition's id, from list_definitions.")],
        context: Annotated[
            dict[str, Any] | None,
            Field(description="Values known before the conversation starts (keys the definition declares)."),
        ] = None,
        language: Annotated[
            str | None, Field(description="One of the definition's languages (default: its default language).")
        ] = None,
    ) -> Annotated[CallToolResult, StartedOut]:
        return await tools.answer(tools.start_conversation(definition, context, language))

    @server.tool(
        description="Send the user's message to a conversation and get the assistant's reply, the state, "
        "whether it has ended, and every value collected so far (`data`, typed as declared). Repeat until "
        "`ended` is true; an ended conversation takes no more messages (error conversation_ended).",
        annotations=_WRITES,
    )
    async def send_message(
        conversation_id: ConversationId,
        message: Annotated[str, Field(description="What the user said, as text.")],
        message_id: Annotated[
            str | None,
            Field(
                description="An id of your own for this message: sending it again (a retry) is answered once, "
                "with the same reply, and runs no second turn.",
                max_length=200,
            ),
        ] = None,
    ) -> Annotated[CallToolResult, TurnOut]:
        return await tools.answer(tools.send_message(conversation_id, message, message_id), conversation_id)

    @server.tool(
        description="Read a conversation: its state, whether it has ended, the values collected (`data`), the "
        "sub-flows running (`stack`) and the most recent messages.",
        annotations=_READ_ONLY,
    )
    async def get_state(
        conversation_id: ConversationId,
        recent: Annotated[
            int, Field(description="How many of the latest messages to include.", ge=0, le=200)
        ] = DEFAULT_RECENT_MESSAGES,
    ) -> Annotated[CallToolResult, StateOut]:
        return await tools.answer(tools.get_state(conversation_id, recent), conversation_id)

    @server.tool(
        description="Why a turn went where it did: the values read from the message, each transition considered "
        "with its conditions, the verdict, the actions and model calls, and the reply.",
        annotations=_READ_ONLY,
    )
    async def explain(
        conversation_id: ConversationId,
        turn: Annotated[int, Field(description="The turn's index (1-based), or -1 for the latest.")] = -1,
    ) -> Annotated[CallToolResult, ExplainOut]:
        return await tools.answer(tools.explain(conversation_id, turn), conversation_id)

    return server


__all__ = ["DEFAULT_RECENT_MESSAGES", "INSTRUCTIONS", "SERVER_NAME", "create_mcp_server"]
