"""Checks of a ``migrations:`` block: against the definition that carries it (FSM046–FSM050, every lint run) and
against the version it migrates from (FSM051, FSM052: ``fsm-lint NEW --previous OLD``, or ``lint_migrations``).

A mistake in a block is found before a migration strands conversations: a state renamed to one that does not
exist, a default its own declaration would refuse, a source the old version never had (so the state it meant is
left unmapped). Defaults are judged by the engine's own ``KeyPolicy``, as ``engine._migrate`` applies them.
"""

from __future__ import annotations

from collections.abc import Callable

from llm_fsm.definition._documents import Path, format_path
from llm_fsm.definition._migrations import Migrations, flow_names
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._values import KeyPolicy
from llm_fsm.lint._rules import Diagnostic, make_diagnostic
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import _did_you_mean

Emit = Callable[[str, Path, str, str], None]
"""(rule name, path inside the block, message, hint)."""

LineFinder = Callable[[FSMDefinition, Path], "int | None"]


def migrations(run: LintRun) -> None:
    """FSM046–FSM050: the block's targets exist in this definition, and its defaults pass their declarations."""
    definition = run.definition
    if definition is None or definition.migrations is None or run.partial:
        return
    check_block(
        definition,
        definition.migrations,
        lambda name, parts, message, hint: run.add(name, ("migrations", *parts), message, hint or None),
    )


def check_block(definition: FSMDefinition, block: Migrations, emit: Emit) -> None:
    """The block judged against ``definition``, the version it migrates to."""
    for old, target in block.states.items():
        if target not in definition.states:
            emit(
                "migration-unknown-state",
                ("states", old),
                f"migrations.states maps {old!r} to {target!r}, which this definition does not declare: "
                f"conversations in {old!r} would be stranded",
                _did_you_mean(target, definition.states) or "map it to a state this definition declares",
            )
    declared = bool(definition.context_keys)
    renamed_to: dict[str, str] = {}
    for old, target in block.keys.items():
        if target in renamed_to:
            emit(
                "migration-key-conflict",
                ("keys", old),
                f"{renamed_to[target]!r} and {old!r} are both renamed to {target!r}: a conversation holding both "
                "would keep only one of them",
                "rename each old key to a key of its own",
            )
        renamed_to.setdefault(target, old)
        if declared and not definition.is_declared_path(target):
            emit(
                "migration-undeclared-key",
                ("keys", old),
                f"migrations.keys renames {old!r} to {target!r}, which context_keys does not declare",
                _did_you_mean(target, definition.context_keys or ()) or "declare it, or rename to a declared key",
            )
    policy = KeyPolicy(definition)
    for key, value in block.defaults.items():
        if declared and not definition.is_declared_path(key):
            emit(
                "migration-undeclared-key",
                ("defaults", key),
                f"migrations.defaults gives {key!r}, which context_keys does not declare",
                _did_you_mean(key, definition.context_keys or ()) or "declare it, or give a declared key's default",
            )
        refusal = policy.vet(key, value, model=False)[1] if value is not None else None
        if refusal is not None:
            emit(
                "migration-default-invalid",
                ("defaults", key),
                f"the default for {key!r} breaks its declaration: {refusal.reason}; migrated conversations that "
                "lack the key would be stranded",
                "give a value the declaration accepts",
            )
    declared_flows = flow_names(definition)
    for old, target in block.flows.items():
        if target not in declared_flows:
            emit(
                "migration-unknown-flow",
                ("flows", old),
                f"migrations.flows renames {old!r} to {target!r}, which this definition does not declare as a sub-flow",
                _did_you_mean(target, declared_flows) or "rename it to a declared sub-flow's name",
            )


def lint_migrations(
    new: FSMDefinition,
    previous: FSMDefinition | None = None,
    *,
    migrations: Migrations | None = None,
    file: str | None = None,
    line_for: LineFinder | None = None,
) -> list[Diagnostic]:
    """Findings of the block that moves conversations from ``previous`` onto ``new``. Never raises; no I/O.

    The block is ``new.migrations``, or ``migrations`` when given (a ``--migrations`` file: then FSM046–FSM050
    are found here too, and paths are the file's own, ``$.states.x``, with ``file`` naming it). With ``previous``:
    a state, key or flow renamed that the old version did not have (FSM051; keys only when the old version
    declares its keys), and a state of the old version this one neither keeps nor maps (FSM052). ``line_for``
    gives lines in ``new``'s file (``fsm-lint`` passes its documents').
    """
    findings: list[Diagnostic] = []
    given = migrations is not None
    block = migrations if migrations is not None else new.migrations or Migrations()
    prefix: Path = () if given else ("migrations",)

    def emit(name: str, parts: Path, message: str, hint: str) -> None:
        where = (*prefix, *parts)
        line = None if given or line_for is None else line_for(new, where)
        findings.append(
            make_diagnostic(
                name,
                message,
                hint=hint or None,
                file=file or (None if given else new.source),
                path=format_path(where),
                line=line,
            )
        )

    try:
        if given:
            check_block(new, block, emit)
        if previous is not None:
            _against_previous(new, previous, block, emit)
    except Exception as exc:  # a bug here must not hide the other findings of a lint run
        findings.append(make_diagnostic("internal-error", f"migrations lint failed: {type(exc).__name__}: {exc}"))
    return findings


def _against_previous(new: FSMDefinition, previous: FSMDefinition, block: Migrations, emit: Emit) -> None:
    """FSM051 (a source the old version lacks) and FSM052 (an old state left stranded)."""
    sources: list[tuple[str, dict[str, str], set[str] | None]] = [
        ("states", block.states, set(previous.states)),
        ("flows", block.flows, flow_names(previous)),
        ("keys", block.keys, None),
    ]
    for part, mapping, known in sources:
        for old in mapping:
            if known is not None:
                missing = old not in known
            else:  # keys: judged only against an old version that declares its keys
                missing = bool(previous.context_keys) and not previous.is_declared_path(old)
            if missing:
                options = known if known is not None else set(previous.context_keys or ())
                emit(
                    "migration-source-unknown",
                    (part, old),
                    f"migrations.{part} renames {old!r}, which the previous version does not have",
                    _did_you_mean(old, options) or f"name one of the previous version's {part}",
                )
    where: Path = ("states",) if block.states else ()
    for state_id in previous.states:
        if state_id not in new.states and state_id not in block.states:
            emit(
                "migration-stranded-state",
                where,
                f"state {state_id!r} of the previous version is not in this one and migrations.states does not map "
                "it: conversations in it would be stranded",
                f"map it: migrations: {{states: {{{state_id}: <a state of this version>}}}}",
            )


__all__ = ["check_block", "lint_migrations", "migrations"]
