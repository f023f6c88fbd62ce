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

The parts with a concern of their own are beside it: ``_paths`` (how a place is spelt), ``_json_lines`` (the
line of a JSON value, found when asked) and ``_yaml_loader`` (the restricted YAML loaders).
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from llm_fsm.definition._json_lines import JsonLines, _reject_constant
from llm_fsm.definition._paths import Path, PathPart, format_path
from llm_fsm.definition._yaml_loader import _AliasRefused, _compose, _TooMany, _yaml_lines
from llm_fsm.errors import DefinitionError

#: formats a document can be parsed from
FORMATS = ("json", "yaml")


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
    raw: bytes | str,
    *,
    file: str | None = None,
    fmt: str | None = None,
    max_containers: int | None = None,
    kind: str = "definition",
) -> ParsedDocument:
    """Parse JSON or YAML (chosen by ``fmt`` or the file suffix; JSON by default).

    ``max_containers`` refuses a document of more objects and arrays, before they are built; in YAML, of more
    values of any kind (a composed YAML scalar costs what a container does, and more). ``kind`` names what the
    document is in that refusal (scripts and reply files are parsed here too).
    """
    if fmt is None:
        fmt = format_for(file)
    text = decode(raw, file=file)
    if fmt == "yaml":
        return parse_yaml(text, file=file, max_nodes=max_containers, kind=kind)
    return parse_json(text, file=file, max_containers=max_containers, kind=kind)


def _too_many(limit: int, file: str | None, kind: str) -> DefinitionError:
    return DefinitionError(f"more than {limit:,} objects and arrays; a {kind} has far fewer", file=file)


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


def parse_json(
    text: str, *, file: str | None = None, max_containers: int | None = None, kind: str = "definition"
) -> ParsedDocument:
    """Strict JSON (no NaN/Infinity), plus a path→line map computed on demand."""
    if not text.strip():
        raise DefinitionError(_EMPTY, file=file)
    if max_containers is not None and _json_containers(text, max_containers) > max_containers:
        raise _too_many(max_containers, file, kind)
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


# --- YAML ----------------------------------------------------------------------------


def parse_yaml(
    text: str, *, file: str | None = None, max_nodes: int | None = None, kind: str = "definition"
) -> ParsedDocument:
    """Safe YAML restricted to JSON data, plus a path→line map from the node marks.

    ``max_nodes`` refuses a document of more values (scalars, mappings and sequences) before they are composed:
    each costs about 500 bytes built, so a 4.8 MB list of scalars cost 1.3 GB and 11 s to lint.
    """
    if not text.strip():
        raise DefinitionError(_EMPTY, file=file)
    try:
        node, data = _compose(text, max_nodes)
    except _TooMany:
        limit = max_nodes or 0
        raise DefinitionError(
            f"more than {limit:,} YAML values (scalars, objects and arrays); a {kind} has far fewer", file=file
        ) from None
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


__all__ = [
    "FORMATS",
    "JsonLines",
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
