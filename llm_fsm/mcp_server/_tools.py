"""The tools' work, over ``FSMManager``'s async API, every call under the one tenant the server was started for.

A tool never raises to the SDK: every failure becomes a tool error (``isError``) with the HTTP API's stable code
and message (``serving/_errors.py``), so an agent reads "conversation_not_found: ..." and never a traceback, and
another tenant's conversation reads exactly like an unknown id. A turn runs in a task of its own: a client that
cancels the call (or goes away) does not cut the turn half way, so it is saved whole or not at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from llm_fsm.definition import FSMDefinition
from llm_fsm.engine._reply_schema import key_json_schema
from llm_fsm.engine._values import masked
from llm_fsm.errors import DefinitionNotFoundError
from llm_fsm.manager import FSMManager
from llm_fsm.mcp_server._models import (
    DefinitionOut,
    DefinitionsOut,
    ErrorOut,
    ExplainOut,
    KeyOut,
    StartedOut,
    StateOut,
    TranscriptMessage,
    TurnOut,
)
from llm_fsm.serving._definitions import DefinitionRegistry, ServedDefinition
from llm_fsm.serving._errors import api_error_for, check_id, unknown_definition


@dataclass(frozen=True)
class Tenant:
    """The owner every conversation of this server is started and read under (``--user`` / ``--room``).

    The stores answer only to the exact pair, so a conversation of any other owner is, to the agent, an unknown id.
    """

    user_id: str | None = None
    room_id: str | None = None

    @property
    def kwargs(self) -> dict[str, Any]:
        """The owner as the manager's keyword arguments (``user_id``, ``room_id``)."""
        return {"user_id": self.user_id, "room_id": self.room_id}


def error_result(error: BaseException, conversation_id: str | None = None) -> CallToolResult:
    """A tool error with the API's stable code: the text for the model, the structured content for code."""
    found = api_error_for(error, conversation_id=conversation_id)
    out = ErrorOut(code=found.code, message=found.message)
    return CallToolResult(
        content=[TextContent(type="text", text=f"{out.code}: {out.message}")],
        structured_content={"error": out.model_dump(mode="json")},
        is_error=True,
    )


def success(result: BaseModel) -> CallToolResult:
    """The answer as structured content (checked against the tool's output schema) and the same JSON as text."""
    return CallToolResult(
        content=[TextContent(type="text", text=result.model_dump_json())],
        structured_content=result.model_dump(mode="json"),
    )


def collected_keys(definition: FSMDefinition) -> dict[str, KeyOut]:
    """The declared keys with the JSON Schema of their values, and the keys states and conditions need.

    A key needed but not declared has no type: the definition promises nothing about its value.
    """
    needed: set[str] = set()
    for state in definition.states.values():
        needed.update(state.required_context_keys or ())
        for transition in state.transitions:
            for condition in transition.conditions or ():
                needed.update(condition.requires_context_keys or ())
    keys: dict[str, KeyOut] = {}
    for name, declaration in (definition.context_keys or {}).items():
        keys[name] = KeyOut(
            type=declaration.type,
            description=declaration.description,
            json_schema=key_json_schema(declaration) or {"type": declaration.type},
            sensitive=declaration.sensitive,
            required=name in needed,
        )
    for name in sorted(needed - keys.keys()):
        keys[name] = KeyOut(type=None, json_schema={}, required=True)
    return keys


class ConversationTools:
    """The five tools, each answering a ``CallToolResult``: structured content, or a typed tool error."""

    def __init__(self, manager: FSMManager, registry: DefinitionRegistry, tenant: Tenant) -> None:
        self.manager = manager
        self.registry = registry
        self.tenant = tenant
        self._tasks: set[asyncio.Task[BaseModel]] = set()

    async def answer(self, work: Awaitable[BaseModel], conversation_id: str | None = None) -> CallToolResult:
        """Run ``work`` in a task of its own (a cancelled call leaves the turn to land) and answer with its result."""
        task: asyncio.Task[BaseModel] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        try:
            return success(await asyncio.shield(task))
        except Exception as exc:  # noqa: BLE001 - every failure is a tool error, never a traceback to the agent
            return error_result(exc, conversation_id)

    def _finished(self, task: asyncio.Task[BaseModel]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a turn whose caller went away does not fail as "never retrieved"

    def _served(self, definition_id: str) -> ServedDefinition:
        try:
            return self.registry.get(definition_id)
        except DefinitionNotFoundError:
            raise unknown_definition(definition_id, self.registry.by_id, listed_by="list_definitions") from None

    async def _data(self, conversation_id: str) -> tuple[Any, dict[str, Any]]:
        """The conversation and its values as people may see them (sensitive keys masked)."""
        instance = await self.manager.aget_instance(conversation_id, **self.tenant.kwargs)
        definition = await self.manager.aget_definition(conversation_id, **self.tenant.kwargs)
        return instance, masked(definition, instance.context.data)

    async def list_definitions(self) -> DefinitionsOut:
        listed = []
        for served in self.registry.by_id.values():
            definition = await served.load()
            listed.append(
                DefinitionOut(
                    id=served.id,
                    name=definition.name,
                    description=definition.description,
                    initial_state=definition.initial_state,
                    states=list(definition.states),
                    languages=list(definition.languages or ()),
                    keys=collected_keys(definition),
                )
            )
        return DefinitionsOut(definitions=listed)

    async def start_conversation(
        self, definition: str, context: Mapping[str, Any] | None, language: str | None
    ) -> StartedOut:
        served = self._served(definition)
        conversation_id, opening = await self.manager.astart_conversation(
            served.location, context, language=language, **self.tenant.kwargs
        )
        instance, data = await self._data(conversation_id)
        return StartedOut(
            conversation_id=conversation_id,
            definition=served.id,
            opening=opening,
            state=instance.current_state,
            ended=instance.ended,
            data=data,
        )

    async def send_message(self, conversation_id: str, message: str, message_id: str | None) -> TurnOut:
        check_id(conversation_id)
        outcome = await self.manager.aprocess_turn(conversation_id, message, message_id, **self.tenant.kwargs)
        instance, data = await self._data(conversation_id)
        replayed = outcome.record is None  # a message_id answered before: where it left things is the record's
        return TurnOut(
            conversation_id=conversation_id,
            reply=outcome.reply,
            state=instance.current_state if replayed else outcome.state,
            ended=instance.ended if replayed else outcome.ended,
            data=data,
            mode="human" if instance.mode == "human" else "bot",
            duplicate=replayed and message_id is not None,
        )

    async def get_state(self, conversation_id: str, recent: int) -> StateOut:
        check_id(conversation_id)
        instance, data = await self._data(conversation_id)
        history = await self.manager.aget_conversation_history(conversation_id, **self.tenant.kwargs)
        shown = history[-recent:] if recent else []
        return StateOut(
            conversation_id=conversation_id,
            definition=self.registry.id_for(instance.root_fsm_id),
            state=instance.current_state,
            status=instance.status,
            ended=instance.ended,
            turn_count=instance.turn_count,
            stack=instance.stack,
            mode="human" if instance.mode == "human" else "bot",
            data=data,
            transcript=[TranscriptMessage(role=str(m["role"]), content=str(m["text"])) for m in shown],
        )

    async def explain(self, conversation_id: str, turn: int) -> ExplainOut:
        check_id(conversation_id)
        record = await self.manager.aexplain(conversation_id, turn, **self.tenant.kwargs)
        return ExplainOut(conversation_id=conversation_id, turn=record.index, record=record.model_dump(mode="json"))


__all__ = ["ConversationTools", "Tenant", "collected_keys", "error_result", "success"]
