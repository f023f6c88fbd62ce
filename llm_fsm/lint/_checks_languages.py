"""Checks of several languages in one definition: FSM070–FSM074.

A missing translation is not a failure at run time (``pick`` falls back to the default language), which is
exactly why it must be found here: a German customer would silently read English. Found: a text missing (or
empty) in a declared language, a text in a language the definition does not declare, a default language that is
not declared, a ``language_key`` that cannot switch to the declared languages, and a declared language the
library ships no engine sentences for.
"""

from __future__ import annotations

from llm_fsm.definition._languages import SHIPPED_LANGUAGES, primary, user_texts
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.lint._run import LintRun


def languages(run: LintRun) -> None:
    """FSM070–FSM074."""
    definition = run.definition
    if definition is None or run.partial:
        return
    declared = list(definition.languages or ())
    _default(run, definition, declared)
    _texts(run, definition, declared)
    _switch(run, definition, declared)
    _shipped(run, declared)


def _default(run: LintRun, definition: FSMDefinition, declared: list[str]) -> None:
    default = definition.default_language
    if default is not None and default not in declared:
        run.add(
            "default-language-undeclared",
            ("default_language",),
            f"default_language {default!r} is not one of the declared languages ({', '.join(declared) or 'none'})",
            f"add {default!r} to languages, or pick one of them",
        )


def _texts(run: LintRun, definition: FSMDefinition, declared: list[str]) -> None:
    for found in user_texts(definition):
        if isinstance(found.text, str):
            continue  # one string: every language's
        written = list(found.text)
        where = _shown(found.path)
        undeclared = [tag for tag in written if tag not in declared]
        if undeclared:
            run.add(
                "undeclared-language",
                found.path,
                f"{where} is written in {', '.join(map(repr, undeclared))}, which the definition does not declare "
                "in languages: no conversation can be in it",
                "add it to languages, or fix the tag",
            )
        missing = [tag for tag in declared if not found.text.get(tag, "").strip()]
        if missing:
            fallback = definition.language
            run.add(
                "text-missing-language",
                found.path,
                f"{where} has no text in {', '.join(map(repr, missing))}: a conversation in it reads the "
                f"{fallback!r} text instead",
                f"add {missing[0]}: ... to it",
            )


def _switch(run: LintRun, definition: FSMDefinition, declared: list[str]) -> None:
    key = definition.language_key
    if key is None:
        return
    declaration = (definition.context_keys or {}).get(key)
    if not declared:
        problem = "the definition declares no languages, so it never switches"
    elif declaration is None:
        problem = f"{key!r} is not a declared key: declare it with enum: [{', '.join(declared)}]"
    elif declaration.enum is None or set(map(str, declaration.enum)) - set(declared):
        values = declaration.enum if declaration.enum is not None else "any string"
        problem = f"{key!r} may hold {values!r}, not only the declared languages ({', '.join(declared)})"
    else:
        return
    run.add(
        "language-key-invalid",
        ("language_key",),
        f"language_key: {problem}",
        f"declare {key!r} with enum: [{', '.join(declared) or 'en, de'}] (synonyms for the languages' names)",
    )


def _shipped(run: LintRun, declared: list[str]) -> None:
    others = [tag for tag in declared if primary(tag) not in SHIPPED_LANGUAGES]
    if others:
        run.add(
            "language-not-shipped",
            ("languages",),
            f"the library ships its own sentences (the cancel and read-back questions it asks the model to say) in "
            f"English and German only: in {', '.join(map(repr, others))} they are quoted in English for the model "
            "to translate",
            None,
        )


def _shown(path: tuple[str | int, ...]) -> str:
    return ".".join(str(part) for part in path)
