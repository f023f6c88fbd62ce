"""Checks of the document as written: duplicate keys, the schema, the version, unknown fields."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from llm_fsm.definition._documents import Path
from llm_fsm.definition._model import SUPPORTED_VERSIONS
from llm_fsm.lint._run import MAX_FINDINGS_PER_RULE, LintRun
from llm_fsm.lint._support import (
    _KNOWN_FIELDS,
    _LEGACY_FIELDS,
    _did_you_mean,
    json_schema_hint,
    validation_problems,
)
from llm_fsm.lint._validation import validate


def duplicate_keys(run: LintRun) -> None:
    for parts, line, first_line in run.doc.duplicate_keys:
        run.add(
            "duplicate-key",
            parts,
            f"key {parts[-1]!r} appears more than once in this object (first on line {first_line}); "
            "only the last one counts",
            "remove or rename one of them",
            line=line,
        )
    run.count_more("duplicate-key", run.doc.more_duplicate_keys)


def schema(run: LintRun) -> None:
    try:
        validated = validate(run.data, budget=MAX_FINDINGS_PER_RULE)
    except RecursionError:
        run.add("schema-violation", (), "the document is nested too deeply to validate")
        return
    run.definition = validated.definition
    for parts, message, logic_error in validation_problems(validated.errors):
        if logic_error is None:
            parts, hint = _declaration_problem(parts, message)
            run.add("schema-violation", parts, message, hint or _schema_hint(parts, message))
        else:  # reported by check_logic with every issue of the rule; kept in case it cannot
            run.model_logic_errors.append((parts, logic_error))
    if not validated.unchecked:
        return
    # Stop descending: later checks see only what was validated, and those that need the whole
    # document (targets, reachability, keys) would misjudge a part of it, so they are skipped.
    for parts, position, count in validated.unchecked:
        run.add(
            "schema-violation",
            parts,
            f"validation stopped after {MAX_FINDINGS_PER_RULE} problems: {count:,} items here, "
            f"from {_item_name(run.data, parts, position)} on, were not checked; neither were the targets, "
            "reachability and context keys of the file",
            "fix the problems shown and lint again",
            capped=False,
        )
    run.data = validated.checked_part(run.data)
    run.partial = True


def _item_name(data: Any, parts: Path, position: int) -> str:
    for part in parts:
        data = data[part]
    return f"[{position}]" if isinstance(data, list) else repr(list(data)[position])


def version(run: LintRun) -> None:
    version = run.data.get("version", "3.0")
    # a number (YAML `version: 3.0`) is a schema violation already, with a hint to quote it
    if isinstance(version, str) and version not in SUPPORTED_VERSIONS:
        run.add(
            "unsupported-version",
            ("version",),
            f"version {version!r} is not supported (supported: {', '.join(SUPPORTED_VERSIONS)})",
            'use "3.0"',
        )


def unknown_fields(run: LintRun) -> None:
    def report(parts: Path, obj: Mapping[str, Any], kind: str) -> None:
        known = _KNOWN_FIELDS[kind]
        if obj.keys() <= known:  # the usual case, decided without a Python loop
            return
        for field_name in obj:
            if field_name in known:
                continue
            name = str(field_name)
            run.add(
                "unknown-field",
                (*parts, name),
                f"unknown {kind} field {name!r}; it is ignored",
                functools.partial(_field_hint, name, known, kind),
            )

    report((), run.data, "definition")
    for key, state in run.states():
        report(("states", key), state, "state")
    for key, index, transition in run.transitions():
        report(("states", key, "transitions", index), transition, "transition")
    for parts, transition in run.global_transitions():
        report(parts, transition, "global transition")
    for parts, condition in run.conditions():
        report(parts, condition, "condition")
    for parts, flow in run.flows():
        report(parts, flow, "flow")
    for key, state in run.states():
        if isinstance(state.get("confirmation"), Mapping):
            report(("states", key, "confirmation"), state["confirmation"], "confirmation")
    declarations = run.data.get("context_keys")
    if isinstance(declarations, Mapping):
        for name, declaration in declarations.items():
            where: Path = ("context_keys", name)
            while isinstance(declaration, Mapping):  # a list key's items are declared the same way, nested
                report(where, declaration, "declaration")
                declaration, where = declaration.get("items"), (*where, "items")


def _field_hint(name: str, known: frozenset[str], kind: str) -> str:
    return (
        _LEGACY_FIELDS.get(name)
        or (json_schema_hint(name, known) if kind == "declaration" else None)
        or _did_you_mean(name, known)
        or "remove it, or check its spelling"
    )


#: the field a declaration's own check names first in its message (it fails the declaration as a whole, so
#: pydantic locates it there), and a hint for it
_DECLARATION_FIELDS: tuple[tuple[str, str, str], ...] = (
    (
        "pattern ",
        "pattern",
        "patterns are Python regular expressions, searched in the value as in JSON Schema; in YAML, single-quote "
        "a pattern so its backslashes stay as written",
    ),
    (
        "synonyms need",
        "synonyms",
        "add an enum listing the values the synonyms name, declare type: string (free text), or remove synonyms",
    ),
    ("synonyms of a free-text", "synonyms", "map each synonym to the text stored for it"),
    ("fuzzy (", "fuzzy", "fuzzy is the similarity a spelling must reach: more than 0, at most 1 (e.g. 0.85)"),
    ("fuzzy matches", "fuzzy", "fuzzy matches spellings of an enum's values or of synonyms: declare one"),
    ("fuzzy needs", "fuzzy", 'install the extra: pip install -e ".[values]" from a checkout'),
    ("unknown time zone", "timezone", "an IANA time zone name, as in the tz database: Europe/Paris, America/New_York"),
    ("timezone applies", "timezone", "timezone gives a date key's 'today': declare format: date, or remove it"),
    ("window applies", "window", "window bounds a date key: declare format: date, or remove it"),
    ("date_order applies", "date_order", "date_order reads numeric dates: declare format: date, or remove it"),
    ("synonyms map", "synonyms", "each synonym must map to a value spelt exactly as in enum"),
    ("region needs", "region", 'install the extra: pip install -e ".[values]" from a checkout'),
    ("region applies", "region", "region is the default region of phone numbers: declare format: phone, or remove it"),
    ("region ", "region", "region is an ISO 3166 two-letter code libphonenumber has numbers for (GB, US, DE)"),
    ("enum ", "enum", "list at least one value, each of the declared type"),
    ("format ", "format", "format applies to strings: declare type: string, or remove format"),
    ("minimum (", "minimum", "minimum is the smallest allowed value and maximum the largest"),
    ("min_length (", "min_length", "min_length is the fewest characters and max_length the most"),
    ("min_items (", "min_items", "min_items is the fewest items and max_items the most"),
    ("items applies", "items", "items declares the items of a list: declare type: array, or remove items"),
)


def _declaration_problem(parts: Path, message: str) -> tuple[Path, str | None]:
    """A declaration's own check fails the whole declaration: point at the field it names instead."""
    if len(parts) < 2 or parts[0] != "context_keys" or any(part != "items" for part in parts[2:]):
        return parts, None  # not a declaration (or a list's items declaration), but one of its fields
    for prefix, field_name, hint in _DECLARATION_FIELDS:
        if message.startswith(prefix):
            return (*parts, field_name), hint
    return parts, None


def _schema_hint(parts: Path, message: str) -> str | None:
    if parts == ("version",):
        return 'quote it: version: "3.0"'
    if message.startswith("Field required"):
        return f"add {parts[-1]!r}" if parts else None
    return None
