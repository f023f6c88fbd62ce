"""Validating a document against the model with the work bounded, however many errors it holds.

pydantic validates a whole document in one call and lists every error: a 5 MB
file of a million wrong items costs seconds and gigabytes before the first is
reported. Here a document small enough to make at most ``PIECE`` errors is
validated in one call, exactly as before. A larger one is validated in pieces:
each list or map of models is cut into runs of items that together can make at
most ``PIECE`` errors, validated run by run and put back into their parent as
built models, so a clean large file is validated once, as before. After
``budget`` errors the rest is not validated: what was skipped is reported, and
the later checks see the document without it (they stop descending too).

The number of errors a value can make is bounded by its shape (``_weight``):
one per field of a model plus its missing fields and its own validator, one per
item of a list of strings, and so on down. Lists of strings and maps of strings
are not cut but trimmed after their ``budget``-th wrong item, which is counted
exactly.

While under the budget the errors are exactly those of one whole validation,
only in another order (lint sorts its findings).
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from llm_fsm.definition._documents import Path
from llm_fsm.definition._languages import Text, is_tag
from llm_fsm.definition._model import FSMDefinition

#: at most this many errors can come out of one call to pydantic
PIECE = 2_000


@dataclass
class Validated:
    """What validation found: the model (None if any error), the errors, and what was never looked at."""

    definition: FSMDefinition | None
    errors: list[ErrorDetails] = field(default_factory=list)
    #: (path of a list or map, position of its first item not validated, how many were not)
    unchecked: list[tuple[Path, int, int]] = field(default_factory=list)

    def checked_part(self, data: Any) -> Any:
        """``data`` without the items that were not validated (shallow copies along the way; ``data`` is unchanged)."""
        for parts, position, _ in self.unchecked:
            data = _cut(data, parts, position)
        return data


def validate(data: Any, *, budget: int) -> Validated:
    """Validate ``data`` as an ``FSMDefinition``, stopping once ``budget`` errors were found."""
    run = _Run(budget)
    if _weight(data, FSMDefinition, PIECE) <= PIECE:
        definition = run.call(_adapter(FSMDefinition), data, ())
    else:
        definition = run.model(FSMDefinition, data, ())
    if run.errors:
        definition = None
    return Validated(definition if isinstance(definition, FSMDefinition) else None, run.errors, run.unchecked)


# --- the shape of the model, from its annotations ---------------------------------------------------

_MODEL, _MODELS, _MODEL_MAP, _STRINGS, _STRING_MAP, _MAPS, _SCALAR, _TEXT_MAP = range(8)


def _kind(annotation: Any) -> tuple[int, Any]:
    """(kind, model or None) of a field's annotation; ``X | None`` is ``X``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _kind(members[0])
        return _SCALAR, None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _MODEL, annotation
    args = typing.get_args(annotation)
    if origin in (list, dict) and args and args[-1] is Any:
        return _SCALAR, None  # items of any value cannot fail: one error at most, for the container itself
    if origin is list and args:
        inner, model = _kind(args[0])
        if inner == _MODEL:
            return _MODELS, model
        if args[0] is str:
            return _STRINGS, None
        if _kind(args[0])[0] == _STRING_MAP:
            return _MAPS, None
    if origin is dict and len(args) == 2 and args[0] is str:
        inner, model = _kind(args[1])
        if inner == _MODEL:
            return _MODEL_MAP, model
        if args[1] is str:
            return _STRING_MAP, None
        if args[1] == Text:
            return _TEXT_MAP, None  # a table of texts, each a string or a mapping language → string
    if origin in (list, dict, set, tuple):
        raise TypeError(f"no error bound for {annotation!r}: teach lint/_validation.py this shape")
    return _SCALAR, None


@functools.cache
def _fields(model: type[BaseModel]) -> tuple[tuple[str, int, Any], ...]:
    """(key, kind, model) of each field that holds more than a scalar."""
    out = []
    for name, info in model.model_fields.items():
        kind, inner = _kind(info.annotation)
        if kind != _SCALAR:
            out.append((info.alias or name, kind, inner))
    return tuple(out)


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


# --- how many errors a value can make -----------------------------------------------------------------


def _weight(value: Any, model: type[BaseModel], limit: int) -> int:
    """An upper bound on the errors validating ``value`` as ``model`` makes (counting stops past ``limit``)."""
    if not isinstance(value, Mapping):
        return 1
    total = len(model.model_fields) + 1 + len(value)  # each field, a missing one, the model's own check, odd keys
    for key, kind, inner in _fields(model):
        if total > limit:
            break
        if key in value:
            total += _field_weight(value[key], kind, inner, limit - total)
    return total


def _field_weight(value: Any, kind: int, inner: Any, limit: int) -> int:
    if kind == _MODEL:
        return _weight(value, inner, limit)
    if kind == _STRINGS:
        return len(value) if isinstance(value, list) else 1
    if kind == _STRING_MAP:
        return 2 * len(value) if isinstance(value, Mapping) else 1
    if kind == _TEXT_MAP:  # per entry: its key, the string arm, and the mapping arm (its size, its keys and values)
        return (
            sum(4 + 2 * len(v) if isinstance(v, Mapping) else 3 for v in value.values())
            if isinstance(value, Mapping)
            else 1
        )
    if kind == _MAPS:
        return sum(1 + 2 * len(v) if isinstance(v, Mapping) else 1 for v in value) if isinstance(value, list) else 1
    items = value.values() if kind == _MODEL_MAP and isinstance(value, Mapping) else value
    if not isinstance(value, list if kind == _MODELS else Mapping):
        return 1
    total = 0
    for item in items:
        total += 1 + _weight(item, inner, limit - total)
        if total > limit:
            break
    return total


def _wrong_items(value: Any, kind: int) -> Iterator[int]:
    """Positions of the items of a list or map of strings that validation will reject, exactly."""
    if kind == _STRINGS:
        return (i for i, item in enumerate(value) if type(item) is not str)
    if kind == _STRING_MAP:
        return (i for i, (k, v) in enumerate(value.items()) if type(k) is not str or type(v) is not str)
    if kind == _TEXT_MAP:
        return (i for i, (k, v) in enumerate(value.items()) if type(k) is not str or not _valid_text(v))
    return (
        i
        for i, item in enumerate(value)
        if not isinstance(item, Mapping) or any(type(k) is not str or type(v) is not str for k, v in item.items())
    )


def _valid_text(value: Any) -> bool:
    return type(value) is str or (
        isinstance(value, Mapping)
        and bool(value)
        and all(type(k) is str and is_tag(k) and type(v) is str for k, v in value.items())
    )


# --- validating in pieces -----------------------------------------------------------------------------

_FAILED: Any = object()


class _Run:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.errors: list[ErrorDetails] = []
        self.unchecked: list[tuple[Path, int, int]] = []

    def call(self, adapter: TypeAdapter[Any], value: Any, path: Path, offset: int = 0) -> Any:
        """Validate in one call; errors are located under ``path`` (list positions shifted by ``offset``)."""
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                loc = tuple(error.get("loc", ()))
                if offset and loc and isinstance(loc[0], int):
                    loc = (loc[0] + offset, *loc[1:])
                error["loc"] = (*path, *loc)
                self.errors.append(error)
            return _FAILED

    @property
    def spent(self) -> bool:
        return len(self.errors) >= self.budget

    def model(self, model: type[BaseModel], value: Any, path: Path) -> Any:
        """Validate a large mapping as ``model``: its big parts first, then itself around the built parts."""
        if not isinstance(value, Mapping):
            return self.call(_adapter(model), value, path)
        parts = dict(value)
        failed = False
        for key, kind, inner in _fields(model):
            if key not in value:
                continue
            if self.spent:  # stop descending: the rest is reported as not checked, not validated
                built = _FAILED
                if isinstance(value[key], (list, Mapping)) and value[key]:
                    self.unchecked.append(((*path, key), 0, len(value[key])))
            else:
                built = self.part(value[key], kind, inner, (*path, key))
            if built is _FAILED:
                failed = True
                parts[key] = {} if kind in (_MODEL_MAP, _STRING_MAP, _TEXT_MAP) else None if kind == _MODEL else []
            else:
                parts[key] = built
        result = self.call(_adapter(model), parts, path)
        return _FAILED if failed else result

    def part(self, value: Any, kind: int, inner: Any, path: Path) -> Any:
        """A field's value as its parent should be handed it: built models, trimmed strings, or as it was."""
        room = self.budget - len(self.errors)
        if kind == _MODEL:
            if _weight(value, inner, PIECE) <= PIECE:
                return value  # the parent's own call validates it
            return self.model(inner, value, path)
        if kind in (_STRINGS, _STRING_MAP, _MAPS, _TEXT_MAP):
            if _field_weight(value, kind, inner, room) <= room:
                return value
            return self.trimmed(value, kind, path, room)
        if kind == _MODELS and isinstance(value, list):
            return self.models(value, inner, path)
        if kind == _MODEL_MAP and isinstance(value, Mapping):
            return self.model_map(value, inner, path)
        return value  # not a list or map: the parent reports it

    def trimmed(self, value: Any, kind: int, path: Path, room: int) -> Any:
        """Strings (or maps of them) up to just before the wrong item that would pass the budget."""
        for seen, position in enumerate(_wrong_items(value, kind)):
            if seen == room:
                self.unchecked.append((path, position, len(value) - position))
                if kind in (_STRING_MAP, _TEXT_MAP):
                    return dict(list(value.items())[:position])
                return value[:position]
        return value

    def models(self, items: list[Any], model: type[BaseModel], path: Path) -> Any:
        built: list[Any] = []
        failed = False
        for start, stop, single in self.runs(items, model, path):
            if single:
                result = self.model(model, items[start], (*path, start))
                results = [result]
            else:
                result = self.call(_adapter(list[model]), items[start:stop], path, offset=start)  # type: ignore[valid-type]
                results = result if result is not _FAILED else [_FAILED]
            if result is _FAILED:
                failed = True
            built.extend(results)
        return _FAILED if failed or len(built) != len(items) else built

    def model_map(self, items: Mapping[Any, Any], model: type[BaseModel], path: Path) -> Any:
        keys = list(items)
        values = list(items.values())
        built: dict[Any, Any] = {}
        failed = False
        for start, stop, single in self.runs(values, model, path):
            if single:
                result = self.model(model, values[start], (*path, keys[start]))
                if result is not _FAILED:
                    built[keys[start]] = result
            else:
                piece = {keys[i]: values[i] for i in range(start, stop)}
                result = self.call(_adapter(dict[str, model]), piece, path)  # type: ignore[valid-type]
                if result is not _FAILED:
                    built.update(result)
            failed = failed or result is _FAILED
        return _FAILED if failed or len(built) != len(items) else built

    def runs(self, items: list[Any], model: type[BaseModel], path: Path) -> Iterator[tuple[int, int, bool]]:
        """(start, stop, alone): runs of items that can make at most PIECE errors together, and alone an item
        that can make more (to be validated in pieces itself). Once the budget is spent the rest is recorded
        as not checked."""
        start = weight = 0
        for index, item in enumerate(items):
            cost = 1 + _weight(item, model, PIECE)
            if index > start and (cost > PIECE or weight + cost > PIECE):
                if self.spent:
                    break
                yield start, index, False
                start, weight = index, 0
            if cost > PIECE:
                if self.spent:
                    break
                yield index, index + 1, True
                start = index + 1
                continue
            weight += cost
        if start < len(items):
            if self.spent:
                self.unchecked.append((path, start, len(items) - start))
            else:
                yield start, len(items), False


def _cut(data: Any, parts: Path, position: int) -> Any:
    """A copy of ``data`` in which the list or map at ``parts`` keeps only its first ``position`` items."""
    if not parts:
        if isinstance(data, list):
            return data[:position]
        if isinstance(data, Mapping):
            return dict(list(data.items())[:position])
        return data
    head, rest = parts[0], parts[1:]
    if isinstance(data, Mapping) and head in data:
        copy = dict(data)
        copy[head] = _cut(data[head], rest, position)
        return copy
    if isinstance(data, list) and isinstance(head, int) and 0 <= head < len(data):
        copy_list = list(data)
        copy_list[head] = _cut(data[head], rest, position)
        return copy_list
    return data


__all__ = ["PIECE", "Validated", "validate"]
