"""Phone numbers as people write them: whether a ``format: phone`` value is one.

A pure text module beside ``_spoken`` and ``_email``: the engine's checks (``llm_fsm.engine._values``) read
numbers here.
"""

from __future__ import annotations

import re

_PHONE = re.compile(r"\+?[0-9 ()./\-]{7,25}")


def looks_like(text: str) -> bool:
    """Whether ``text`` is written like a phone number: digits, spaces and ``+ ( ) . / -``, 7 to 15 digits."""
    return _PHONE.fullmatch(text) is not None and 7 <= sum(c.isdigit() for c in text) <= 15


__all__ = ["looks_like"]
