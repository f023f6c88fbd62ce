"""Actions a state declares: backend calls the engine makes, never the model.

A state says *which* registered function runs *when* (on entering the state, on leaving it, or once the
values it needs have been collected), which context values it receives and where its results go. The
application registers the function under that name (``manager.actions.register``). The model can only
supply the data that triggers an action; whether and when it runs is the engine's decision, as for
transitions, and its results are application writes that the same turn's guards already see.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

ActionWhen = Literal["enter", "exit", "collected"]

ON_ERROR_FAIL = "fail"
"""``on_error: fail``: the turn raises ``ActionError`` and nothing of it is saved."""
ON_ERROR_HANDOFF = "handoff"
"""``on_error: handoff``: the conversation stays where it is and is handed to a person."""

MAX_TIMEOUT_S = 300.0
DEFAULT_TIMEOUT_S = 10.0

# a registered function's name, or mcp:SERVER/TOOL (a tool of a configured MCP server: the MCP spec's tool names)
_NAME = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_.:-]{0,99}|mcp:[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}/[A-Za-z0-9._-]{1,128})$")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")


MCP_PREFIX = "mcp:"


def mcp_tool_of(call: str) -> tuple[str, str] | None:
    """``mcp:SERVER/TOOL`` → (server, tool): an action that calls a tool of a configured MCP server. None for any
    other name (a function the application registered)."""
    if not call.startswith(MCP_PREFIX):
        return None
    server, slash, tool = call[len(MCP_PREFIX) :].partition("/")
    return (server, tool) if server and slash and tool else None


def _seconds(value: Any) -> Any:
    # JSON Schema's number: 5 and 2.5, never "5" or true (pydantic's lax float would take both)
    if isinstance(value, (bool, str)):
        raise ValueError("must be a number of seconds")
    return value


class ActionDeclaration(BaseModel):
    """One backend call a state makes, and what happens with its result.

    ``inputs`` maps the function's argument names to context paths; ``outputs`` maps context paths to
    fields of the function's result (the same direction as a sub-flow's ``outputs``: *this flow's key ←
    their field*).
    """

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        validate_default=False,
        # _collected_needs_inputs, for editors and other JSON Schema validators
        json_schema_extra={
            "anyOf": [
                {"required": ["when"], "properties": {"when": {"enum": ["enter", "exit"]}}},
                {"required": ["inputs"], "properties": {"inputs": {"type": "object", "minProperties": 1}}},
            ]
        },
    )

    call: str = Field(
        description=(
            "Name the application registered the function under (manager.actions.register), or mcp:SERVER/TOOL: "
            "tool TOOL of the MCP server the application's MCP config names SERVER (--mcp CONFIG)."
        ),
        json_schema_extra={"pattern": _NAME.pattern},
    )
    when: ActionWhen = Field(
        default="collected",
        description=(
            "enter: when a turn enters this state; exit: when a turn leaves it; collected (default): while the "
            "conversation is in this state, once every input has a value, and again whenever an input's value "
            "changes (a correction). An action runs only when all its inputs have values."
        ),
    )
    inputs: dict[str, str] | None = Field(
        default=None,
        description="Argument name ← context path (dot paths allowed): the values the function is called with.",
        json_schema_extra={"propertyNames": {"pattern": _FIELD.pattern}},
    )
    outputs: dict[str, str] | None = Field(
        default=None,
        description=(
            "Context path ← field of the function's result. Written as the application (protected keys allowed, "
            "declared keys validated), before the engine decides the turn's transition."
        ),
    )
    on_error: str = Field(
        default=ON_ERROR_FAIL,
        description=(
            "What a failure (an exception, a timeout, a result without a declared output field, an output that "
            "fails its declaration) does: 'fail' (default) raises ActionError and saves nothing of the turn; "
            "'handoff' hands the conversation to a person; a state id moves the conversation there."
        ),
    )
    timeout_s: Annotated[float, BeforeValidator(_seconds)] = Field(
        default=DEFAULT_TIMEOUT_S,
        gt=0,
        le=MAX_TIMEOUT_S,
        description=f"Seconds the call may take before it counts as failed (default {DEFAULT_TIMEOUT_S:g}).",
    )
    description: str | None = Field(default=None, description="What the call does, for people reading the file.")

    @field_validator("call")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                "an action name is a letter or underscore, then letters, digits or _ . : - (at most 100 characters), "
                "or mcp:SERVER/TOOL for a tool of an MCP server"
            )
        return value

    @field_validator("inputs")
    @classmethod
    def _argument_names(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name in value or {}:
            if not _FIELD.match(name):
                raise ValueError(f"input {name!r} is not a Python argument name")
        return value

    @model_validator(mode="after")
    def _collected_needs_inputs(self) -> ActionDeclaration:
        if self.when == "collected" and not self.inputs:
            raise ValueError(
                "when: collected runs once the inputs have values, so it needs inputs (or say when: enter)"
            )
        return self

    @property
    def input_paths(self) -> list[str]:
        return list((self.inputs or {}).values())

    @property
    def output_paths(self) -> list[str]:
        return list(self.outputs or {})


__all__ = [
    "ActionDeclaration",
    "ActionWhen",
    "DEFAULT_TIMEOUT_S",
    "MAX_TIMEOUT_S",
    "MCP_PREFIX",
    "ON_ERROR_FAIL",
    "ON_ERROR_HANDOFF",
    "mcp_tool_of",
]
