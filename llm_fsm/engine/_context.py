"""Applying a context update: who may write which key, and what counts as collected.

The model's ``context_update`` is untrusted. This module turns it into a list of
``ContextChange`` records, each either applied or dropped with a reason, so the
explain record shows exactly what happened to every key. The rules:

- Dot paths nest: ``{"issue.description": "x"}`` and ``{"issue": {"description": "x"}}``
  both set ``data["issue"]["description"]``; nested updates merge, they never wipe
  sibling keys.
- Corrections overwrite: a new non-empty value replaces the collected one.
- Empty values (``None``, ``""``, ``[]``, ``{}``) from the model are ignored: weak
  models emit ``"email": null`` for every key they did not find, and that must not
  erase what the user already gave. (The application can remove keys.)
- Keys starting with ``_`` belong to the engine, and a definition's
  ``protected_context_keys`` belong to the application: the model cannot write them.
- The context has a size cap (compact JSON bytes). A model update that would pass it
  is dropped key by key and recorded; an application update that would pass it
  raises ``ContextTooLargeError``. A refused key leaves the context exactly as it
  was: parents it would have created or replaced are restored too.
- With a ``KeyPolicy`` (a definition that declares its keys), each value is normalised and
  checked against its declaration first (``engine._values``): a model value that breaks it,
  or a grounded one the user never said, is dropped and recorded with the rule it broke; an
  application value that breaks it raises ``ContextValidationError``. Sensitive values are
  recorded masked.
- A value nested deeper than ``MAX_VALUE_DEPTH`` (its dot path counted), or with text
  that is not valid Unicode, is refused (model) or raises ``ContextError``
  (application): whatever is accepted here can be saved and loaded again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping
from copy import deepcopy
from typing import Any, Literal

from llm_fsm.engine._data import MAX_VALUE_DEPTH, has_lone_surrogate
from llm_fsm.engine._records import ContextChange, Extracted, GroundedBy, Repair
from llm_fsm.engine._values import MASK, KeyPolicy
from llm_fsm.errors import ContextError, ContextTooLargeError, ContextValidationError

Source = Literal["model", "application"]

_MISSING = object()


def is_empty(value: Any) -> bool:
    """What does not count as collected: absent, null, or an empty string/list/object."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, (list, dict, tuple)):
        return len(value) == 0
    return False


def get_path(data: Mapping[str, Any], path: str) -> Any:
    """The value at a dot path, or ``_MISSING``. A literal dotted key wins over nesting."""
    if path in data:
        return data[path]
    current: Any = data
    for part in path.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def has_value(data: Mapping[str, Any], path: str) -> bool:
    """True when the key is present and not empty: the meaning of 'collected'."""
    value = get_path(data, path)
    return value is not _MISSING and not is_empty(value)


def missing_keys(data: Mapping[str, Any], paths: Iterable[str]) -> list[str]:
    return [p for p in paths if not has_value(data, p)]


def flatten_update(update: Mapping[str, Any], prefix: str = "", depth: int = 1) -> Iterator[tuple[str, Any]]:
    """Leaf (dot path, value) pairs of an update; an empty dict is a leaf (an empty value).

    Stops descending below ``MAX_VALUE_DEPTH``: the subtree there is one leaf, refused as too deep,
    so a hostile update of any depth costs bounded work and no recursion error.
    """
    for key, value in update.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value and depth < MAX_VALUE_DEPTH:
            yield from flatten_update(value, path, depth + 1)
        else:
            yield path, value


def _value_problem(path: str, value: Any) -> str | None:
    """Why ``value`` at ``path`` cannot be stored, or None. Iterative: hostile depth cannot recurse."""
    if has_lone_surrogate(path):
        return "not valid Unicode"
    budget = MAX_VALUE_DEPTH - path.count(".") - 1
    if budget < 0:
        return f"nested deeper than {MAX_VALUE_DEPTH} levels"
    stack: list[tuple[Any, int]] = [(value, budget)]
    while stack:
        item, left = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return "not valid Unicode"
        elif isinstance(item, (dict, list)):
            if left <= 0:
                return f"nested deeper than {MAX_VALUE_DEPTH} levels"
            children = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in children:
                if isinstance(key, str) and has_lone_surrogate(key):
                    return "not valid Unicode"
                stack.append((child, left - 1))
    return None


def _valid_path(path: str) -> bool:
    return bool(path) and all(part.strip() for part in path.split("."))


def _is_protected(path: str, protected: Iterable[str]) -> bool:
    first = path.split(".", 1)[0]
    if first.startswith("_"):
        return True
    return any(path == key or path.startswith(key + ".") or key.startswith(path + ".") for key in protected)


def _set_path(data: dict[str, Any], path: str, value: Any) -> Any:
    """Set a nested value, creating or replacing non-dict parents; returns the previous value."""
    parts = path.split(".")
    current = data
    for part in parts[:-1]:
        child = current.get(part)
        if not isinstance(child, dict):
            child = {}
            current[part] = child
        current = child
    previous = current.get(parts[-1], _MISSING)
    current[parts[-1]] = value
    return previous


def _delete_path(data: dict[str, Any], path: str) -> Any:
    parts = path.split(".")
    current: Any = data
    for part in parts[:-1]:
        current = current.get(part) if isinstance(current, dict) else None
        if not isinstance(current, dict):
            return _MISSING
    if isinstance(current, dict):
        return current.pop(parts[-1], _MISSING)
    return _MISSING


def _safe_key(path: str) -> str:
    return path.encode("utf-8", "replace").decode("utf-8") if has_lone_surrogate(path) else path


def context_size(data: Mapping[str, Any]) -> int:
    """Bytes of the context as compact JSON: the measure the size cap uses."""
    return len(json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str).encode())


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def apply_update(
    data: dict[str, Any],
    update: Any,
    *,
    source: Source,
    protected: Iterable[str] = (),
    max_bytes: int | None = None,
    policy: KeyPolicy | None = None,
) -> list[ContextChange]:
    """Apply ``update`` to ``data`` in place and return what happened to every key.

    For ``source="application"`` every key may be written, empty values remove
    keys, and breaking the size cap raises. For ``source="model"`` the ownership
    and emptiness rules of this module apply and nothing raises.
    """
    if update is None:
        return []
    if not isinstance(update, Mapping):
        if source == "application":
            raise ContextError(f"a context update must be a mapping, not {type(update).__name__}")
        return [ContextChange(key="*", value=None, applied=False, reason="update is not an object")]

    protected = tuple(protected)
    changes: list[ContextChange] = []
    for path, value in flatten_update(update):
        if not _valid_path(path):
            changes.append(ContextChange(key=path, value=value, applied=False, reason="invalid key"))
            continue
        problem = _value_problem(path, value)
        if problem is not None:
            if source == "application":
                raise ContextError(f"cannot set {path!r}: the value is {problem}")
            # the refused value is not recorded either: the explain record must stay storable
            changes.append(ContextChange(key=_safe_key(path), value=None, applied=False, reason=problem))
            continue
        masked = policy is not None and policy.is_sensitive(path)
        if source == "model":
            if _is_protected(path, protected):
                changes.append(
                    ContextChange(
                        key=path,
                        value=MASK if masked else value,
                        applied=False,
                        reason="protected key",
                        rule="not_writable",
                    )
                )
                continue
            if is_empty(value):
                changes.append(ContextChange(key=path, value=value, applied=False, reason="empty value ignored"))
                continue
            if not _jsonable(value):
                changes.append(ContextChange(key=path, value=None, applied=False, reason="not JSON"))
                continue
        elif value is None:
            previous = _delete_path(data, path)
            if previous is not _MISSING:
                changes.append(
                    ContextChange(key=path, previous=MASK if masked else previous, applied=True, reason="removed")
                )
            continue
        refusal = None
        if policy is not None:
            value, refusal = policy.vet(path, value, model=source == "model")
        previous = get_path(data, path) if "." in path else data.get(path, _MISSING)
        if previous is not _MISSING and previous == value:
            # Writing back what is stored changes nothing (small models echo <current_context>): it is no
            # write, so nothing to refuse either; the value was checked when it was stored, and refusing it
            # now would ask the user for something they never had to say.
            continue
        if source == "application" and refusal is None and not _jsonable(value):
            # a datetime, set, bytes or NaN would live in memory and then be changed or refused by a store's
            # encoder: a value the conversation cannot be saved and loaded with is refused where it is written
            raise ContextError(
                f"cannot set {path!r}: the value is not JSON ({type(value).__name__}; "
                "objects, arrays, strings, finite numbers, booleans)"
            )
        if refusal is not None:
            if source == "application":
                raise ContextValidationError(f"cannot set {path!r}: {refusal.reason}", key=path, rule=refusal.rule)
            changes.append(
                ContextChange(
                    key=path,
                    value=MASK if masked else value,
                    applied=False,
                    reason=refusal.reason,
                    rule=refusal.rule,
                    extracted=extracted(policy, path, masked) if refusal.rule == "ambiguous" else None,
                )
            )
            continue
        top = path.split(".", 1)[0]
        saved_top = deepcopy(data[top]) if max_bytes is not None and "." in path and top in data else _MISSING
        _set_path(data, path, value)
        if max_bytes is not None and context_size(data) > max_bytes:
            # Undo this key only (earlier keys of the same update stay applied), parents included:
            # a refused "a.b.c" must not leave {"a": {"b": {}}} behind, nor turn a's old value into {}.
            if "." not in path:
                if previous is _MISSING:
                    data.pop(path, None)
                else:
                    data[path] = previous
            elif saved_top is _MISSING:
                data.pop(top, None)
            else:
                data[top] = saved_top
            if source == "application":
                raise ContextTooLargeError(
                    f"context would exceed {max_bytes} bytes after setting {path!r}; "
                    "store large data outside the conversation and keep a reference in the context"
                )
            changes.append(
                ContextChange(key=path, value=None, applied=False, reason=f"context size cap ({max_bytes} bytes)")
            )
            continue
        reason = "set" if previous is _MISSING or is_empty(previous) else "corrected"
        shown_previous = None if previous is _MISSING else previous
        if masked:
            value, shown_previous = MASK, None if shown_previous is None else MASK
        changes.append(
            ContextChange(
                key=path,
                value=value,
                previous=shown_previous,
                applied=True,
                reason=reason,
                grounded_by=_grounded_by(policy, path, masked),
                repaired=_repaired(policy, path, masked),
                extracted=extracted(policy, path, masked),
            )
        )
    return changes


def _grounded_by(policy: KeyPolicy | None, path: str, masked: bool) -> GroundedBy | None:
    """The record of what grounded a stored model value (a sensitive one's words are not shown)."""
    witness = policy.witnesses.get(path) if policy is not None else None
    if witness is None:
        return None
    grounding = policy.grounding if policy is not None else None
    if grounding is not None:
        witness = grounding.located(witness)  # the words' message and span, for the record only
    found = GroundedBy(**dataclasses.asdict(witness))
    return found.model_copy(update={"expression": MASK}) if masked else found


def _repaired(policy: KeyPolicy | None, path: str, masked: bool) -> Repair | None:
    """The record of a stored model value read from words ("next Friday" stored as its date)."""
    words = policy.repairs.get(path) if policy is not None else None
    if words is None:
        return None
    seen = words.witness
    return Repair(
        written=MASK if masked else words.written,
        stored=MASK if masked else words.value,
        rule=words.rule,
        expression=None if seen is None else MASK if masked else seen.expression,
        source=None if seen is None else seen.source,
        messages_back=None if seen is None else seen.messages_back,
        start=None if seen is None else seen.start,
        end=None if seen is None else seen.end,
    )


def extracted(policy: KeyPolicy | None, path: str, masked: bool) -> Extracted | None:
    """The record of what the extractors did for a key this turn (a sensitive one's words are not shown)."""
    done = policy.extracted.get(path) if policy is not None else None
    if done is None:
        return None
    found = done.found
    return Extracted(
        rule=done.rule,
        kind=done.kind,
        expression=None if found is None else MASK if masked else found.text,
        start=None if found is None else found.start,
        end=None if found is None else found.end,
        written=MASK if masked and done.written is not None else done.written,
        options=[MASK if masked else option.value for option in done.options],
    )


__all__ = [
    "apply_update",
    "context_size",
    "extracted",
    "flatten_update",
    "get_path",
    "has_value",
    "is_empty",
    "missing_keys",
]
