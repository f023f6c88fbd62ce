"""The lexical grounding rule: the words and digits of a free-text value must be in what the user said.

Split out of ``_values`` (which applies it): every word of a value must be a word of the texts (or its singular or
plural), and the value's digits, run together, must appear in the digits of one text run together
(docs/definition-format.md, 'Grounding'). Typed values are grounded by meaning instead (``_witness``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

_WORD = re.compile(r"\d+|[^\W\d_]+")


def _words(text: str) -> list[str]:
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


MAX_OFFER_WORDS = 8
"""Longest value (in words) an assistant's message can ground: an offered option (a restaurant, a time, an
address), never a sentence of the assistant's own (a weak model copying its reply into a name)."""


TOKEN_CACHE_SIZE = 4096
"""Texts whose words are kept (``_tokens``): more than the user's messages in a long conversation, or in the
conversations one process serves at a time, so a turn that scans them all in order does not evict its own."""


@functools.lru_cache(maxsize=TOKEN_CACHE_SIZE)
def _tokens(text: str) -> tuple[frozenset[str], str]:
    """The words of a text (digit runs apart) and its digits run together.

    A conversation's messages are read again on every later turn that writes a grounded key, and splitting them
    was ~14 % of a form turn: each text is split once. Keyed by the text, not by a message object: an instance is
    decoded afresh from its store on each turn.
    """
    words = _words(text)
    return frozenset(w for w in words if not w.isdigit()), "".join(w for w in words if w.isdigit())


class _Texts:
    """Words and digit runs of some texts."""

    def __init__(self, texts: Iterable[str]) -> None:
        tokens = [_tokens(text) for text in texts]
        self.words: frozenset[str] = frozenset().union(*(words for words, _ in tokens))
        self.digit_runs: list[str] = [digits for _, digits in tokens]

    def has_word(self, word: str) -> bool:
        if word in self.words:
            return True
        if word.endswith("s") and word[:-1] in self.words:
            return True
        return word + "s" in self.words or word + "es" in self.words

    def supports(self, words: list[str]) -> bool:
        if not all(self.has_word(w) for w in words if not w.isdigit()):
            return False
        digits = "".join(w for w in words if w.isdigit())
        return not digits or any(digits in run for run in self.digit_runs)


def _matches(token: str, word: str) -> bool:
    """``token`` of a text stands for ``word`` of a value as ``_Texts.has_word`` reads it (singular or plural)."""
    return token == word or (word.endswith("s") and token == word[:-1]) or token in (word + "s", word + "es")


def span_of(text: str, spelling: str) -> tuple[int, int] | None:
    """The smallest span of ``text`` holding every word of ``spelling`` and its digits run together, as the
    lexical rule found them; None when the text does not hold them all.

    The rule reads words anywhere in a message, so a value grounded by words spread over it ("the green ... house")
    is shown by the span covering them: provenance highlights what the user said, not a guess at one phrase.
    """
    wanted = _words(spelling)
    words = sorted({w for w in wanted if not w.isdigit()})
    digits = "".join(w for w in wanted if w.isdigit())
    tokens = [(m.start(), m.end(), unicodedata.normalize("NFKC", m.group()).casefold()) for m in _WORD.finditer(text)]
    fixed: tuple[int, int] | None = None
    if digits:
        fixed = _digit_span(tokens, digits)
        if fixed is None:
            return None
    places = [[(s, e) for s, e, token in tokens if _matches(token, word)] for word in words]
    if not all(places):
        return None
    starts = sorted({s for group in places for s, _ in group} | ({fixed[0]} if fixed else set()))
    best: tuple[int, int] | None = None
    for left in starts:
        if fixed is not None and fixed[0] < left:
            break
        chosen = [next(((s, e) for s, e in group if s >= left), None) for group in places]
        if any(c is None for c in chosen):
            break
        ends = [e for c in chosen if c is not None for e in (c[1],)] + ([fixed[1]] if fixed else [])
        span = (left, max(ends))
        if best is None or span[1] - span[0] < best[1] - best[0]:
            best = span
    return best


def _digit_span(tokens: list[tuple[int, int, str]], digits: str) -> tuple[int, int] | None:
    """Where ``digits`` lie in the text's digit runs taken together: from the run holding its first digit to the
    run holding its last."""
    runs = [(s, e, token) for s, e, token in tokens if token.isdigit()]
    joined = "".join(token for _, _, token in runs)
    at = joined.find(digits)
    if at < 0:
        return None
    offset, first, last = 0, None, None
    for s, _e, token in runs:
        if first is None and at < offset + len(token):
            first = s + (at - offset)
        if at + len(digits) <= offset + len(token):
            last = s + (at + len(digits) - offset)
            break
        offset += len(token)
    return None if first is None or last is None else (first, last)


__all__ = ["MAX_OFFER_WORDS", "TOKEN_CACHE_SIZE", "span_of"]
