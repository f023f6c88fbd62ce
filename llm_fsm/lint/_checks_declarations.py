"""Checks that the keys a definition names and the keys it declares (``context_keys``) agree: a key a state asks
the user for that the model may not write (FSM030), a declaration nothing collects, reads or provides (FSM031),
and a reference to a key that is not declared (FSM032).

Each is skipped when validation stopped early: a declaration, or a use of one, may be in the part not validated.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping

from llm_fsm.definition._documents import Path
from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import KeyCover, _prefixes, _strings
from llm_fsm.lint._typos import _Typos


def _application_only(run: LintRun) -> KeyCover:
    """Keys the model may not write: protected, or declared ``writable_by: application``."""
    return KeyCover([*_strings(run.data.get("protected_context_keys")), *run.application_declared()])


def _additional_keys(run: LintRun) -> bool:
    value = run.data.get("additional_keys", True)
    return value is not False  # anything but false is a schema finding; judged as the default here


def required_keys_writable(run: LintRun) -> None:
    """FSM030: a state asks the user for a key whose value the model may not store."""
    if run.partial:
        return
    only = _application_only(run)
    declared = run.declarations()  # valid ones: what a field's parent is declared as
    names = run.declared_names()
    by_declaration = KeyCover(run.application_declared())
    strict = bool(names) and not _additional_keys(run)
    declared_cover = KeyCover(names)
    typos = functools.cache(lambda: _Typos(names))  # built for the first finding that needs a hint
    for state_key, state in run.states():
        keys = state.get("required_context_keys")
        for index, key in enumerate(keys if isinstance(keys, list) else ()):
            if not isinstance(key, str):
                continue
            if key.startswith("_") or only.covers(key):
                if key.startswith("_"):
                    why = "starts with _ (such keys are the application's and the engine's)"
                elif by_declaration.covers(key):
                    why = "is declared writable_by: application"
                else:
                    why = "is in protected_context_keys"
                run.add(
                    "required-key-not-writable",
                    ("states", state_key, "required_context_keys", index),
                    f"state {state_key!r} asks the user for {key!r}, which {why}: the model's value is dropped, "
                    "so the assistant keeps asking for something the answer can never set",
                    "remove it from required_context_keys (a condition's requires_context_keys can wait for the "
                    "application's value), or let the model write it",
                )
            elif (parent := _scalar_parent(key, declared)) is not None:
                run.add(
                    "required-key-not-writable",
                    ("states", state_key, "required_context_keys", index),
                    f"state {state_key!r} asks the user for {key!r}, but {parent!r} is declared as "
                    f"{declared[parent].type}, which has no fields: the model's value is refused",
                    f"ask for {parent!r} itself, or declare it type: object",
                )
            elif strict and not declared_cover.covers(key):
                run.add(
                    "required-key-not-writable",
                    ("states", state_key, "required_context_keys", index),
                    f"state {state_key!r} asks the user for {key!r}, which is not declared in context_keys; with "
                    "additional_keys: false the model's value is refused, so the assistant keeps asking",
                    functools.partial(_undeclared_hint, key, typos),
                )


def _scalar_parent(key: str, declared: Mapping[str, KeyDeclaration]) -> str | None:
    """The declared key ``key`` is a field of, when its type has no fields (the engine refuses such a write)."""
    if "." not in key or key in declared:
        return None
    for parent in reversed(list(_prefixes(key))):  # the nearest declared ancestor governs, as in the engine
        if parent in declared:
            return parent if declared[parent].type != "object" else None
    return None


def _mentions(run: LintRun) -> Iterator[str]:
    """Every key the definition names outside its declarations: what collects, reads, requires, confirms,
    hands over or copies back a key, and what the application says it provides."""
    yield from _strings(run.data.get("application_context_keys"))
    yield from _strings(run.data.get("protected_context_keys"))
    yield from _strings([run.data.get("language_key")])  # the engine reads it, and the prompt offers it
    for _, state in run.states():
        yield from _strings(state.get("required_context_keys"))
        confirmation = state.get("confirmation")
        if isinstance(confirmation, Mapping):
            yield from _strings(confirmation.get("keys"))
    for _, condition in run.conditions():
        yield from _strings(condition.get("requires_context_keys"))
    for _, key in run.reads:
        yield key
    for field_name in ("inputs", "outputs"):  # an action takes the key, or the backend provides it
        yield from (key for _, key, _ in run.action_mapping(field_name))
    for _, flow in run.flows():
        for field_name in ("inputs", "outputs"):
            mapping = flow.get(field_name)
            if isinstance(mapping, Mapping):
                # inputs: sub-flow key <- this flow's key; outputs: this flow's key <- sub-flow key
                yield from (
                    (v for v in mapping.values() if isinstance(v, str))
                    if field_name == "inputs"
                    else (k for k in mapping if isinstance(k, str))
                )


def declared_keys_used(run: LintRun) -> None:
    """FSM031: a declared key that nothing collects, reads or provides (the model is never offered it)."""
    if run.partial:
        return
    declared = run.declarations()
    if not declared:
        return
    used = KeyCover(_mentions(run))
    for key, declaration in declared.items():
        if declaration.writable_by == "application" or used.covers(key):
            continue
        run.add(
            "declared-key-never-collected",
            ("context_keys", key),
            f"{key!r} is declared, but no state collects it, no condition reads or requires it and the "
            "application does not provide it: the model is never asked for it",
            "add it to a state's required_context_keys; if the application sets it, declare it "
            "writable_by: application (or list it in application_context_keys); otherwise remove the declaration",
        )


def _undeclared_hint(key: str, typos: Callable[[], _Typos]) -> str:
    close = typos().near(key)
    if close is not None:
        return f"did you mean {close!r}?"
    return f"declare {key!r} in context_keys, or list it in application_context_keys if the application sets it"


def undeclared_keys(run: LintRun) -> None:
    """FSM032: with keys declared, a reference to one that is not.

    With ``additional_keys: false`` the model cannot write an undeclared key, so every reference the application
    does not provide is reported. With the default (true) undeclared keys are allowed, and only a name that
    looks like a misspelling of a declared one is.
    """
    if run.partial:
        return
    declared = run.declared_names()  # a broken declaration still declares its key (FSM001 says what is wrong)
    if not declared:
        return
    strict = not _additional_keys(run)
    known = KeyCover(declared)
    outputs = [k for _, flow in run.flows() if isinstance(o := flow.get("outputs"), Mapping) for k in o]
    provided = KeyCover(
        [
            *_strings(run.data.get("application_context_keys")),
            *_strings(run.data.get("protected_context_keys")),
            *(k for k in outputs if isinstance(k, str)),
            *(key for _, key, _ in run.action_mapping("outputs")),
        ]
    )
    typos = _Typos(declared)
    # (where, key, verb, owner): one finding per key and owner (a condition that requires and reads a key)
    references: list[tuple[Path, str, str, Path]] = []
    if not strict:  # with additional_keys: false a state's undeclared key is FSM030's finding
        for state_key, state in run.states():
            keys = state.get("required_context_keys")
            for index, key in enumerate(keys if isinstance(keys, list) else ()):
                if isinstance(key, str):
                    where: Path = ("states", state_key, "required_context_keys", index)
                    references.append((where, key, "collects", where))
    for parts, condition in run.conditions():
        keys = condition.get("requires_context_keys")
        for index, key in enumerate(keys if isinstance(keys, list) else ()):
            if isinstance(key, str):
                references.append(((*parts, "requires_context_keys", index), key, "requires", parts))
    references.extend(((*parts, "logic"), key, "reads", parts) for parts, key in run.reads)
    reported: set[tuple[Path, str]] = set()
    for where, key, verb, owner in references:
        if known.covers(key) or provided.covers(key) or (owner, key) in reported:
            continue
        if strict:
            reported.add((owner, key))
            run.add(
                "undeclared-key",
                where,
                f"{verb} {key!r}, which is not declared in context_keys; with additional_keys: false the model "
                "cannot write it, and the application does not say it provides it",
                functools.partial(_undeclared_hint, key, lambda: typos),
            )
            continue
        close = typos.near(key)
        if close is not None:
            reported.add((owner, key))
            run.add(
                "undeclared-key",
                where,
                f"{verb} {key!r}, which is not declared in context_keys, but {close!r} is",
                f"did you mean {close!r}? (declare {key!r} too if both are meant)",
            )
