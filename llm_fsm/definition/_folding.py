"""The one form names are compared in: enum values, synonyms, month names, what a user wrote.

A module of its own because both the declarations (``_keys``) and the expression finder (``_spoken``) compare
through it, and ``_keys`` reaches the finder (through ``_phone``) when it checks a declared region.
"""

from __future__ import annotations


def fold(text: str) -> str:
    """Case- and spacing-insensitive form used to match enum values, synonyms and month names."""
    return " ".join(text.casefold().split())


__all__ = ["fold"]
