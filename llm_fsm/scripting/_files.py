"""Telling a recording apart from a definition by its first bytes.

A module of its own, with nothing but the standard library: ``fsm-lint`` walks folders with it,
and must not pay for importing the script format's models to skip a recording.
"""

from __future__ import annotations

import os
import re

RECORDING_FORMAT = "llm-fsm-recording"
"""The ``format`` of the JSON files ``llm-fsm test --record`` writes (``_recording``)."""

_RECORDING_MARK = re.compile(rb'"format"\s*:\s*"' + RECORDING_FORMAT.encode() + rb'"')


def is_recording_file(path: str | os.PathLike[str]) -> bool:
    """A JSON file written by ``--record``: its head declares ``"format": "llm-fsm-recording"``.

    Recordings are JSON with keys such as ``initial_state``, and they are often
    kept next to the definitions, so a folder walk (``llm-fsm test``,
    ``fsm-lint``) must tell them apart from definitions without parsing
    50 MB: the writer puts ``format`` first, and the head is enough.
    """
    return _head_matches(path, (".json",), _RECORDING_MARK)


_MCP_CONFIG_MARK = re.compile(rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"mcpServers"\s*:|^mcpServers\s*:', re.MULTILINE)


def is_mcp_config_file(path: str | os.PathLike[str]) -> bool:
    """An MCP config (``--mcp CONFIG``): ``{"mcpServers": ...}`` first, or a top-level ``mcpServers:`` in YAML.

    It is kept beside the definitions whose ``mcp:SERVER/TOOL`` calls it serves (definitions/mcp/mcp.json), so a
    folder walk (``fsm-lint``, ``llm-fsm serve``) must not take it for a definition.
    """
    return _head_matches(path, (".json", ".yaml", ".yml"), _MCP_CONFIG_MARK)


def _head_matches(path: str | os.PathLike[str], suffixes: tuple[str, ...], mark: re.Pattern[bytes]) -> bool:
    """Whether a file with one of ``suffixes`` starts (in its first 4 KB) with ``mark``; an unreadable one does not."""
    if not os.fspath(path).lower().endswith(suffixes):
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return mark.search(head) is not None


__all__ = ["RECORDING_FORMAT", "is_mcp_config_file", "is_recording_file"]
