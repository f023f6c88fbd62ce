"""Definition documents as text: parsing JSON and YAML into plain data plus a map of lines.

Why a module of its own: ``lint`` and ``loading`` both need the same three
things from a file — the data, where each value sits (so a diagnostic can say
``greeting.yaml:14``) and the JSON path spelling used in every message. Keeping
the parsing here, over text already in memory, keeps it pure: the file system
is touched only by ``loading``.

Hostile input is expected. YAML aliases are refused outright (an alias bomb
expands exponentially once walked), tags that build non-JSON values (binary,
sets, timestamps) are refused, deep nesting ends in a DefinitionError rather
than a RecursionError, and every walk here is iterative.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from json.scanner import make_scanner
from typing import Any, cast

import yaml

from llm_fsm.errors import DefinitionError

PathPart = str | int
Path = tuple[PathPart, ...]

#: formats a document can be parsed from
FORMATS = ("json", "yaml")

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a large tree of objects is built, then restore it.

    Parsing a definition and building its model create hundreds of thousands of
    objects and no garbage cycles, yet every few hundred allocations the
    collector runs, and its full passes walk the whole growing heap: two thirds
    of the time of linting a large file. Nothing is freed later than it would
    be: reference counting frees as before, and cycles wait for the next pass.

    The collector is enabled again on the way out only if it was enabled on the
    way in, so a program that disabled it keeps it disabled; when two threads
    overlap, the first to finish enables it.

    On the way out the objects built meanwhile are moved to the oldest
    generation (``gc.freeze()`` then ``gc.unfreeze()``) without being walked:
    otherwise the first young collection after ``gc.enable()`` walks every one
    of them (millions for a large file, a third of linting it) only to find
    them alive. A garbage cycle among them waits for the next full collection.
    A program that froze objects of its own (``gc.get_freeze_count()``) keeps
    them frozen: the move is then skipped, and the young collection paid.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def format_path(parts: Iterable[PathPart]) -> str:
    """Spell a path the way jsonschema does: ``$.states.greeting.transitions[0]``.

    Keys that are not plain identifiers are bracketed and quoted
    (``$.states['my state']``) so every path can be read back unambiguously.
    """
    out = ["$"]
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out.append(f"[{part}]")
        else:
            key = str(part)
            if _IDENTIFIER.match(key):
                out.append(f".{key}")
            else:
                out.append("['" + key.replace("\\", "\\\\").replace("'", "\\'") + "']")
    return "".join(out)


@dataclass(frozen=True)
class ParsedDocument:
    """A document parsed into plain data, with where each value came from.

    ``lines`` maps a path (tuple of keys and indices) to its 1-based line; it may
    be empty (a dict handed in by code has no lines); for JSON it is a
    ``JsonLines`` that finds lines when asked. ``duplicate_keys`` lists
    the paths of keys that appeared twice in one object: JSON and YAML parsers
    silently keep the last one, which hides mistakes. Each entry is (path, line of
    the repeated key, line where the key appeared before); ``lines`` points at the
    last occurrence, the one that counts.
    """

    data: Any
    file: str | None = None
    lines: Mapping[Path, int] = field(default_factory=dict)
    duplicate_keys: tuple[tuple[Path, int, int], ...] = ()
    format: str | None = None
    more_duplicate_keys: int = 0
    """Repeated keys beyond those listed in ``duplicate_keys`` (a hostile file may repeat a million)."""

    def line_for(self, parts: Path) -> int | None:
        """The line of this path, or of its nearest ancestor that has one."""
        if isinstance(self.lines, JsonLines):
            return self.lines.line_for(parts)
        for end in range(len(parts), -1, -1):
            line = self.lines.get(parts[:end])
            if line is not None:
                return line
        return None


def parse_text(
    raw: bytes | str, *, file: str | None = None, fmt: str | None = None, max_containers: int | None = None
) -> ParsedDocument:
    """Parse JSON or YAML (chosen by ``fmt`` or the file suffix; JSON by default).

    ``max_containers`` refuses a document of more objects and arrays, before they are built.
    """
    if fmt is None:
        fmt = format_for(file)
    text = decode(raw, file=file)
    if fmt == "yaml":
        return parse_yaml(text, file=file, max_containers=max_containers)
    return parse_json(text, file=file, max_containers=max_containers)


def _too_many(limit: int, file: str | None) -> DefinitionError:
    return DefinitionError(f"more than {limit:,} objects and arrays; a definition has far fewer", file=file)


def format_for(file: str | None) -> str:
    """``yaml`` for ``.yaml``/``.yml`` files, ``json`` otherwise."""
    name = (file or "").lower()
    return "yaml" if name.endswith((".yaml", ".yml")) else "json"


def decode(raw: bytes | str, *, file: str | None = None) -> str:
    """UTF-8 (a BOM is allowed and dropped); anything else names the line of the bad byte."""
    if isinstance(raw, str):
        return raw[1:] if raw.startswith("\ufeff") else raw
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DefinitionError(
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save the file as UTF-8",
            file=file,
            line=line,
        ) from None


#: what a blank file is told, rather than "the top level must be an object (got null)"
_EMPTY = "file is empty"

# --- JSON ----------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(text: str, *, file: str | None = None, max_containers: int | None = None) -> ParsedDocument:
    """Strict JSON (no NaN/Infinity), plus a path→line map computed on demand."""
    if not text.strip():
        raise DefinitionError(_EMPTY, file=file)
    if max_containers is not None and _json_containers(text, max_containers) > max_containers:
        raise _too_many(max_containers, file)
    repeated = _Repeated()
    try:
        with paused_gc():
            data = json.loads(text, parse_constant=_reject_constant, object_pairs_hook=repeated.hook)
    except json.JSONDecodeError as exc:
        raise DefinitionError(f"not valid JSON: {exc.msg} (column {exc.colno})", file=file, line=exc.lineno) from None
    except RecursionError:
        raise DefinitionError("not loadable: JSON nested too deeply", file=file) from None
    except ValueError as exc:  # NaN / Infinity, huge integers
        raise DefinitionError(f"not valid JSON: {exc}", file=file) from None
    lines = JsonLines(text, repeated=repeated.paths(data))
    duplicates = lines.duplicate_keys(MAX_DUPLICATES_LISTED) if repeated.objects else ()
    return ParsedDocument(
        data=data,
        file=file,
        lines=lines,
        duplicate_keys=duplicates,
        more_duplicate_keys=repeated.count - len(duplicates),
        format="json",
    )


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)


def _json_containers(text: str, limit: int) -> int:
    """How many objects and arrays the text holds: a count of brackets, not looking inside strings
    unless the plain count passes ``limit`` (a memory bound: each costs 60 to 200 bytes once built)."""
    rough = text.count("[") + text.count("{")
    if rough <= limit:
        return rough
    inside = 0  # string by string, to hold no copy of the text (a file of short strings has a million)
    for match in _JSON_STRING.finditer(text):
        start, end = match.span()
        inside += text.count("[", start, end) + text.count("{", start, end)
    return rough - inside


#: repeated keys listed by position; past this many only their number is kept (a file can repeat a key a million times)
MAX_DUPLICATES_LISTED = 1_000


class _Repeated:
    """Notices, while ``json`` builds the data, the objects in which a key appears more than once."""

    def __init__(self) -> None:
        self.objects: list[dict[str, Any]] = []
        self.count = 0

    def hook(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            self.objects.append(obj)
            self.count += len(pairs) - len(obj)
        return obj

    def paths(self, data: Any) -> list[Path]:
        """Where those objects are, in document order (a walk of the data, needed only when there are any)."""
        wanted = {id(obj) for obj in self.objects[:MAX_DUPLICATES_LISTED]}
        found: list[Path] = []
        stack: list[tuple[Any, Path]] = [(data, ())]
        while stack and len(found) < len(wanted):
            value, path = stack.pop()
            if type(value) is dict:
                if id(value) in wanted:
                    found.append(path)
                stack.extend(((v, (*path, k)) for k, v in reversed(value.items())))
            elif type(value) is list:
                stack.extend(((v, (*path, i)) for i, v in reversed(list(enumerate(value)))))
        return found


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


# --- YAML ----------------------------------------------------------------------------

_JSON_TAGS = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:map",
}


class _AliasRefused(Exception):
    def __init__(self, line: int) -> None:
        self.line = line


class _TooMany(Exception):
    pass


class _DefinitionLoader(yaml.SafeLoader):
    """SafeLoader restricted to JSON data: no aliases, no timestamps, sets or binary; optionally a limit on
    mappings and sequences, counted as they are composed."""

    max_containers: int | None = None
    containers = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D401 - PyYAML hook
        if self.check_event(yaml.AliasEvent):
            parser: Any = self  # PyYAML's stubs leave peek_event untyped
            raise _AliasRefused(parser.peek_event().start_mark.line + 1)
        if self.max_containers is not None and self.check_event(yaml.MappingStartEvent, yaml.SequenceStartEvent):
            self.containers += 1
            if self.containers > self.max_containers:
                raise _TooMany
        return super().compose_node(parent, index)


_DefinitionLoader.yaml_constructors = {
    tag: ctor for tag, ctor in yaml.SafeLoader.yaml_constructors.items() if tag in _JSON_TAGS or tag is None
}
_DefinitionLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag in _JSON_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


_CLoader: Any = getattr(yaml, "CSafeLoader", None)


if _CLoader is not None:

    class _CDefinitionLoader(yaml.CSafeLoader):  # _CLoader itself, named so that type checkers know the class
        """The same restrictions on libyaml's parser: scanning and composing in C are ~5x faster than PyYAML's
        pure-Python reader (a 0.6 MB file: 0.46 s instead of 2.1 s). Aliases and the container limit cannot be
        hooked into C composition, so ``_prescan`` checks them on libyaml's event stream first (0.07 s)."""

    _CDefinitionLoader.yaml_constructors = _DefinitionLoader.yaml_constructors
    _CDefinitionLoader.yaml_implicit_resolvers = _DefinitionLoader.yaml_implicit_resolvers


_MAX_C_DEPTH = 500
"""Nesting refused before libyaml composes (the pure-Python loader gave up near 1,000 with a RecursionError;
the constructor, in Python, recurses too)."""


def _prescan(text: str, max_containers: int | None) -> None:
    """Refuse aliases and count mappings and sequences on the C event stream, before anything is built."""
    containers = depth = 0
    for event in yaml.parse(text, Loader=_CLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            containers += 1
            depth += 1
            if max_containers is not None and containers > max_containers:
                raise _TooMany
            if depth > _MAX_C_DEPTH:
                raise RecursionError  # libyaml composes recursively in C: this deep it would crash the process
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            raise _AliasRefused(event.start_mark.line + 1 if event.start_mark else 0)


def _compose(text: str, max_containers: int | None) -> tuple[Any, Any]:
    """(node, data) of the single document in ``text``, with libyaml when PyYAML was built with it."""
    loader: Any = None
    try:
        if _CLoader is not None:
            _prescan(text, max_containers)
            loader = _CDefinitionLoader(text)
        else:
            loader = _DefinitionLoader(text)  # the reader rejects control characters right here
            loader.max_containers = max_containers
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        if loader is not None:
            loader.dispose()


def parse_yaml(text: str, *, file: str | None = None, max_containers: int | None = None) -> ParsedDocument:
    """Safe YAML restricted to JSON data, plus a path→line map from the node marks."""
    if not text.strip():
        raise DefinitionError(_EMPTY, file=file)
    try:
        node, data = _compose(text, max_containers)
    except _TooMany:
        raise _too_many(max_containers or 0, file) from None
    except _AliasRefused as exc:
        raise DefinitionError(
            "YAML aliases (*name) are not allowed in definitions; write the value out", file=file, line=exc.line
        ) from None
    except yaml.MarkedYAMLError as exc:
        if "nesting depth" in str(exc.problem or ""):  # libyaml's own limit (PyYAML >= 6.0.4), before ours
            raise DefinitionError("not loadable: YAML nested too deeply", file=file) from None
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "invalid YAML"
        if exc.context:
            problem = f"{exc.context}; {problem}"
        raise DefinitionError(f"not valid YAML: {problem}", file=file, line=(mark.line + 1) if mark else None) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise DefinitionError(
            f"not valid YAML: {exc.reason} (character {exc.character!r})", file=file, line=line
        ) from None
    except yaml.YAMLError as exc:
        raise DefinitionError(f"not valid YAML: {exc}", file=file) from None
    except RecursionError:
        raise DefinitionError("not loadable: YAML nested too deeply", file=file) from None
    except (TypeError, ValueError) as exc:  # e.g. unhashable keys, int overflow in exotic forms
        raise DefinitionError(f"not valid YAML data: {exc}", file=file) from None
    if node is None:  # comments and document markers only: nothing was written yet
        raise DefinitionError(f"{_EMPTY}: it holds only comments", file=file)
    lines, duplicates = _yaml_lines(node, file=file)
    return ParsedDocument(data=data, file=file, lines=lines, duplicate_keys=duplicates, format="yaml")


def _yaml_lines(root: Any, *, file: str | None) -> tuple[dict[Path, int], tuple[tuple[Path, int, int], ...]]:
    """Walk the composed node tree (iteratively) for lines, duplicates and non-string keys."""
    lines: dict[Path, int] = {}
    duplicates: list[tuple[Path, int, int]] = []
    if root is None:
        return lines, ()
    stack: list[tuple[Any, Path]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            # the occurrence of a key that counts is its last one
            last = {k.value: i for i, (k, _) in enumerate(node.value) if isinstance(k, yaml.ScalarNode)}
            for position, (key_node, value_node) in enumerate(node.value):
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                    raise DefinitionError(
                        f"mapping key {getattr(key_node, 'value', '?')!r} is not a string; quote it",
                        file=file,
                        path=format_path(path),
                        line=key_node.start_mark.line + 1,
                    )
                key = key_node.value
                child = (*path, key)
                if key in seen:
                    duplicates.append((child, key_node.start_mark.line + 1, lines[child]))
                else:
                    seen.add(key)
                lines[child] = key_node.start_mark.line + 1
                if last[key] == position:
                    stack.append((value_node, child))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                stack.append((item, (*path, index)))
    return lines, tuple(duplicates)


__all__ = [
    "FORMATS",
    "ParsedDocument",
    "Path",
    "PathPart",
    "decode",
    "format_for",
    "format_path",
    "paused_gc",
    "parse_json",
    "parse_text",
    "parse_yaml",
]
