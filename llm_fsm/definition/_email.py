"""Email addresses as people write them: the stored form of a ``format: email`` key, and whether it is one.

A pure text module beside ``_spoken`` and ``_phone``: the engine's checks (``llm_fsm.engine._values``) and its
extractors read addresses the same way.
"""

from __future__ import annotations

import re

_EMAIL = re.compile(r"[A-Za-z0-9._%+\-']+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")


def normalised(text: str) -> str:
    """``text`` without ``<…>`` or ``mailto:``, its domain lower-cased (what ``format: email`` stores)."""
    cleaned = text.strip().strip("<>").strip()
    if cleaned.lower().startswith("mailto:"):
        cleaned = cleaned[7:]
    local, at, domain = cleaned.rpartition("@")
    return f"{local}@{domain.lower()}" if at else cleaned


def looks_like(text: str) -> bool:
    """Whether ``text`` has the shape of an address: one ``@`` and a dotted domain."""
    return _EMAIL.fullmatch(text) is not None


__all__ = ["looks_like", "normalised"]
