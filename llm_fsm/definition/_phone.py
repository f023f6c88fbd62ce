"""Phone numbers as people write them: validated, stored in E.164 and found in a text, in a declared region.

A key declared ``format: phone`` with a ``region`` (ISO 3166, ``GB``) stores one form, E.164 (``+442079460958``),
whether "+44 20 7946 0958", "020 7946 0958" or "(020) 7946-0958" was written, and a number is grounded when one the
user wrote is the same number. Which digit strings are numbers of which country (lengths, trunk and international
prefixes, the ranges in use) is libphonenumber's metadata of every region, kept up to date by its maintainers as
numbering plans change; ``phonenumbers`` is its Python port. No pattern written here keeps up with that: the
regular expression below takes any 7 to 15 digits ("12345 67") and refuses no number a region does not assign.

So the library reads the keys that declare a region. Without ``region`` a phone key keeps the regular expression
and lexical grounding and needs no library: the example definitions run on a core install. The library is an
optional extra, imported on first use (~30 ms), never by ``import llm_fsm``.
"""

from __future__ import annotations

import functools
import re
from types import ModuleType
from typing import Any

from llm_fsm.definition._spoken import Found

INSTALL_HINT = 'pip install -e ".[values]" from a checkout'

_PHONE = re.compile(r"\+?[0-9 ()./\-]{7,25}")
_REGION_CODE = re.compile(r"[A-Z]{2}")


def looks_like(text: str) -> bool:
    """Whether ``text`` is written like a phone number: digits, spaces and ``+ ( ) . / -``, 7 to 15 digits."""
    return _PHONE.fullmatch(text) is not None and 7 <= sum(c.isdigit() for c in text) <= 15


def library() -> ModuleType:
    """The ``phonenumbers`` module, or a ValueError saying how to install it (a declaration's load error).

    Imported on each call rather than remembered: after the first import it is a dictionary look-up, and a test
    can take the library away.
    """
    try:
        import phonenumbers
    except ImportError:
        raise ValueError(f"region needs phonenumbers: {INSTALL_HINT}") from None
    return phonenumbers


def region_problem(region: str) -> str | None:
    """Why ``region`` cannot be a phone key's region (completing "region 'XX' ..."), or None when it can.

    The library is needed to know which regions have numbering plans: without it the ValueError names the extra.
    """
    if _REGION_CODE.fullmatch(region) is None:
        return "is not an ISO 3166 two-letter code (GB, US, DE)"
    if region not in library().SUPPORTED_REGIONS:
        return "is not a region libphonenumber has numbers for: use an ISO 3166 two-letter code such as GB, US or DE"
    return None


def _parsed(text: str, region: str) -> Any:
    """The number ``text`` is, read in ``region`` when it has no country code, or the library's parse error."""
    phonenumbers = library()
    try:
        return phonenumbers.parse(text, region)
    except phonenumbers.NumberParseException as exc:
        return exc


@functools.lru_cache(maxsize=1024)
def e164(text: str, region: str) -> str | None:
    """``text`` as an E.164 number (``+442079460958``, with ``;ext=12`` for an extension) when it is a valid number,
    else None."""
    phonenumbers = library()
    number = _parsed(text, region)
    if isinstance(number, Exception) or not phonenumbers.is_valid_number(number):
        return None
    return _stored(number)


def _stored(number: Any) -> str:
    """E.164, and an extension after it as RFC 3966 writes one (``+442079460958;ext=12``): E.164 has no room for
    it, and dropping it silently stored a number that does not reach the person."""
    phonenumbers = library()
    formatted: str = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    return f"{formatted};ext={number.extension}" if number.extension else formatted


def problem(text: str, region: str | None, *, detail: bool = True) -> str | None:
    """Why ``text`` is no stored phone number, completing "'020 79' ..." (None when it is one).

    With a region, a stored number is in E.164 and valid; the reason says what libphonenumber found wrong, and
    names the region whose numbers it was read as (the declared one, or the country of its ``+`` code), unless
    ``detail`` is false (a masked value: not even its country is shown). Without a region, the regular expression
    decides, as it always has.
    """
    if region is None:
        return None if looks_like(text) else "is not a phone number"
    if e164(text, region) == text:
        return None
    if not detail:
        return "is not a valid phone number"
    phonenumbers = library()
    number = _parsed(text, region)
    if isinstance(number, phonenumbers.NumberParseException):
        kind = phonenumbers.NumberParseException
        if number.error_type == kind.NOT_A_NUMBER:
            return "is not a phone number"
        if number.error_type == kind.INVALID_COUNTRY_CODE:
            return "is not a valid phone number: no country has the code it starts with"
        wrong = "too many" if number.error_type == kind.TOO_LONG else "too few"
        return f"is not a valid phone number for {region}: it has {wrong} digits"
    where = _region_of(number, region)
    if phonenumbers.is_valid_number(number):  # valid, but not written as it is stored
        return f"is not written in E.164 ({phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)})"
    return f"is not a valid phone number for {where}: {_why_invalid(number)}"


def _region_of(number: Any, region: str) -> str:
    """The declared region when the number has its country code, else the main region of the number's code."""
    phonenumbers = library()
    if number.country_code == phonenumbers.country_code_for_region(region):
        return region
    found: str = phonenumbers.region_code_for_country_code(number.country_code)
    return found


def _why_invalid(number: Any) -> str:
    phonenumbers = library()
    result = phonenumbers.ValidationResult
    reason = phonenumbers.is_possible_number_with_reason(number)
    if reason == result.TOO_SHORT:
        return "it has too few digits"
    if reason == result.TOO_LONG:
        return "it has too many digits"
    if reason == result.INVALID_LENGTH:
        return "no number there has that many digits"
    if reason == result.IS_POSSIBLE_LOCAL_ONLY:
        return "it has too few digits for a whole number, with its area code"
    if reason == result.INVALID_COUNTRY_CODE:
        return "no country has the code it starts with"
    return "no number there starts with those digits"


@functools.lru_cache(maxsize=1024)
def phones_in(text: str, region: str) -> tuple[Found, ...]:
    """Every valid phone number written in ``text``, its value in E.164, with its span (``text[start:end]``).

    A number without a country code is read in ``region``; one with ``+`` or ``00`` and a code is any country's.
    libphonenumber's matcher decides what is a number: a date, a time, a price or digits in a longer run are not.
    """
    if sum(c.isdigit() for c in text) < 3:
        return ()
    phonenumbers = library()
    return tuple(
        Found(_stored(match.number), match.start, match.end, match.raw_string)
        for match in phonenumbers.PhoneNumberMatcher(text, region)
    )


__all__ = ["INSTALL_HINT", "e164", "library", "looks_like", "phones_in", "problem", "region_problem"]
