"""Checks of actions that call MCP servers' tools (FSM078-FSM080), against what the servers list.

``fsm-lint --mcp CONFIG`` asks every configured server for its tools and hands their input schemas here as data
(``lint_document(mcp_tools=...)``): lint itself opens no connection. A tool the server does not list, an input
its schema requires that the action never gives, an input it does not take, or a context key of the wrong JSON
type would each fail the call at run time — in the middle of a conversation, where only ``on_error`` can help.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from llm_fsm.definition._actions import mcp_tool_of
from llm_fsm.definition._documents import Path
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import _did_you_mean

ToolSchemas = Mapping[str, Mapping[str, Mapping[str, Any]] | str]
"""Server name → its tools' input schemas by tool name, or why it could not be asked (``MCPTools.tool_schemas``)."""

#: a value of each declared key type, to ask jsonschema whether a schema's type takes it
_EXAMPLES: dict[str, Any] = {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}}


def _calls(run: LintRun) -> Iterable[tuple[Path, Mapping[str, Any], str, str]]:
    """(path, declaration, server, tool) of every action calling ``mcp:SERVER/TOOL``."""
    for parts, _, action in run.actions():
        call = action.get("call")
        found = mcp_tool_of(call) if isinstance(call, str) else None
        if found is not None:
            yield parts, action, *found


def tools(run: LintRun) -> None:
    """FSM078: the server is not configured or lists no such tool; FSM080: a server that could not be asked
    (one warning per server); FSM079: the declared inputs against the tool's input schema."""
    listed_by_server = run.mcp_tools
    if listed_by_server is None:
        return
    unreachable: set[str] = set()
    for parts, action, server, tool in _calls(run):
        listed = listed_by_server.get(server)
        where = (*parts, "call")
        if listed is None:
            configured = ", ".join(sorted(listed_by_server)) or "none"
            run.add(
                "mcp-tool-unknown",
                where,
                f"no MCP server named {server!r} is in the MCP config (configured: {configured}); a conversation "
                "reaching this state would fail",
                functools.partial(_did_you_mean, server, sorted(listed_by_server)),
            )
        elif isinstance(listed, str):
            if server not in unreachable:
                unreachable.add(server)
                run.add(
                    "mcp-server-unreachable",
                    where,
                    f"MCP server {server!r} could not be asked for its tools: {listed}; the calls of its tools are not "
                    "checked",
                    "start the server (or fix its entry in the MCP config) and lint again",
                )
        elif tool not in listed:
            run.add(
                "mcp-tool-unknown",
                where,
                f"MCP server {server!r} lists no tool {tool!r}; a conversation reaching this state would fail",
                functools.partial(_tool_hint, tool, sorted(listed)),
            )
        else:
            _inputs(run, parts, action, f"{server}/{tool}", listed[tool])


def _tool_hint(tool: str, names: list[str]) -> str:
    return _did_you_mean(tool, names) or f"its tools: {', '.join(names) or 'none'}"


def _inputs(run: LintRun, parts: Path, action: Mapping[str, Any], tool: str, schema: Mapping[str, Any]) -> None:
    """FSM079: required properties never given, properties the schema does not allow, declared types it refuses."""
    given = action.get("inputs")
    inputs: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    for name in required if isinstance(required, list) else []:
        if isinstance(name, str) and name not in inputs:
            run.add(
                "mcp-inputs-mismatch",
                (*parts, "inputs"),
                f"tool {tool!r} requires input {name!r}, which this action never gives: every call would be refused",
                f"add {name}: <context path> to inputs",
            )
    closed = schema.get("additionalProperties") is False
    declarations = run.declarations()
    for name, context_path in inputs.items():
        prop = properties.get(name)
        if prop is None:
            if closed:
                run.add(
                    "mcp-inputs-mismatch",
                    (*parts, "inputs", name),
                    f"tool {tool!r} takes no input {name!r} (its schema allows only "
                    f"{', '.join(sorted(map(str, properties))) or 'none'}): every call would be refused",
                    functools.partial(_did_you_mean, str(name), [str(p) for p in properties]),
                )
            continue
        declared = declarations.get(context_path) if isinstance(context_path, str) else None
        wanted = _types(prop)
        if declared is None or not wanted or _accepts(wanted, _EXAMPLES[declared.type]):
            continue
        run.add(
            "mcp-inputs-mismatch",
            (*parts, "inputs", name),
            f"input {name!r} of tool {tool!r} reads {context_path!r}, declared {declared.type}, but the tool's schema "
            f"takes {' or '.join(wanted)}: every call would be refused",
            "map the input to a context key of the type the tool takes, or change the key's declared type",
        )


def _types(schema: Any) -> list[str]:
    """The JSON types a property schema takes: its ``type``, or its ``anyOf``/``oneOf`` branches'; [] if open."""
    if not isinstance(schema, Mapping):
        return []
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    branches = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(branches, list):
        found = [_types(branch) for branch in branches]
        if all(found):  # a branch without a type takes anything
            return [t for types in found for t in types]
    return []


def _accepts(types: list[str], example: Any) -> bool:
    # jsonschema's own type checker: "integer" takes 1.0, "number" takes 1 but not True, as validation will
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import UnknownType  # type: ignore[import-untyped]

    checker = Draft202012Validator.TYPE_CHECKER
    try:
        return any(checker.is_type(example, t) for t in types)
    except UnknownType:  # a type JSON Schema does not have: nothing to compare with
        return True
