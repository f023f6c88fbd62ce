"""``fsm-lint`` and ``llm-fsm lint``: definition files checked, findings printed as text or JSON."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from llm_fsm.cli._app import (
    EXIT_CLEAN,
    EXIT_FINDINGS,
    EXIT_UNREADABLE,
    LINT_SUFFIXES,
    SKIP_SUFFIXES,
    GuardedCommand,
    _fail,
    main,
    recordings_note,
)
from llm_fsm.errors import DefinitionError, MCPConfigError, UsageError

# --- lint ----------------------------------------------------------------------------


def iter_definition_files(paths: Iterable[str], *, skipped: list[str] | None = None) -> Iterator[tuple[str, bool]]:
    """(path, exists) for every file to lint: files as given, directories searched recursively
    for *.json, *.yaml and *.yml (conversation scripts ``*.conv.yaml`` skipped), sorted.

    Recordings written by ``llm-fsm test --record`` are JSON but not definitions:
    they are left out, and appended to ``skipped`` when it is given. MCP config files are left out too.
    """
    from llm_fsm.scripting._files import is_mcp_config_file, is_recording_file

    def wanted(p: Path) -> bool:
        if is_recording_file(p):
            if skipped is not None:
                skipped.append(str(p))
            return False
        return not is_mcp_config_file(p)  # the servers definitions call (--mcp CONFIG), not a definition

    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and p.name.lower().endswith(LINT_SUFFIXES) and not p.name.lower().endswith(SKIP_SUFFIXES)
            )
            for p in found:
                if wanted(p):
                    yield str(p), True
        elif path.is_file() and not wanted(path):
            continue
        else:
            yield raw, path.exists()


def lint_paths(
    paths: Sequence[str],
    *,
    max_bytes: int | None = None,
    skipped: list[str] | None = None,
    actions: Mapping[str, Callable[..., Any]] | None = None,
    roots: list[tuple[str, Any]] | None = None,
    retrievers: Collection[str] | None = None,
    mcp_tools: Mapping[str, Any] | None = None,
) -> tuple[list[Any], int, int]:
    """Lint every file, and the sub-flows each one declares; returns (diagnostics, files checked, unreadable files).

    ``actions`` (name → function, from ``--actions``) checks the names states call and the inputs they declare;
    ``retrievers`` (the names registered, from ``--retrievers``) the retrievers states name; ``mcp_tools`` (what
    the servers of ``--mcp CONFIG`` list) the ``mcp:SERVER/TOOL`` calls.

    A sub-flow finding belongs to the file that declares the flow, so when a
    parent and its sub-flow are both linted it is found twice: it is printed once.
    Recordings are not linted; their paths are appended to ``skipped``. ``roots``, when given, receives
    (file, definition) for every file the engine could load, and ``roots.resolver`` is not needed: the sub-flow
    resolver is appended last as ``("", resolver)`` so the prover loads sub-flows the same way.
    """
    from llm_fsm.lint._flows import lint_flows
    from llm_fsm.lint._linter import lint_document
    from llm_fsm.lint._rules import make_diagnostic
    from llm_fsm.loading import DEFAULT_MAX_BYTES, read_document

    files = list(iter_definition_files(paths, skipped=skipped))
    flow_files = _FlowFiles({_real(name): name for name, exists in files if exists}, max_bytes or DEFAULT_MAX_BYTES)
    diagnostics: list[Any] = []
    seen: set[tuple[Any, ...]] = set()
    checked = unreadable = 0
    for name, exists in files:
        checked += 1
        try:
            if not exists:
                raise DefinitionError("file not found", file=name)
            doc = read_document(name, max_bytes=max_bytes or DEFAULT_MAX_BYTES)
        except DefinitionError as exc:
            unreadable += 1
            diagnostics.append(
                make_diagnostic(
                    "unreadable-input",
                    exc.message,
                    file=name,
                    path=exc.path or "$",
                    line=exc.line,
                    hint=_unreadable_hint(exc.message),
                )
            )
            continue
        result = lint_document(doc, actions=actions, retrievers=retrievers, mcp_tools=mcp_tools)
        diagnostics.extend(result.diagnostics)
        if result.definition is None:
            continue
        loadable = not any(d.blocks_loading or d.code == "FSM099" for d in result.diagnostics)
        root = flow_files.root(doc, result.definition, loadable=loadable)
        if roots is not None and loadable:
            roots.append((name, root))
        for diagnostic in lint_flows(root, flow_files, line_for=flow_files.line_for):
            key = (
                diagnostic.code,
                _real(diagnostic.file) if diagnostic.file else None,
                diagnostic.path,
                diagnostic.message,
            )
            if key not in seen:
                seen.add(key)
                diagnostics.append(diagnostic)
    if roots is not None:
        roots.append(("", flow_files))
    return diagnostics, checked, unreadable


def _real(name: str) -> str:
    return os.path.realpath(name)


class _FlowFiles:
    """fsm-lint's sub-flow resolver: looks where the engine looks, loads each file once per run.

    Files are keyed by their real path and named as the user named them on the
    command line when they were among the files given (so a finding reads the
    same whichever root led to it), else relative to the working directory.
    A file that fails to load is remembered as its error.
    """

    def __init__(self, names: dict[str, str], max_bytes: int) -> None:
        from llm_fsm.definition._documents import ParsedDocument
        from llm_fsm.definition._model import FSMDefinition

        self.names = names
        self.max_bytes = max_bytes
        self.loaded: dict[str, FSMDefinition | DefinitionError] = {}
        self.documents: dict[str, ParsedDocument] = {}

    def root(self, doc: Any, definition: Any, *, loadable: bool) -> Any:
        """The definition to walk from; a loadable root is shared with later references to its file."""
        from llm_fsm.loading import attach_source

        real = _real(doc.file)
        cached = self.loaded.get(real)
        if cached is not None and not isinstance(cached, DefinitionError):
            return cached
        attach_source(definition, doc.file)
        self.documents[doc.file] = doc
        if loadable:  # the engine could not load a file with blocking errors; references to it must say so
            self.loaded[real] = definition
        return definition

    def __call__(self, declaration: Any, parent: Any) -> Any:
        from llm_fsm.loading import (
            definition_from_document,
            read_document,
            resolve_definition_path,
            resolve_flow_reference,
        )

        path = resolve_definition_path(resolve_flow_reference(declaration.definition, parent.source))
        real = _real(str(path))
        cached = self.loaded.get(real)
        if isinstance(cached, DefinitionError):
            raise cached
        if cached is not None:
            return cached
        name = self.names.get(real) or _display_name(str(path))
        try:
            doc = read_document(name, max_bytes=self.max_bytes)
            definition = definition_from_document(doc)
        except DefinitionError as exc:
            self.loaded[real] = exc
            raise
        self.loaded[real] = definition
        self.documents[name] = doc
        return definition

    def line_for(self, definition: Any, parts: Any) -> int | None:
        doc = self.documents.get(definition.source or "")
        return doc.line_for(parts) if doc is not None else None


def _display_name(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if relative.startswith("..") else relative


def _unreadable_hint(message: str) -> str | None:
    if "UTF-8" in message:
        return "re-save the file with UTF-8 encoding"
    if "limit" in message:
        return "definitions are small; split the file or raise --max-bytes"
    if "objects and arrays" in message:
        return "a definition has far fewer; if this one is real, raise --max-bytes (one per 10 bytes of it)"
    if message.startswith("file is empty"):
        return "a definition is one object with name, description, initial_state and states"
    if "alias" in message:
        return "YAML anchors and aliases are refused to prevent alias bombs"
    return None


def _previous_version(path: str, max_bytes: int | None) -> Any:
    """``--previous``: the version a migrations block moves conversations from, loaded as the engine would."""
    from llm_fsm.loading import DEFAULT_MAX_BYTES, definition_from_document, read_document

    return definition_from_document(read_document(path, max_bytes=max_bytes or DEFAULT_MAX_BYTES))


def format_text(diagnostic: Any) -> str:
    where = diagnostic.file or "<data>"
    if diagnostic.line:
        where += f":{diagnostic.line}"
    text = (
        f"{where}: {diagnostic.severity.value} {diagnostic.code} {diagnostic.name} "
        f"at {diagnostic.path}: {diagnostic.message}"
    )
    if diagnostic.hint:
        text += f"\n    hint: {diagnostic.hint}"
    return text


def _registry(spec: str) -> dict[str, Callable[..., Any]]:
    """``--actions module:registry`` (or ``file.py:registry``) as name → function; UsageError when it cannot load."""
    from llm_fsm.actions import load_registry

    registry = load_registry(spec)
    return {name: function for name in registry if (function := registry.get(name)) is not None}


def _mcp_tools(config: str) -> Any:
    """``--mcp CONFIG``: each configured server's tools, asked all at once; a server that cannot be asked in time
    is reported (FSM080), never waited on without end."""
    from llm_fsm.mcp import MCPTools

    with MCPTools(config) as tools:
        return tools.tool_schemas()


@dataclass(frozen=True)
class ProveOptions:
    """``--prove`` and its options; ``enabled`` False is plain lint."""

    enabled: bool = False
    counterexamples: str | None = None
    max_configurations: int = 20_000


def _lint_command_body(
    paths: Sequence[str],
    output_format: str,
    strict: bool,
    max_bytes: int | None,
    actions: str | None = None,
    proving: ProveOptions = ProveOptions(),
    previous: str | None = None,
    retrievers: str | None = None,
    mcp: str | None = None,
) -> int:
    from llm_fsm.cli._prove import as_json, echo_text, prove_roots
    from llm_fsm.lint._rules import Severity

    old = None
    if previous is not None:
        if len(paths) != 1 or Path(paths[0]).is_dir():
            _fail("--previous compares one definition file with its previous version: give exactly one PATH")
            return EXIT_UNREADABLE
        try:
            old = _previous_version(previous, max_bytes)
        except DefinitionError as exc:
            _fail(f"--previous: {exc}")
            return EXIT_UNREADABLE

    functions = None
    names: list[str] | None = None
    try:
        if actions is not None:
            functions = _registry(actions)
        if retrievers is not None:
            from llm_fsm.runtime._retrievers import load_retrievers

            names = list(load_retrievers(retrievers))
        schemas = _mcp_tools(mcp) if mcp is not None else None
    except (UsageError, MCPConfigError) as exc:
        _fail(str(exc).splitlines()[0])
        return EXIT_UNREADABLE
    skipped: list[str] = []
    roots: list[tuple[str, Any]] | None = [] if proving.enabled or old is not None else None
    diagnostics, checked, unreadable = lint_paths(
        paths, max_bytes=max_bytes, skipped=skipped, actions=functions, roots=roots, retrievers=names, mcp_tools=schemas
    )
    proved = []
    if roots is not None:
        _, flow_files = roots.pop()
        if old is not None:
            from llm_fsm.lint._checks_migrations import lint_migrations

            for _, root in roots:
                diagnostics.extend(lint_migrations(root, old, line_for=flow_files.line_for))
        if proving.enabled:
            proved = prove_roots(
                roots,
                flow_files,
                diagnostics,
                max_configurations=proving.max_configurations,
                counterexamples=proving.counterexamples,
            )
    notes = recordings_note(skipped)
    if not checked:  # only empty directories: almost certainly a wrong path
        for note in notes:
            click.echo(f"note: {note}", err=True)
        _fail(f"no definition files (*.json, *.yaml, *.yml) found in: {', '.join(paths)}")
        return EXIT_UNREADABLE
    counts = {s: sum(1 for d in diagnostics if d.severity is s) for s in Severity}
    disproved = sum(1 for p in proved for r in p.report.properties.values() if r.status == "failed")
    if unreadable:
        status = EXIT_UNREADABLE
    elif counts[Severity.ERROR] or (strict and counts[Severity.WARNING]) or any(p.report.failed for p in proved):
        status = EXIT_FINDINGS
    else:
        status = EXIT_CLEAN
    summary = {
        "files": checked,
        "unreadable": unreadable,
        "errors": counts[Severity.ERROR],
        "warnings": counts[Severity.WARNING],
        "info": counts[Severity.INFO],
        "skipped": len(skipped),
        "exit_code": status,
    }
    if proving.enabled:
        summary["disproved"] = disproved
    if output_format == "json":
        document: dict[str, Any] = {
            "diagnostics": [d.to_dict() for d in diagnostics],
            "skipped": skipped,
            "summary": summary,
        }
        if proving.enabled:
            document["proofs"] = [as_json(p) for p in proved]
        click.echo(json.dumps(document, indent=2))
    else:
        for note in notes:
            click.echo(f"note: {note}")
        for diagnostic in diagnostics:
            click.echo(format_text(diagnostic))
        echo_text(proved, format_text)
        click.echo(
            f"{checked} file(s) checked: {summary['errors']} error(s), {summary['warnings']} warning(s)"
            + (f", {summary['info']} info" if summary["info"] else "")
            + (f", {unreadable} unreadable" if unreadable else "")
            + (f", {disproved} propert{'y' if disproved == 1 else 'ies'} disproved" if disproved else "")
        )
    return status


_LINT_HELP = """Check FSM definition files: schema, graph, conditions.

    PATHS are files or directories; directories are searched recursively for
    *.json, *.yaml and *.yml (conversation scripts *.conv.yaml and recordings
    of `llm-fsm test --record` are skipped, with a note).

    Exit status: 0 clean, 1 errors found (or warnings with --strict, or a
    property --prove disproves), 2 usage error or a file that cannot be read
    or parsed.

    \b
    Example:
        {prog} definitions/
        {prog} --strict --format json booking.yaml
        {prog} --actions myapp.actions:registry definitions/
        {prog} --retrievers myapp.search:retrievers definitions/
        {prog} --mcp mcp.json definitions/
        {prog} --prove --counterexamples out/ booking.yaml
        {prog} --previous booking.v1.yaml booking.yaml
"""


def _lint_options(func: Any) -> Any:
    func = click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=True))(func)
    func = click.option(
        "--format",
        "output_format",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Output format.",
    )(func)
    func = click.option("--strict", is_flag=True, help="Warnings fail too (exit 1).")(func)
    func = click.option(
        "--prove",
        is_flag=True,
        help="Also prove each definition against every model output (no_trap, progress, no_model_gate, "
        "flows_return; docs/prove.md): exit 1 when a property fails.",
    )(func)
    func = click.option(
        "--counterexamples",
        metavar="DIR",
        type=click.Path(file_okay=False),
        default=None,
        help="With --prove: write each failed property's path as a conversation script (*.conv.yaml) into DIR.",
    )(func)
    func = click.option(
        "--max-configurations",
        type=click.IntRange(min=1),
        default=20_000,
        show_default=True,
        help="With --prove: configurations explored before a property is called unknown.",
    )(func)
    func = click.option(
        "--actions",
        metavar="MODULE:REGISTRY",
        default=None,
        help="The application's ActionRegistry (module:attr or file.py:attr): names states call must be registered "
        "and the functions must take the declared inputs.",
    )(func)
    func = click.option(
        "--retrievers",
        metavar="MODULE:REGISTRY",
        default=None,
        help="The application's RetrieverRegistry, or dict of retrievers (module:attr or file.py:attr): names states "
        "retrieve from must be registered (FSM077).",
    )(func)
    func = click.option(
        "--mcp",
        metavar="CONFIG",
        default=None,
        help='The MCP config ({"mcpServers": {...}}): each server is asked for its tools, and mcp:SERVER/TOOL calls '
        "are checked against them and their input schemas (FSM078-FSM080).",
    )(func)
    func = click.option(
        "--previous",
        metavar="OLD",
        type=click.Path(dir_okay=False),
        default=None,
        help="The previous version of the one definition given: its migrations block must rename states, keys and "
        "flows OLD has, and every state of OLD must be kept or mapped (FSM051, FSM052).",
    )(func)
    func = click.option(
        "--max-bytes",
        type=click.IntRange(min=1),
        default=None,
        help="Refuse files larger than this (default 5 MB), or holding more objects and arrays (in YAML, values) than "
        "a tenth of it.",
    )(func)
    return func


@main.command("lint", help=_LINT_HELP.format(prog="llm-fsm lint"))
@_lint_options
@click.pass_context
def lint_command(
    ctx: click.Context,
    paths: tuple[str, ...],
    output_format: str,
    strict: bool,
    max_bytes: int | None,
    actions: str | None,
    prove: bool,
    counterexamples: str | None,
    max_configurations: int,
    previous: str | None,
    retrievers: str | None,
    mcp: str | None,
) -> None:
    proving = ProveOptions(prove or counterexamples is not None, counterexamples, max_configurations)
    ctx.exit(_lint_command_body(paths, output_format, strict, max_bytes, actions, proving, previous, retrievers, mcp))


@click.command(
    "fsm-lint",
    cls=GuardedCommand,
    help=_LINT_HELP.format(prog="fsm-lint"),
    context_settings={"help_option_names": ["-h", "--help"]},
)
@_lint_options
@click.pass_context
def fsm_lint(
    ctx: click.Context,
    paths: tuple[str, ...],
    output_format: str,
    strict: bool,
    max_bytes: int | None,
    actions: str | None,
    prove: bool,
    counterexamples: str | None,
    max_configurations: int,
    previous: str | None,
    retrievers: str | None,
    mcp: str | None,
) -> None:
    proving = ProveOptions(prove or counterexamples is not None, counterexamples, max_configurations)
    ctx.exit(_lint_command_body(paths, output_format, strict, max_bytes, actions, proving, previous, retrievers, mcp))


def lint_main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``fsm-lint`` console script."""
    fsm_lint.main(args=list(argv) if argv is not None else None, prog_name="fsm-lint")
