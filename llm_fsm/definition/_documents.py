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

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from llm_fsm.errors import DefinitionError

PathPart = str | int
Path = tuple[PathPart, ...]

#: formats a document can be parsed from
FORMATS = ("json", "yaml")

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


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
    be empty (a dict handed in by code has no lines). ``duplicate_keys`` lists
    the paths of keys that appeared twice in one object: JSON and YAML parsers
    silently keep the last one, which hides mistakes. Each entry is (path, line of
    the repeated key, line where the key first appeared); ``lines`` points at the
    last occurrence, the one that counts.
    """

    data: Any
    file: str | None = None
    lines: Mapping[Path, int] = field(default_factory=dict)
    duplicate_keys: tuple[tuple[Path, int, int], ...] = ()
    format: str | None = None

    def line_for(self, parts: Path) -> int | None:
        """The line of this path, or of its nearest ancestor that has one."""
        for end in range(len(parts), -1, -1):
            line = self.lines.get(parts[:end])
            if line is not None:
                return line
        return None


def parse_text(raw: bytes | str, *, file: str | None = None, fmt: str | None = None) -> ParsedDocument:
    """Parse JSON or YAML (chosen by ``fmt`` or the file suffix; JSON by default)."""
    if fmt is None:
        fmt = format_for(file)
    text = decode(raw, file=file)
    if fmt == "yaml":
        return parse_yaml(text, file=file)
    return parse_json(text, file=file)


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


def parse_json(text: str, *, file: str | None = None) -> ParsedDocument:
    """Strict JSON (no NaN/Infinity), plus a best-effort path→line map."""
    if not text.strip():
        raise DefinitionError(_EMPTY, file=file)
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise DefinitionError(f"not valid JSON: {exc.msg} (column {exc.colno})", file=file, line=exc.lineno) from None
    except RecursionError:
        raise DefinitionError("not loadable: JSON nested too deeply", file=file) from None
    except ValueError as exc:  # NaN / Infinity, huge integers
        raise DefinitionError(f"not valid JSON: {exc}", file=file) from None
    lines, duplicates = _json_lines(text)
    return ParsedDocument(data=data, file=file, lines=lines, duplicate_keys=duplicates, format="json")


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.S)


def _json_lines(text: str) -> tuple[dict[Path, int], tuple[tuple[Path, int, int], ...]]:
    """Walk the tokens of already-valid JSON and note the line where each value starts.

    A hand-rolled scan because ``json`` keeps no positions; it is iterative (a
    stack of open containers) so nesting depth costs nothing but memory.
    """
    lines: dict[Path, int] = {}
    duplicates: list[tuple[Path, int, int]] = []
    # frame: [is_object, path, expecting_key, current_key_or_index, seen_keys]
    stack: list[list[Any]] = []
    line = 1
    prev = 0
    for match in _JSON_TOKEN.finditer(text):
        start = match.start()
        line += text.count("\n", prev, start)
        prev = start
        tok = match.group()
        top = stack[-1] if stack else None
        if top is not None and top[0] and top[2]:
            if tok[0] == '"':
                key = tok[1:-1] if "\\" not in tok else json.loads(tok)
                path = (*top[1], key)
                if key in top[4]:
                    duplicates.append((path, line, lines[path]))
                    # the value that counts comes next: forget where the replaced one's parts were
                    depth = len(path)
                    for stale in [p for p in lines if len(p) > depth and p[:depth] == path]:
                        del lines[stale]
                else:
                    top[4].add(key)
                lines[path] = line
                top[3] = key
                top[2] = False
            elif tok == "}":
                stack.pop()
            continue
        if tok == ":":
            continue
        if tok == ",":
            if top is not None:
                if top[0]:
                    top[2] = True
                else:
                    top[3] += 1
            continue
        if tok in ("}", "]"):
            if stack:
                stack.pop()
            continue
        # the start of a value
        path = () if top is None else (*top[1], top[3])
        lines.setdefault(path, line)
        if tok == "{":
            stack.append([True, path, True, None, set()])
        elif tok == "[":
            stack.append([False, path, False, 0, None])
    return lines, tuple(duplicates)


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


class _DefinitionLoader(yaml.SafeLoader):
    """SafeLoader restricted to JSON data: no aliases, no timestamps, sets or binary."""

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D401 - PyYAML hook
        if self.check_event(yaml.AliasEvent):
            raise _AliasRefused(self.peek_event().start_mark.line + 1)
        return super().compose_node(parent, index)


_DefinitionLoader.yaml_constructors = {
    tag: ctor for tag, ctor in yaml.SafeLoader.yaml_constructors.items() if tag in _JSON_TAGS or tag is None
}
_DefinitionLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag in _JSON_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def parse_yaml(text: str, *, file: str | None = None) -> ParsedDocument:
    """Safe YAML restricted to JSON data, plus a path→line map from the node marks."""
    if not text.strip():
        raise DefinitionError(_EMPTY, file=file)
    loader: _DefinitionLoader | None = None
    try:
        loader = _DefinitionLoader(text)  # the reader rejects control characters right here
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except _AliasRefused as exc:
        raise DefinitionError(
            "YAML aliases (*name) are not allowed in definitions; write the value out", file=file, line=exc.line
        ) from None
    except yaml.MarkedYAMLError as exc:
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
    finally:
        if loader is not None:
            loader.dispose()
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
    "parse_json",
    "parse_text",
    "parse_yaml",
]
