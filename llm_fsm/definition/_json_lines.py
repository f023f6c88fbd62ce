"""Where each value of a JSON text starts, found when asked (``JsonLines``): ``json`` keeps no positions, and a
finding needs the line of its value, not the lines of every value."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from json.scanner import make_scanner
from typing import Any, cast

from llm_fsm.definition._paths import Path, PathPart


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _after_space(text: str, pos: int) -> int:
    """The position of the first non-whitespace character at or after ``pos``."""
    match = _WHITESPACE.match(text, pos)
    return match.end() if match else pos


def _drop(pairs: list[tuple[str, Any]]) -> None:
    return None


_Scanner = Callable[[str, int], tuple[Any, int]]
_SKIPPING = json.JSONDecoder(object_pairs_hook=_drop, parse_constant=_reject_constant)
#: the C scanner, to step over a value without building it as dicts (objects become None)
_skip_value: _Scanner = make_scanner(cast(Any, _SKIPPING))
_read_key: _Scanner = make_scanner(cast(Any, json.JSONDecoder()))

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]]|[^\s{}\[\]:,"]+', re.S)


class _Container:
    """One object or array of the text, its members located as far as a lookup needed."""

    __slots__ = (
        "start",
        "is_object",
        "cursor",
        "cursor_line",
        "pending",
        "children",
        "complete",
        "end",
        "repeats",
        "occurrences",
    )

    def __init__(self, start: int, line: int, *, repeats: bool) -> None:
        self.start = start
        self.is_object = True  # set by the caller
        self.cursor = start + 1  # just past the last member stepped over
        self.cursor_line = line
        #: (position, line) of the last member's value, not stepped over until the next member is wanted:
        #: a lookup descends into it, and stepping over a large value costs what parsing it does
        self.pending: tuple[int, int] | None = None
        #: key or index → (line of the member, position of its value, line of its value)
        self.children: dict[PathPart, tuple[int, int, int]] = {}
        self.complete = False
        self.end = 0  # just past the closing bracket, once complete
        #: a key of this object appears twice: only the last occurrence counts, so look at all of them
        self.repeats = repeats
        #: key → [(position, line)] of every occurrence, kept for objects that repeat a key
        self.occurrences: dict[str, list[tuple[int, int]]] = {}


class JsonLines(Mapping[Path, int]):
    """Where each value of a valid JSON text starts, found when asked.

    ``json`` keeps no positions, and a full scan of a large file in Python costs
    ten times its parse; yet lint needs the lines of a handful of findings.
    So a lookup walks down its path only, stepping over the values before it
    with the C scanner (built as nothing bigger than lists and scalars), and
    remembers what it located for the next lookup. A path's line is the line of
    its key (object members) or of the first character of its value (array
    items, the root); a repeated key's last occurrence counts.

    Iterating (``dict(lines)``) locates every value: for tools and tests, not
    for lint.
    """

    def __init__(self, text: str, *, repeated: Iterable[Path] = ()) -> None:
        self.text = text
        self._root = _after_space(text, 0)
        self._root_line = text.count("\n", 0, self._root) + 1
        self._repeated = set(repeated)
        self._containers: dict[int, _Container] = {}
        self._lock = threading.Lock()
        #: values stepped over by the scanner so far (the work lookups cost; tests count it)
        self.skipped = 0

    # --- Mapping: exact paths --------------------------------------------------------

    def __getitem__(self, parts: Path) -> int:
        found, line = self._walk(tuple(parts))
        if not found:
            raise KeyError(parts)
        return line

    def __iter__(self) -> Iterator[Path]:
        return iter(self._everything())

    def __len__(self) -> int:
        return len(self._everything())

    def line_for(self, parts: Path) -> int:
        """The line of ``parts``, or of the nearest ancestor that exists."""
        return self._walk(tuple(parts))[1]

    # --- walking --------------------------------------------------------------------

    def _walk(self, parts: Path) -> tuple[bool, int]:
        """(whether the whole path exists, the line of its longest existing prefix)."""
        with self._lock:
            pos, value_line, line = self._root, self._root_line, self._root_line
            path: Path = ()
            for part in parts:
                container = self._container(pos, value_line, path)
                entry = self._child(container, part) if container is not None else None
                if entry is None:
                    return False, line
                line, pos, value_line = entry
                path = (*path, part)
            return True, line

    def _container(self, pos: int, line: int, path: Path) -> _Container | None:
        char = self.text[pos]
        if char != "{" and char != "[":
            return None
        container = self._containers.get(pos)
        if container is None:
            container = self._containers[pos] = _Container(pos, line, repeats=path in self._repeated)
            container.is_object = char == "{"
        return container

    def _child(self, container: _Container, part: PathPart) -> tuple[int, int, int] | None:
        children = container.children
        if container.is_object:
            if not isinstance(part, str):
                return None
        elif not isinstance(part, int) or isinstance(part, bool) or part < 0:
            return None
        while not container.complete:
            if part in children and not container.repeats:
                break
            self._advance(container)
        return children.get(part)

    def _advance(self, container: _Container) -> None:
        """Locate the next member of ``container``, or find that there is none."""
        text = self.text
        if container.pending is not None:
            value, value_line = container.pending
            end = self._skip(value)
            container.cursor = end
            container.cursor_line = value_line + text.count("\n", value, end)
            container.pending = None
        pos = _after_space(text, container.cursor)
        if text[pos] == ",":
            pos = _after_space(text, pos + 1)
        if text[pos] in "}]":
            container.complete = True
            container.end = pos + 1
            return
        line = container.cursor_line + text.count("\n", container.cursor, pos)
        if container.is_object:
            key, end = _read_key(text, pos)
            value = _after_space(text, _after_space(text, end) + 1)  # past the colon
            value_line = line + text.count("\n", pos, value)
            container.children[key] = (line, value, value_line)
            if container.repeats:
                container.occurrences.setdefault(key, []).append((pos, line))
        else:
            value, value_line = pos, line
            container.children[len(container.children)] = (line, value, value_line)
        container.pending = (value, value_line)

    def _skip(self, pos: int) -> int:
        """The position just past the value at ``pos``."""
        located = self._containers.get(pos)
        if located is not None and located.complete:
            return located.end
        self.skipped += 1
        try:
            return int(_skip_value(self.text, pos)[1])
        except RecursionError:  # nested deeper than this call stack allows the C scanner: count brackets
            depth = 0
            for match in _JSON_TOKEN.finditer(self.text, pos):
                token = match.group()
                if token in "{[":
                    depth += 1
                elif token in "}]":
                    depth -= 1
                if depth == 0:
                    return match.end()
            raise

    def _everything(self) -> dict[Path, int]:
        out: dict[Path, int] = {}
        stack: list[Path] = [()]
        while stack:
            path = stack.pop()
            found, line = self._walk(path)
            if not found:
                continue
            out[path] = line
            with self._lock:
                container = self._container(*self._value_at(path), path)
                if container is None:
                    continue
                while not container.complete:
                    self._advance(container)
                stack.extend((*path, part) for part in reversed(list(container.children)))
        return out

    def _value_at(self, parts: Path) -> tuple[int, int]:
        pos, value_line = self._root, self._root_line
        path: Path = ()
        for part in parts:
            container = self._container(pos, value_line, path)
            assert container is not None
            _, pos, value_line = container.children[part]
            path = (*path, part)
        return pos, value_line

    def duplicate_keys(self, limit: int) -> tuple[tuple[Path, int, int], ...]:
        """(path, line of a repeated occurrence, line of the one before it) for the objects that repeat a key,
        in the order of the text; at most ``limit``."""
        found: list[tuple[int, Path, int, int]] = []
        for parent in sorted(self._repeated, key=lambda p: self._value_at_located(p)[0]):
            with self._lock:
                container = self._container(*self._value_at(parent), parent)
                if container is None:
                    continue
                while not container.complete:
                    self._advance(container)
                for key, seen in container.occurrences.items():
                    for (pos, line), (_, previous) in zip(seen[1:], seen, strict=False):
                        found.append((pos, (*parent, key), line, previous))
            if len(found) >= limit:
                break
        found.sort(key=lambda entry: entry[0])
        return tuple((path, line, previous) for _, path, line, previous in found[:limit])

    def _value_at_located(self, parts: Path) -> tuple[int, int]:
        self._walk(parts)
        with self._lock:
            return self._value_at(parts)
