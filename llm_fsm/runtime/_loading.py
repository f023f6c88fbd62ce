"""Definitions from files, ids or dicts: read → parse → check → ``FSMDefinition``; cached.

The I/O edge of the definition language. Parsing lives in ``documents`` and
every check in ``lint``; this module finds the file, reads it under a size cap,
and refuses a definition only for findings that make it unrunnable (schema,
version, state id mismatch, missing initial or target state, invalid logic —
the rules marked ``blocks_loading``). Warnings and graph findings such as
unreachable states are fsm-lint's business, not a reason to refuse to run.

Every failure is a ``DefinitionError`` naming the file, the JSON path and the
line when known; a pydantic ``ValidationError`` never escapes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_fsm.definition._documents import ParsedDocument, parse_text
from llm_fsm.definition._migrations import flow_declarations
from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.errors import DefinitionError, DefinitionNotFoundError, LocatedError
from llm_fsm.lint._linter import lint_document
from llm_fsm.lint._rules import Diagnostic

logger = logging.getLogger(__name__)

#: files larger than this are refused before parsing (override per call with ``max_bytes``)
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
#: a file may hold one object or array per this many bytes of ``max_bytes`` (524,288 for the default): built,
#: each costs 60 to 200 bytes, so a file of nothing but brackets would otherwise cost 40 times its size
BYTES_PER_CONTAINER = 10
#: environment variable: extra definition directories, separated by os.pathsep
DEFINITIONS_ENV = "LLM_FSM_DEFINITIONS"
SUFFIXES = (".json", ".yaml", ".yml")

PathLike = str | os.PathLike[str]


def default_search_path() -> list[Path]:
    """Where ids are looked up: the working directory, ``./definitions``, then $LLM_FSM_DEFINITIONS."""
    cwd = Path.cwd()
    dirs = [cwd, cwd / "definitions"]
    for entry in os.environ.get(DEFINITIONS_ENV, "").split(os.pathsep):
        if entry.strip():
            dirs.append(Path(entry.strip()).expanduser())
    return dirs


def resolve_definition_path(id_or_path: PathLike, search_path: Iterable[PathLike] | None = None) -> Path:
    """The file an id or path names.

    An existing file path wins. Otherwise, in each search directory in order:
    ``<dir>/<id>``, then ``<dir>/<id>.json``, ``.yaml``, ``.yml``. Ids that climb
    out of a directory (``..``) or are absolute are only accepted as exact paths.
    """
    text = os.fspath(id_or_path)
    if not text or "\x00" in text:
        raise DefinitionNotFoundError(f"not a definition id or path: {text!r}")
    exact = Path(text).expanduser()
    if exact.is_file():
        return exact.resolve()
    if exact.is_dir():
        raise DefinitionNotFoundError("is a directory, not a definition file", file=text)
    dirs = list(search_path) if search_path is not None else default_search_path()
    tried: list[str] = []
    if not exact.is_absolute() and ".." not in exact.parts:
        names = [text] + ([] if text.lower().endswith(SUFFIXES) else [text + s for s in SUFFIXES])
        for directory in dirs:
            for name in names:
                candidate = Path(directory) / name
                tried.append(str(candidate))
                if candidate.is_file():
                    return candidate.resolve()
    where = f"; looked in {', '.join(str(d) for d in dirs)}" if tried else ""
    raise DefinitionNotFoundError(f"no definition file or id {text!r}{where}", file=text)


def read_document(path: PathLike, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ParsedDocument:
    """Read and parse one file (JSON or YAML by suffix) under a size cap."""
    name = os.fspath(path)
    raw = read_capped(name, max_bytes=max_bytes)
    return parse_text(raw, file=name, max_containers=max_bytes // BYTES_PER_CONTAINER)


def read_capped(
    path: str | os.PathLike[str],
    *,
    max_bytes: int,
    what: str = "definition",
    error: type[LocatedError] = DefinitionError,
    not_found: type[LocatedError] = DefinitionNotFoundError,
) -> bytes:
    """A file's bytes, refusing more than ``max_bytes``; every failure is a located error naming the file.

    Shared by definitions and conversation scripts (which pass ``ScriptError``).
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            raw = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise not_found("file not found", file=name) from None
    except IsADirectoryError:
        raise not_found(f"is a directory, not a {what} file", file=name) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=name) from None
    if len(raw) > max_bytes:
        raise error(f"larger than the {max_bytes:,}-byte limit for {what}s", file=name)
    return raw


def definition_from_document(doc: ParsedDocument) -> FSMDefinition:
    """Check a parsed document and build the model; raise for findings that block loading."""
    result = lint_document(doc)
    blocking = [d for d in result.diagnostics if d.blocks_loading or d.code == "FSM099"]
    if blocking or result.definition is None:
        raise _error_from(blocking or list(result.errors), doc)
    for diagnostic in result.diagnostics:
        logger.debug("definition %s: %s %s %s", doc.file, diagnostic.code, diagnostic.path, diagnostic.message)
    return attach_source(result.definition, doc.file)


def _error_from(diagnostics: Sequence[Diagnostic], doc: ParsedDocument) -> DefinitionError:
    if not diagnostics:  # cannot happen with the current rules; keep the error typed anyway
        return DefinitionError("invalid definition", file=doc.file, path="$")
    first = diagnostics[0]
    return DefinitionError(
        f"{first.message} [{first.code} {first.name}]",
        file=doc.file,
        path=first.path,
        line=first.line,
        problems=[(d.path, f"{d.message} [{d.code}]" + (f" (line {d.line})" if d.line else "")) for d in diagnostics],
    )


def resolve_flow_reference(reference: str, parent_source: str | None) -> str:
    """What to hand the loader for a sub-flow's ``definition``: the path next to the parent's
    file when such a file exists, else the reference as written (an id or a path the loader
    resolves on its search path). The engine and fsm-lint both call this, so lint looks
    exactly where a running conversation will."""
    if parent_source and reference and not os.path.isabs(reference):
        candidate = os.path.join(os.path.dirname(parent_source), reference)
        if os.path.isfile(candidate):
            return candidate
    return reference


def attach_source(definition: FSMDefinition, file: str | None) -> FSMDefinition:
    """Record the file a definition came from (relative sub-flow paths start from its folder)."""
    if file and "_source" in type(definition).__private_attributes__:
        definition._source = file
    return definition


# --- the cache ---------------------------------------------------------------------------

_RACY_NS = 2_000_000_000  # a file modified this close to when we read it may change unseen


@dataclass
class _Entry:
    signature: tuple[int, int, int]
    digest: str
    racy: bool
    definition: FSMDefinition


class DefinitionCache:
    """Definitions by resolved path; an entry is reused while the file is unchanged.

    "Unchanged" is judged by (mtime_ns, size, inode). Like git's racy-clean
    rule, an entry read within two seconds of the file's mtime is not trusted on
    its signature alone: the content hash decides, so an edit that keeps the size
    inside one timestamp tick is still seen.
    """

    def __init__(self) -> None:
        self._entries: dict[Path, _Entry] = {}
        self._lock = threading.Lock()

    def get(self, path: Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> FSMDefinition:
        name = str(path)
        try:
            stat = path.stat()
        except OSError as exc:
            raise DefinitionNotFoundError(f"cannot read: {exc.strerror or exc}", file=name) from None
        signature = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        with self._lock:
            entry = self._entries.get(path)
        if entry is not None and entry.signature == signature and not entry.racy:
            return entry.definition
        read_at = time.time_ns()
        raw = read_capped(name, max_bytes=max_bytes)
        digest = hashlib.sha256(raw).hexdigest()
        racy = read_at - stat.st_mtime_ns < _RACY_NS
        if entry is not None and entry.digest == digest:
            definition = entry.definition
        else:
            document = parse_text(raw, file=name, max_containers=max_bytes // BYTES_PER_CONTAINER)
            definition = definition_from_document(document)
        with self._lock:
            self._entries[path] = _Entry(signature, digest, racy, definition)
        return definition

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


_default_cache = DefinitionCache()


def clear_definition_cache() -> None:
    """Forget every cached definition (the next load re-reads its file)."""
    _default_cache.clear()


def load_fsm_definition(
    source: PathLike | Mapping[str, Any] | FSMDefinition,
    *,
    search_path: Iterable[PathLike] | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    cache: DefinitionCache | None = _default_cache,
) -> FSMDefinition:
    """A definition from a path, an id, a dict or a model.

    Paths and ids: ``.json``, ``.yaml`` or ``.yml``; ids are resolved with
    ``resolve_definition_path`` (``search_path`` replaces the default
    directories). Files are cached by resolved path until they change; pass
    ``cache=None`` to always read. Raises ``DefinitionNotFoundError`` or
    ``DefinitionError`` (with file, JSON path and line).
    """
    if isinstance(source, FSMDefinition):
        return source
    if isinstance(source, Mapping):
        return definition_from_document(ParsedDocument(data=dict(source)))
    if not isinstance(source, (str, os.PathLike)):
        raise DefinitionError(f"cannot load a definition from a {type(source).__name__}")
    path = resolve_definition_path(source, search_path)
    if cache is None:
        return definition_from_document(read_document(path, max_bytes=max_bytes))
    return cache.get(path, max_bytes=max_bytes)


def flow_resolver(
    *, search_path: Iterable[PathLike] | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> Callable[[FlowDeclaration, FSMDefinition], FSMDefinition]:
    """A sub-flow loader for ``llm_fsm.lint.prove`` and ``lint_flows``: a declaration's ``definition`` read next to
    its parent's file, else on the search path, exactly where a running conversation looks."""

    def resolve(declaration: FlowDeclaration, parent: FSMDefinition) -> FSMDefinition:
        reference = resolve_flow_reference(declaration.definition, parent.source)
        return load_fsm_definition(reference, search_path=search_path, max_bytes=max_bytes)

    return resolve


def sub_flows(
    definition: FSMDefinition, *, resolve: Callable[[FlowDeclaration, FSMDefinition], FSMDefinition] | None = None
) -> tuple[dict[str, FSMDefinition], list[str]]:
    """Every sub-flow ``definition`` calls, at any depth, by declared name, loaded where a conversation would find
    them; and the names of those that could not be loaded (a replay reports the turns needing them)."""
    load = resolve or flow_resolver()
    found: dict[str, FSMDefinition] = {}
    missing: list[str] = []
    waiting = [definition]
    while waiting:
        parent = waiting.pop()
        for declaration in flow_declarations(parent):
            if declaration.name in found or declaration.name in missing:
                continue
            try:
                found[declaration.name] = load(declaration, parent)
            except DefinitionError:
                missing.append(declaration.name)
                continue
            waiting.append(found[declaration.name])
    return found, missing


__all__ = [
    "sub_flows",
    "DEFAULT_MAX_BYTES",
    "DEFINITIONS_ENV",
    "flow_resolver",
    "DefinitionCache",
    "clear_definition_cache",
    "default_search_path",
    "definition_from_document",
    "attach_source",
    "load_fsm_definition",
    "read_document",
    "resolve_definition_path",
    "resolve_flow_reference",
]
