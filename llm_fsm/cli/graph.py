"""``llm-fsm graph``: a definition drawn as Mermaid, DOT or text; with ``--prove``, the prover's statuses on it."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from llm_fsm.cli._app import EXIT_UNREADABLE, GuardedCommand, _fail

# --- graph ---------------------------------------------------------------------------


@click.command("graph", cls=GuardedCommand)
@click.argument("definition")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["mermaid", "dot", "text"]),
    default="mermaid",
    show_default=True,
    help="Diagram format.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write to this file instead of standard output.",
)
@click.option(
    "--prove",
    is_flag=True,
    help=(
        "Prove the definition first (as fsm-lint --prove does) and mark each state with its properties' "
        "statuses: red where one failed, amber where one is unknown, green where all are proved."
    ),
)
@click.pass_context
def graph_command(ctx: click.Context, definition: str, output_format: str, output: str | None, prove: bool) -> None:
    """Draw a definition's states and transitions.

    DEFINITION is a file or an id looked up in ./, ./definitions and
    $LLM_FSM_DEFINITIONS. Edges show the transition, its conditions and its
    priority; the initial state and terminal states are marked, and so are
    confirmation steps (where yes and no go). Declared sub-flows are drawn as
    their own nodes, entered by start_flow from the states that may start them
    (a call flow returns there). A file that parses but does not validate is
    still drawn (undeclared targets dashed).

    \b
    Example:
        llm-fsm graph definitions/coffee_order.yaml --format mermaid
        llm-fsm graph coffee_order --format dot | dot -Tsvg > coffee.svg
        llm-fsm graph definitions/coffee_order.yaml --format text --prove
    """
    from llm_fsm.definition._graph import graph_from_document
    from llm_fsm.loading import read_document, resolve_definition_path
    from llm_fsm.renderers import extras_from_document, render

    doc = read_document(resolve_definition_path(definition))  # a DefinitionError exits 2 through the guard
    if not isinstance(doc.data, dict):
        _fail(f"{definition}: the top level must be an object")
        ctx.exit(EXIT_UNREADABLE)
    extras = extras_from_document(doc.data)
    if prove:
        extras = dataclasses.replace(extras, proof=_proof(doc))
    text = render(graph_from_document(doc.data), output_format, extras)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


def _proof(doc: Any) -> Any:
    """The prover's statuses for the diagram; sub-flows found as fsm-lint finds them. A file the engine could not
    load is an error here (exit 2): only a loadable definition can be proved."""
    from llm_fsm.cli.lint import _FlowFiles, _real
    from llm_fsm.lint import prove
    from llm_fsm.loading import DEFAULT_MAX_BYTES, definition_from_document
    from llm_fsm.renderers import Proof

    flows = _FlowFiles({_real(doc.file): doc.file}, DEFAULT_MAX_BYTES)
    return Proof.of_report(prove(flows.root(doc, definition_from_document(doc), loadable=True), resolve=flows))
