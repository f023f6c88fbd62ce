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


__all__ = ["MAX_OFFER_WORDS", "TOKEN_CACHE_SIZE"]
