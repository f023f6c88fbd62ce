"""Scoring a tracked context against SGD's per-turn ground truth, the way SGD's own scorer does.

SGD's scorer (``schema_guided_dst/metrics.py`` in the dataset's repository)
compares, after every user turn and for every slot of the service:

- a categorical slot: exact string equality with the listed value;
- a non-categorical slot: fuzzy match, the best ``fuzz.token_sort_ratio`` / 100
  over the listed forms (lower-cased, punctuation to spaces, words sorted, then
  the Indel similarity ``2 * LCS / (len_a + len_b)``), reimplemented here
  without a dependency;
- a slot absent from the truth is right only when the context does not hold it.

Its joint goal accuracy multiplies those scores, so a near match counts in
part (``sgd_jga`` below). For the counts a person reads (right or wrong), a
non-categorical slot is *right* when its fuzzy score is at least
``FUZZY_RIGHT`` (0.9: case, punctuation, word order and a letter or two differ;
"7 pm" against "7:00 pm" does not); ``jga`` and precision/recall/F1 use that.

A stored value is rendered as text before matching, alike for every engine:
strings as they are, booleans as ``True``/``False`` (SGD's spelling), whole
numbers without a decimal point, anything else as compact JSON. A key holding
an empty value (null, "", [], {}) is not held.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dst_convert import Service

FUZZY_RIGHT = 0.9

_NON_WORD = re.compile(r"\W", re.UNICODE)


def _processed(text: str) -> str:
    """fuzzywuzzy's ``full_process`` then ``token_sort``: lower case, no punctuation, words sorted."""
    return " ".join(sorted(_NON_WORD.sub(" ", text).lower().split()))


def _lcs(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for char in a:
        current = [0]
        for j, other in enumerate(b, start=1):
            current.append(previous[j - 1] + 1 if char == other else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def fuzzy_score(reference: str, hypothesis: str) -> float:
    """``fuzz.token_sort_ratio(reference, hypothesis) / 100``, as SGD's scorer computes it (rounded to 0.01)."""
    a, b = _processed(reference), _processed(hypothesis)
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    return round(200 * _lcs(a, b) / (len(a) + len(b))) / 100


def render(value: Any) -> str | None:
    """A stored value as the text that is matched; None when nothing (or an empty value) is held."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else str(value)
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, (list, dict)) and not value:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def slot_score(reference: Iterable[str], hypothesis: str, *, categorical: bool) -> float:
    """How well one held value matches the listed forms: 0/1 for categorical slots, fuzzy otherwise."""
    forms = list(reference)
    if categorical:
        return 1.0 if hypothesis in forms else 0.0
    return max((fuzzy_score(form, hypothesis) for form in forms), default=0.0)


@dataclass
class TurnScore:
    """One user turn, slot by slot."""

    held: int = 0
    expected: int = 0
    right: int = 0
    joint: bool = True
    sgd_joint: float = 1.0
    wrong: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    missed: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)


def score_turn(service: Service, gold: Mapping[str, Iterable[str]], context: Mapping[str, Any]) -> TurnScore:
    """The turn's figures: which slots are held, expected and right, and whether all are (joint)."""
    score = TurnScore()
    for slot in service.slots:
        reference = tuple(gold.get(slot.name, ()))
        hypothesis = render(context.get(slot.name))
        if hypothesis is not None:
            score.held += 1
        if reference:
            score.expected += 1
        if not reference and hypothesis is None:
            continue
        if not reference:
            value, right = 0.0, False
            score.wrong.append((slot.name, hypothesis or "", ()))
        elif hypothesis is None:
            value, right = 0.0, False
            score.missed.append((slot.name, reference))
        else:
            value = slot_score(reference, hypothesis, categorical=slot.is_categorical)
            right = value >= (1.0 if slot.is_categorical else FUZZY_RIGHT)
            if right:
                score.right += 1
            else:
                score.wrong.append((slot.name, hypothesis, reference))
        score.sgd_joint *= value
        score.joint = score.joint and right
    return score


@dataclass
class Totals:
    """Figures of one engine over many turns."""

    turns: int = 0
    joint: int = 0
    sgd_joint: float = 0.0
    held: int = 0
    expected: int = 0
    right: int = 0

    def add(self, score: TurnScore) -> None:
        self.turns += 1
        self.joint += score.joint
        self.sgd_joint += score.sgd_joint
        self.held += score.held
        self.expected += score.expected
        self.right += score.right

    @property
    def precision(self) -> float:
        return self.right / self.held if self.held else 0.0

    @property
    def recall(self) -> float:
        return self.right / self.expected if self.expected else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "user_turns": self.turns,
            "joint_goal_accuracy": self.joint / self.turns if self.turns else 0.0,
            "sgd_joint_goal_accuracy": self.sgd_joint / self.turns if self.turns else 0.0,
            "slot_precision": self.precision,
            "slot_recall": self.recall,
            "slot_f1": self.f1,
            "slots_held": self.held,
            "slots_expected": self.expected,
            "slots_right": self.right,
            "stored_wrong": self.held - self.right,
            "stored_wrong_share": (self.held - self.right) / self.held if self.held else 0.0,
        }


def declaration_problem(declared: Mapping[str, Any] | None, value: Any) -> str | None:
    """Why a stored value fails the declaration ``dst_convert`` wrote for its slot, or None.

    Only the fields the converter emits are checked (type string, enum): the
    point is to count, for every engine alike, stored values a declaration would
    have refused.
    """
    if declared is None:
        return None
    if declared.get("type", "string") == "string" and not isinstance(value, str):
        return f"not a string ({type(value).__name__})"
    enum = declared.get("enum")
    if enum is not None and value not in enum:
        return "not one of the enum's values"
    return None
