"""How every message names a place in a document: a path of keys and indices, spelt the way jsonschema spells
it (``$.states.greeting.transitions[0]``). Parsing, validation, lint and scripts all report places, so they
share one spelling."""

from __future__ import annotations

import re
from collections.abc import Iterable

PathPart = str | int
Path = tuple[PathPart, ...]

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
