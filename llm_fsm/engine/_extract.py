"""The engine's own extractors: values of the keys a state collects, read from the user's message itself.

A small model leaves keys out ("two people" said, ``party`` not written) or writes what the user never said; the
user's words are right there. For the declared keys the current state collects (``required_context_keys``) whose
values a finder reads (dates, times, numbers, enum values: ``llm_fsm.definition._candidates``), every candidate of
the key's kind in THIS turn's message is checked against the key's declaration. Then:

- **repair**: a model value that fails its declaration or its grounding is replaced by the one candidate that fits;
- **fill**: a key the model left out gets the one candidate that fits (a stored value is corrected by a
  statement or a change cue: "it's for 3 people", "how about the 12th?", not "is it 3 miles away?" or "that is
  all today"), when no other key the state collects could take that candidate too (two number keys and one
  number: neither) and no value the model wrote this turn was read from it;
- **ask**: several candidates fit: nothing is stored, and the refusal asks "did you mean X or Y?".

Never a guess: one candidate or none. A fill is written through the same policy as a model write (normalised,
checked, grounded), so conditions and transitions see it like any other value; the engine still decides moves.
Deterministic and pure; candidates are found once per key and turn, the finders cache per message text.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llm_fsm.definition._candidates import candidate_kind, candidates_in, impossible_date
from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.definition._spoken import Found
from llm_fsm.engine._context import apply_update, extracted, has_value
from llm_fsm.engine._records import ContextChange
from llm_fsm.engine._values import KeyPolicy, Refusal, check, normalise, outside
from llm_fsm.engine._witness import Witness
from llm_fsm.engine._worded import or_list

ExtractRule = Literal["fill", "repair", "ask"]

CHANGE_CUE = re.compile(
    r"\b(?:actually|instead|change|changed|make\s+(?:it|that)|rather|switch|correction|correct\s+that|update|"
    r"not\s+\S+\s+but|on\s+second\s+thought|wait|how\s+about|what\s+about|what\s+if|try|prefer)\b",
    re.IGNORECASE,
)
"""Words that say a message changes something already said ("actually, three people", "how about the 12th?")."""

NO_NEW_VALUE = re.compile(
    r"\?|\b(?:that'?s|that\s+is|that\s+will\s+be)\s+all\b|\bthanks?\b|\bthank\s+you\b|\bbye\b", re.I
)
"""A question or a closing remark: a number or a date in it ("is it 3 miles away?", "that is all today, thanks")
is no new value for a key that holds one, unless a ``CHANGE_CUE`` says so. The model, which reads the whole
message, may still write a change."""


def corrects(message: str) -> bool:
    """Whether a message may change values already stored (see ``CHANGE_CUE`` and ``NO_NEW_VALUE``)."""
    return CHANGE_CUE.search(message) is not None or NO_NEW_VALUE.search(message) is None


@dataclass(frozen=True)
class Extraction:
    """What the extractors did for one key: the candidate used (fill, repair) or those that fit (ask)."""

    rule: ExtractRule
    kind: str
    found: Found | None = None
    options: tuple[Found, ...] = ()
    written: Any = None
    """For a repair, what the model wrote."""
    problem: str | None = None
    """For an ask without options, why what the user said is no value ("'February 30th': February has 28 or 29
    days"): the user is told, not asked to choose."""

    def question(self) -> str:
        """The question an ``ask`` puts to the user."""
        if self.problem is not None:
            return self.problem
        return f"did you mean {or_list([f.value for f in self.options])}?"


class Extractor:
    """The candidates of one turn's message for the keys the state collects (found on first use, per key)."""

    def __init__(
        self,
        definition: FSMDefinition,
        keys: Iterable[str],
        message: str,
        today: dt.date | Callable[[], dt.date] | None = None,
        now: Callable[[], dt.datetime] | None = None,
    ) -> None:
        """``today``: the conversation's date, or a function that reads it (called once, when a finder needs it);
        ``now``: the clock's instant, which a key's ``timezone`` reads its own date from."""
        self.message = message
        self._today = today
        self._now = now
        self._declared: dict[str, tuple[str, KeyDeclaration]] = {}
        protected = definition.application_only_keys
        declared = definition.context_keys or {}
        for key in keys:
            declaration = declared.get(key)
            if declaration is None or key.startswith("_") or key in protected:
                continue
            kind = candidate_kind(declaration)
            if kind is not None:
                self._declared[key] = (kind, declaration)
        self._fitting: dict[str, tuple[Found, ...]] = {}

    @property
    def today(self) -> dt.date | None:
        if callable(self._today):
            self._today = self._today()
        return self._today

    def today_for(self, declaration: KeyDeclaration) -> dt.date | None:
        """The conversation's date where the key's dates are lived (its ``timezone``)."""
        return declaration.today(self._now()) if declaration.timezone and self._now is not None else self.today

    @property
    def keys(self) -> list[str]:
        """The collected keys a finder reads values of."""
        return list(self._declared)

    def __bool__(self) -> bool:
        return bool(self._declared)

    def may_extract(self, key: str) -> bool:
        found = self._declared.get(key)
        return found is not None and found[1].extract != "off"

    def fitting(self, key: str) -> tuple[Found, ...]:
        """The candidates of the key's kind whose value its declaration accepts, one per value (first said)."""
        if key not in self._fitting:
            kind, declaration = self._declared[key]
            seen: dict[Any, Found] = {}
            today = self.today_for(declaration)
            for found in candidates_in(kind, self.message, declaration, today):
                value = normalise(declaration, found.value)
                if value in seen or check(declaration, value) is not None or outside(declaration, value, today):
                    continue
                seen[value] = found if value == found.value else Found(value, found.start, found.end, found.text)
            self._fitting[key] = tuple(seen.values())
        return self._fitting[key]

    def repair(self, key: str, written: Any) -> Extraction | None:
        """The one candidate replacing a model value that failed, several to ask about, or None."""
        if not self.may_extract(key):
            return None
        fitting = self.fitting(key)
        kind = self._declared[key][0]
        if len(fitting) == 1:
            return Extraction("repair", kind, fitting[0], written=written)
        if len(fitting) > 1:
            return Extraction("ask", kind, options=fitting, written=written)
        return None

    def replace(
        self,
        policy: KeyPolicy,
        path: str,
        declaration: KeyDeclaration,
        written: Any,
        failed: tuple[Any, Refusal],
        shown: str | None,
    ) -> tuple[Any, Refusal | None]:
        """A failing model value (``failed``: as normalised, and why) replaced by the one candidate that fits, or a
        question when several fit (the refused value is not quoted: it may be one the user never said)."""
        extraction = self.repair(path, written)
        if extraction is None or (extraction.rule == "ask" and path in policy.asked_readings):
            return failed  # none fits, or the words' own readings are asked about already
        policy.extracted[path] = extraction
        if extraction.found is None:
            question = "several values the user said fit: which one is meant?" if shown else extraction.question()
            return failed[0], Refusal("ambiguous", question)
        policy.repairs.pop(path, None)
        repaired, refusal = policy.checked(path, declaration, extraction.found.value, True, shown)
        if refusal is not None:
            del policy.extracted[path]
            return failed
        return repaired, None

    def fills(
        self, written: Iterable[str], claimed: Sequence[tuple[int, int]] = (), held: Iterable[str] = ()
    ) -> dict[str, Extraction]:
        """Fills and questions for the keys the model left out (a stored value the user now says otherwise is
        corrected unless the message is a question or a closing remark without a change cue, ``corrects``: SGD's
        users change their minds in words a small model leaves out).

        A candidate another collected key could take as well (its own kind or another) fills neither key, and a
        span a value the model wrote this turn was read from (``claimed``) fills none. Several candidates ask
        which is meant only for a key that holds no value (``held``): two times in a question about the stored
        booking ("is 7 or 8 free?") are no new answer to ask about.
        """
        said, holding = set(written), set(held)
        if not corrects(self.message):
            said |= holding
        left_out = [k for k in self._declared if k not in said and self.may_extract(k)]
        out: dict[str, Extraction] = {}
        for key in left_out:
            fitting = [f for f in self.fitting(key) if not _overlaps(f, claimed)]
            if not fitting or any(self._competes(other, fitting) for other in self._declared if other != key):
                continue
            kind = self._declared[key][0]
            if len(fitting) == 1:
                out[key] = Extraction("fill", kind, fitting[0])
            elif key not in holding:
                out[key] = Extraction("ask", kind, options=tuple(fitting))
        for key in left_out:
            if key not in out and key not in holding and self._declared[key][0] == "date":
                problem = impossible_date(self.message, self._declared[key][1].date_order)
                if problem is not None:
                    out[key] = Extraction("ask", "date", problem=problem)
        return out

    def _competes(self, other: str, fitting: Sequence[Found]) -> bool:
        spans = [(f.start, f.end) for f in fitting]
        return any(_overlaps(found, spans) for found in self.fitting(other))


def _overlaps(found: Found, spans: Sequence[tuple[int, int]]) -> bool:
    return any(found.start < end and start < found.end for start, end in spans)


def fill(
    extractor: Extractor,
    policy: KeyPolicy,
    data: dict[str, Any],
    model_changes: Sequence[ContextChange],
    *,
    protected: Iterable[str] = (),
    max_bytes: int | None = None,
) -> list[ContextChange]:
    """Write the fills of the keys the model left out (through ``policy``, like a model write) and record the
    questions; ``model_changes`` are what became of the model's own update this turn."""
    written = {c.key for c in model_changes if c.applied or c.reason != "empty value ignored"}
    claimed = [(w.start, w.end) for w in policy.witnesses.values() if _this_message(w)]
    claimed += [(e.found.start, e.found.end) for e in policy.extracted.values() if e.found is not None]
    held = [key for key in extractor.keys if has_value(data, key)]
    plan = extractor.fills(written, [(s, e) for s, e in claimed if s is not None and e is not None], held)
    update: dict[str, Any] = {}
    asks: list[ContextChange] = []
    for key, extraction in plan.items():
        policy.extracted[key] = extraction
        if extraction.found is not None:
            update[key] = extraction.found.value
            continue
        masked = policy.is_sensitive(key)
        reason = "several values the user said fit: which one is meant?" if masked else extraction.question()
        if extraction.problem is not None:
            reason = "what the user said names no day" if masked else extraction.problem
        asks.append(
            ContextChange(
                key=key,
                applied=False,
                reason=reason,
                rule="ambiguous" if extraction.problem is None else "format",
                extracted=extracted(policy, key, masked),
            )
        )
    changes = apply_update(data, update, source="model", protected=protected, max_bytes=max_bytes, policy=policy)
    # a fill the policy refuses (the size cap) is no write of the model's to ask the user again about
    return [change for change in changes if change.applied] + asks


def _this_message(witness: Witness) -> bool:
    return witness.source == "user" and witness.messages_back == 0


__all__ = ["ExtractRule", "Extraction", "Extractor", "fill"]
