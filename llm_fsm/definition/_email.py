"""Email addresses as people write them: the stored form of a ``format: email`` key, why one is no address, and
the addresses of a text.

What an address may be is RFC 5321/5322 (and 6531 for Unicode mailboxes, IDNA 2008 / UTS #46 for Unicode
domains): the regular expression this module had took ``ada@ＥＸＡＭＰＬＥ.com`` for no address and ``ada@-x.com``
for one, and said only "is not an email address". email-validator implements those standards, says what is wrong
in a sentence written for a user ("An email address cannot have two periods in a row."), normalises the domain
(lower case, IDNA) and is maintained (releases every few months, typed). It is an optional extra, imported on first
use (~20 ms), never by ``import llm_fsm``; it is asked about syntax only (``check_deliverability=False``): no DNS
query, ever. Without it, the regular expression decides as it always did.
"""

from __future__ import annotations

import functools
import re
from types import ModuleType

from llm_fsm.definition._spoken import Found

_EMAIL = re.compile(r"[A-Za-z0-9._%+\-']+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}")
# what may be an address in a text: a run around an @ without spaces or the punctuation around addresses
_CANDIDATE = re.compile(r"""[^\s<>()\[\],;:"@]+@[^\s<>()\[\],;:"@]+""")
_AROUND = "'.!?"  # quotes and sentence punctuation written next to an address, not part of it


def library() -> ModuleType | None:
    """The ``email_validator`` module, or None without it (imported on each call: a test can take it away)."""
    try:
        import email_validator
    except ImportError:
        return None
    return email_validator


@functools.lru_cache(maxsize=1024)
def _validated(text: str) -> tuple[str | None, str | None]:
    """email-validator's normal form of ``text``, or its reason why it is no address (one of the two is None).

    Remembered: a write normalises then checks the same text, and the finder reads a message once per key.
    Called only when the library is importable, so taking it away is seen at once.
    """
    import email_validator

    try:
        return email_validator.validate_email(text, check_deliverability=False).normalized, None
    except email_validator.EmailNotValidError as exc:
        return None, str(exc)


def _unwrapped(text: str) -> str:
    cleaned = text.strip().strip("<>").strip()
    return cleaned[7:] if cleaned.lower().startswith("mailto:") else cleaned


def _plain(text: str) -> str:
    local, at, domain = text.rpartition("@")
    return f"{local}@{domain.lower()}" if at else text


def normalised(text: str) -> str:
    """What ``format: email`` stores for ``text``: without ``<…>`` or ``mailto:``, the domain lower-cased (and, with
    email-validator, in its normal Unicode form: ``ada@xn--bcher-kva.example`` is ``ada@bücher.example``).

    Not an address: returned as given, and validation says why.
    """
    cleaned = _unwrapped(text)
    stored = _validated(cleaned)[0] if library() is not None else None
    return stored if stored is not None else _plain(cleaned)


def problem(text: str, *, detail: bool = True) -> str | None:
    """Why ``text`` is no email address, completing "'ada@x' ..." (None when it is one).

    ``detail``: say what is wrong, which may quote part of the address (not for a masked value).
    """
    if library() is None:
        return None if _EMAIL.fullmatch(text) is not None else "is not an email address"
    why = _validated(text)[1]
    if why is not None:
        if not detail:
            return "is not an email address"
        why = why.rstrip(".")
        for subject in ("An email address ", "The email address "):  # said of the address the user is shown
            why = "It " + why.removeprefix(subject) if why.startswith(subject) else why
        return f"is not an email address: {why[:1].lower()}{why[1:]}"
    return None


def looks_like(text: str) -> bool:
    """Whether ``text`` is an email address (email-validator's rules, else one ``@`` and a dotted domain)."""
    return problem(text, detail=False) is None


def emails_in(text: str) -> tuple[Found, ...]:
    """Every email address written in ``text``, its value as ``format: email`` stores it, with its span.

    Candidates are runs around an ``@`` without spaces; quotes and a sentence's full stop next to one are not part
    of it; a candidate that is no address (``ada@example..com``, ``@ada``) is left out.
    """
    if "@" not in text:
        return ()
    return _emails_in(text, library() is not None)


@functools.lru_cache(maxsize=1024)
def _emails_in(text: str, with_library: bool) -> tuple[Found, ...]:
    """``emails_in``, remembered per text (grounding and the extractors read a message on several turns); keyed by
    whether the library reads the addresses too, since what is one depends on it."""
    found: list[Found] = []
    for match in _CANDIDATE.finditer(text):
        start, end = match.span()
        while start < end and text[start] in _AROUND:
            start += 1
        while end > start and text[end - 1] in _AROUND:
            end -= 1
        written = text[start:end]
        value = normalised(written)
        if looks_like(value):
            found.append(Found(value, start, end, written))
    return tuple(found)


__all__ = ["emails_in", "library", "looks_like", "normalised", "problem"]
