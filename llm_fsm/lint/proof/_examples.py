"""Strings that match a key's ``pattern``, so the checker can write a value the declaration accepts.

A key declared ``pattern: ^R-[0-9]{4}$`` takes no value the checker could guess, and a key it cannot write is a
key it cannot prove anything about. Regular expressions are parsed by Python's own parser (``re._parser``, the one
``re.compile`` uses) and walked to build the shortest string each branch allows, then the longest-but-bounded one;
every string is checked against the compiled pattern before it is offered, so a construct this walk does not know
(look-arounds, back-references) costs an example, never a wrong one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from re import _constants as _c  # type: ignore[attr-defined]  # 3.11+: the parser behind re.compile
from re import _parser as _p  # type: ignore[attr-defined]
from typing import Any

_CATEGORY = {
    "CATEGORY_DIGIT": ("0", "7"),
    "CATEGORY_NOT_DIGIT": ("a", "z"),
    "CATEGORY_SPACE": (" ", " "),
    "CATEGORY_NOT_SPACE": ("a", "z"),
    "CATEGORY_WORD": ("a", "z"),
    "CATEGORY_NOT_WORD": ("-", "."),
}


class _Unsupported(Exception):
    pass


def _walk(tokens: Any, longest: bool) -> str:
    out: list[str] = []
    for op, arg in tokens:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "NOT_LITERAL":
            out.append("a" if chr(arg) != "a" else "b")
        elif name == "ANY":
            out.append("a")
        elif name == "IN":
            out.append(_in(arg, longest))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            count = low if not longest else min(max(low, 1), high if high != _c.MAXREPEAT else low + 2, low + 2)
            out.append(_walk(sub, longest) * count)
        elif name == "SUBPATTERN":
            out.append(_walk(arg[-1], longest))
        elif name == "BRANCH":
            branches = arg[1]
            out.append(_walk(branches[-1] if longest else branches[0], longest))
        elif name == "AT":
            continue
        else:
            raise _Unsupported(name)
    return "".join(out)


def _in(items: Any, longest: bool) -> str:
    if items and str(items[0][0]) == "NEGATE":
        return "a"
    for op, arg in items if not longest else reversed(items):
        name = str(op)
        if name == "LITERAL":
            return chr(arg)
        if name == "RANGE":
            return chr(arg[1] if longest else arg[0])
        if name == "CATEGORY":
            pair = _CATEGORY.get(str(arg))
            if pair is not None:
                return pair[1] if longest else pair[0]
    raise _Unsupported("IN")


def pattern_examples(pattern: str) -> Iterator[str]:
    """Up to two strings the pattern matches (searched, as the engine checks a pattern), or none."""
    try:
        compiled = re.compile(pattern)
        parsed = _p.parse(pattern)
    except (re.error, RecursionError, ValueError):
        return
    seen: set[str] = set()
    for longest in (False, True):
        try:
            text = _walk(parsed, longest)
        except (_Unsupported, RecursionError, OverflowError, ValueError, TypeError, IndexError):
            continue
        if text and text not in seen and compiled.search(text):
            seen.add(text)
            yield text


__all__ = ["pattern_examples"]
