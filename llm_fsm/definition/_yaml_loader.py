"""YAML restricted to JSON data, for hostile input: aliases are refused (an alias bomb expands exponentially
once walked), so are tags that build values JSON has not (binary, sets, timestamps), nesting is bounded
before libyaml recurses in C, and so is the number of nodes before they are composed (each costs about
500 bytes with its marks, its value and its line: a 4.8 MB list of scalars took 1.3 GB). Also the line of
each value, from the composed nodes. ``parse_yaml`` in ``_documents`` turns what goes wrong here into a
DefinitionError."""

from __future__ import annotations

from typing import Any

import yaml

from llm_fsm.definition._paths import Path, format_path
from llm_fsm.errors import DefinitionError

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
    nodes (scalars, mappings and sequences), counted as they are composed."""

    max_nodes: int | None = None
    nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: D401 - PyYAML hook
        if self.check_event(yaml.AliasEvent):
            parser: Any = self  # PyYAML's stubs leave peek_event untyped
            raise _AliasRefused(parser.peek_event().start_mark.line + 1)
        if self.max_nodes is not None:
            self.nodes += 1
            if self.nodes > self.max_nodes:
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
        pure-Python reader (a 0.6 MB file: 0.46 s instead of 2.1 s). Aliases and the node limit cannot be
        hooked into C composition, so ``_prescan`` checks them on libyaml's event stream first (0.07 s)."""

    _CDefinitionLoader.yaml_constructors = _DefinitionLoader.yaml_constructors
    _CDefinitionLoader.yaml_implicit_resolvers = _DefinitionLoader.yaml_implicit_resolvers


_MAX_C_DEPTH = 500
"""Nesting refused before libyaml composes (the pure-Python loader gave up near 1,000 with a RecursionError;
the constructor, in Python, recurses too)."""


def _prescan(text: str, max_nodes: int | None) -> None:
    """Refuse aliases and count nodes on the C event stream, before anything is built."""
    nodes = depth = 0
    for event in yaml.parse(text, Loader=_CLoader):
        if isinstance(event, yaml.ScalarEvent):
            nodes += 1
            if max_nodes is not None and nodes > max_nodes:
                raise _TooMany
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            nodes += 1
            depth += 1
            if max_nodes is not None and nodes > max_nodes:
                raise _TooMany
            if depth > _MAX_C_DEPTH:
                raise RecursionError  # libyaml composes recursively in C: this deep it would crash the process
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            raise _AliasRefused(event.start_mark.line + 1 if event.start_mark else 0)


def _compose(text: str, max_nodes: int | None) -> tuple[Any, Any]:
    """(node, data) of the single document in ``text``, with libyaml when PyYAML was built with it; ``_TooMany``
    when it holds more than ``max_nodes`` nodes."""
    loader: Any = None
    try:
        if _CLoader is not None:
            _prescan(text, max_nodes)
            loader = _CDefinitionLoader(text)
        else:
            loader = _DefinitionLoader(text)  # the reader rejects control characters right here
            loader.max_nodes = max_nodes
        node = loader.get_single_node()
        return node, (loader.construct_document(node) if node is not None else None)
    finally:
        if loader is not None:
            loader.dispose()


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
