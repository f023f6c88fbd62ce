"""Helpers shared by the checks: JSON type names, did-you-mean, key prefixes and the keys a state covers."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from llm_fsm.definition._documents import Path, format_path
from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.definition._model import (
    Confirmation,
    FlowDeclaration,
    FSMDefinition,
    GlobalTransition,
    State,
    Transition,
    TransitionCondition,
)
from llm_fsm.errors import LogicError

# --- helpers ---------------------------------------------------------------------------


_KNOWN_FIELDS: dict[str, frozenset[str]] = {
    # "$schema" points an editor at the JSON Schema; the schema allows it and the engine ignores it
    "definition": frozenset(FSMDefinition.model_fields) | {"$schema"},
    "state": frozenset(State.model_fields),
    "transition": frozenset(Transition.model_fields),
    "global transition": frozenset(GlobalTransition.model_fields),
    "condition": frozenset(TransitionCondition.model_fields),
    "flow": frozenset(FlowDeclaration.model_fields),
    "confirmation": frozenset(Confirmation.model_fields),
    "declaration": frozenset(KeyDeclaration.model_fields),
}

#: fields the original LLM-FSM accepted and ignored; worth a specific hint
_LEGACY_FIELDS = {"function_handlers": "the original LLM-FSM ignored it too; hooks are registered in code here"}

#: JSON Schema keywords a declaration does not support, and what to write instead (camelCase spellings of
#: supported fields are found by ``json_schema_hint``)
_JSON_SCHEMA_KEYWORDS = {
    "exclusiveMinimum": "exclusive bounds are not supported: use minimum (inclusive)",
    "exclusiveMaximum": "exclusive bounds are not supported: use maximum (inclusive)",
    "const": "use enum with one value",
    "title": "use display_name (how the key is named to the user) or description",
    "default": "declarations have no default: give the value in the initial context, or a var default in conditions",
}


def json_schema_hint(name: str, known: frozenset[str]) -> str | None:
    """For a declaration field spelt as JSON Schema spells it (``minLength``), the snake_case name used here."""
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    if snake != name and snake in known:
        return f"declaration fields are snake_case: write {snake} ({name} is the JSON Schema style)"
    return _JSON_SCHEMA_KEYWORDS.get(name)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _did_you_mean(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f"did you mean {close[0]!r}?" if close else ""


#: ancestors of a dot path are looked for this many levels deep; a deeper path (no real key is one) is matched
#: only through its first levels, so a hostile key of a million dots costs linear work, not quadratic
MAX_PATH_LEVELS = 32


def _prefixes(key: str) -> Iterator[str]:
    """``a.b.c`` → ``a``, ``a.b`` (proper ancestors, the first ``MAX_PATH_LEVELS`` of them)."""
    end = -1
    for _ in range(MAX_PATH_LEVELS):
        end = key.find(".", end + 1)
        if end < 0:
            return
        yield key[:end]


class KeyCover:
    """Answers "is this dot path provided?" with the two-way prefix rule, in O(len(key))."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = {k for k in keys if k}
        self.ancestors = {p for k in self.keys for p in _prefixes(k)}

    def covers(self, key: str) -> bool:
        if key in self.keys or key in self.ancestors:
            return True
        return any(p in self.keys for p in _prefixes(key))

    def guarantees(self, key: str) -> bool:
        """Requiring ``key`` or a field below it guarantees ``key`` is present (an ancestor does not)."""
        return key in self.keys or key in self.ancestors


def validation_problems(
    errors: ValidationError | Iterable[ErrorDetails],
) -> list[tuple[Path, str, LogicError | None]]:
    """Pydantic errors as (path, message, logic error) without pydantic's wording leaking types."""
    problems: list[tuple[Path, str, LogicError | None]] = []
    if isinstance(errors, ValidationError):
        errors = errors.errors(include_url=False)
    for error in errors:
        loc = tuple(error.get("loc", ()))
        message = str(error.get("msg", "invalid"))
        if loc and loc[-1] == "[key]":
            loc = loc[:-1]
            message = "keys must be strings"
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, LogicError):
            problems.append((loc, cause.message, cause))
            continue
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if error.get("type", "").endswith("_type") or error.get("type") in ("model_type", "dict_type", "list_type"):
            message = f"{message} (got {_json_type(error.get('input'))})"
        problems.append((loc, message, None))
    return problems


def _logic_subpath(condition_path: Path, logic_path: str) -> str:
    """Join a condition's path with a LogicError/LogicIssue path such as ``$.and[0]``."""
    base = format_path((*condition_path, "logic"))
    if logic_path.startswith("$"):
        return base + logic_path[1:]
    return base + ("." + logic_path if logic_path else "")
