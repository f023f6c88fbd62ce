"""The single-document linter: every check of one definition file, in order, with positions."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from llm_fsm.definition._documents import ParsedDocument, paused_gc
from llm_fsm.definition._model import (
    FSMDefinition,
)
from llm_fsm.lint import (
    _checks_actions,
    _checks_declarations,
    _checks_document,
    _checks_global,
    _checks_graph,
    _checks_keys,
    _checks_languages,
    _checks_logic,
    _checks_mcp,
    _checks_migrations,
    _checks_retrieval,
    _checks_timers,
    _checks_wording,
)
from llm_fsm.lint._checks_mcp import ToolSchemas
from llm_fsm.lint._rules import Diagnostic, LintResult
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import (
    _json_type,
    _logic_subpath,
)

logger = logging.getLogger(__name__)

CHECKS: tuple[Callable[[LintRun], None], ...] = (
    _checks_document.duplicate_keys,
    _checks_document.schema,
    _checks_document.version,
    _checks_document.unknown_fields,
    _checks_graph.state_ids,
    _checks_graph.targets,
    _checks_global.scope,
    _checks_graph.graph,
    _checks_global.usefulness,
    _checks_graph.transitions,
    _checks_logic.logic,
    _checks_logic.context_keys,
    _checks_keys.comparisons,
    _checks_declarations.required_keys_writable,
    _checks_declarations.declared_keys_used,
    _checks_declarations.undeclared_keys,
    _checks_graph.confirmations,
    _checks_actions.inputs_provided,
    _checks_actions.outputs_read,
    _checks_actions.on_error,
    _checks_actions.outputs_not_collected,
    _checks_actions.never_run,
    _checks_actions.registered,
    _checks_migrations.migrations,
    _checks_wording.wording,
    _checks_languages.languages,
    _checks_timers.timers,
    _checks_retrieval.budget,
    _checks_retrieval.on_error,
    _checks_retrieval.registered,
    _checks_mcp.tools,
)
"""Every check, in the order findings depend on (the schema check builds the model later checks read).

A new check is a function of ``LintRun`` in the module of its concern, added here and given a code in ``_rules``."""


def _run_checks(run: LintRun) -> None:
    """Run every check; a check that raises becomes one FSM099 and the others still run."""
    if not isinstance(run.data, Mapping):
        run.add(
            "schema-violation",
            (),
            f"the top level must be an object (got {_json_type(run.data)})",
            "a definition is one object with name, description, initial_state and states",
        )
        return
    for check in CHECKS:
        try:
            check(run)
        except Exception as exc:  # a bug in one check must not hide the others' findings
            logger.exception("lint check %s failed", check.__name__)
            run.add("internal-error", (), f"{check.__name__} failed: {type(exc).__name__}: {exc}")
    for parts, error in run.model_logic_errors:
        if parts not in run.logic_reported:
            run.add("invalid-logic", (*parts, "logic"), error.message, path=_logic_subpath(parts, error.path))


def _sort_key(d: Diagnostic) -> tuple[Any, ...]:
    return (d.line is None, d.line or 0, d.code, d.path)


def lint_document(
    doc: ParsedDocument,
    *,
    actions: Mapping[str, Callable[..., Any]] | None = None,
    retrievers: Collection[str] | None = None,
    mcp_tools: ToolSchemas | None = None,
) -> LintResult:
    """Every diagnostic for one parsed document, sorted by line (at most ``MAX_FINDINGS_PER_RULE`` of one code,
    then one per code that had more, saying how many). Never raises.

    ``actions``: the application's functions by the names states call them (``fsm-lint --actions`` passes its
    registry's); with it, names that are not registered and inputs the functions do not take are found too.
    ``retrievers``: the names the application registered retrievers under; with them, unregistered ones are found.
    ``mcp_tools``: what ``MCPTools.tool_schemas`` found (``fsm-lint --mcp``); with it, ``mcp:SERVER/TOOL`` calls are
    checked against the servers' tools and input schemas."""
    run = LintRun(doc, registry=actions, retrievers=retrievers, mcp_tools=mcp_tools)
    with paused_gc():  # the model of a large file is a large tree of objects (see paused_gc)
        _run_checks(run)
    diagnostics = (*sorted(run.out, key=_sort_key), *run.not_shown())
    return LintResult(diagnostics=diagnostics, definition=run.definition)


def lint_data(
    data: Any,
    *,
    file: str | None = None,
    actions: Mapping[str, Callable[..., Any]] | None = None,
    retrievers: Collection[str] | None = None,
    mcp_tools: ToolSchemas | None = None,
) -> LintResult:
    """Lint a document that exists only as data (no line numbers)."""
    doc = ParsedDocument(data=data, file=file)
    return lint_document(doc, actions=actions, retrievers=retrievers, mcp_tools=mcp_tools)


def lint_definition(
    definition: FSMDefinition,
    *,
    file: str | None = None,
    actions: Mapping[str, Callable[..., Any]] | None = None,
    retrievers: Collection[str] | None = None,
    mcp_tools: ToolSchemas | None = None,
) -> list[Diagnostic]:
    """Lint an already-loaded definition (its unknown fields included)."""
    data = definition.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return list(lint_data(data, file=file, actions=actions, retrievers=retrievers, mcp_tools=mcp_tools).diagnostics)
