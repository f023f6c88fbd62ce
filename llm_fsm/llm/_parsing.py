"""Turning a model's text into an ``LLMResponse``: tolerant of fences, think blocks, trailing commas and synonyms,
strict
about what it accepts.

Bounded work on hostile text; every refusal says what was wrong so the re-ask can say it too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from llm_fsm.engine._records import LLMResponse, StateTransition
from llm_fsm.engine._reply_schema import (
    _PLACEHOLDERS,
    _THINK_BLOCK,
    _TRAILING_COMMA,
    MAX_CANDIDATE_STARTS,
    MAX_OUTPUT_CHARS,
    MESSAGE_KEYS,
    STAY,
)
from llm_fsm.errors import MalformedOutputError

# --- parsing ---------------------------------------------------------------------------


def parse_llm_output(
    text: str, allowed_targets: Sequence[str] | None = None, *, strict_targets: bool = True
) -> LLMResponse:
    """The first JSON object in ``text`` that is a valid reply.

    With ``allowed_targets``, a proposal differing only in case or surrounding
    spaces is normalised to the declared id. A proposal matching none is
    refused when ``strict_targets`` (the model is re-asked), or kept as
    written otherwise, so the engine can reject it and record that it did.

    Code fences and prose need no special handling: the scanner decodes an
    object from every ``{`` and ignores everything else, so text is never
    rewritten (a message containing a fence stays intact). Looks first outside
    ``<think>`` blocks, then in the whole text, each time also in a copy with
    trailing commas removed. Raises ``MalformedOutputError`` naming the most
    relevant problem otherwise.
    """
    if not isinstance(text, str):
        raise MalformedOutputError(
            f"the reply must be text, got {type(text).__name__}", raw_outputs=[repr(text)[:1000]]
        )
    if not text.strip():
        raise MalformedOutputError("the reply was empty; send the JSON object", raw_outputs=[text])
    if len(text) > MAX_OUTPUT_CHARS:
        raise MalformedOutputError(
            f"the reply is {len(text)} characters long, more than the {MAX_OUTPUT_CHARS} accepted; "
            "send only the JSON object, with a short message",
            raw_outputs=[text[:1000]],
        )

    variants = _variants(text)
    first_problem: _Problem | None = None
    for variant in variants:
        response, problem = _first_valid(variant, allowed_targets, strict_targets)
        if response is not None:
            return response
        if problem is not None and (first_problem is None or problem.rank > first_problem.rank):
            first_problem = problem
    message = first_problem.message if first_problem else "no JSON object was found in the reply"
    raise MalformedOutputError(message, raw_outputs=[text])


def response_from_object(
    obj: Any, allowed_targets: Sequence[str] | None = None, *, strict_targets: bool = True
) -> LLMResponse:
    """Validate one decoded object as a reply; the tolerant shape rules live here.

    Accepted: ``{"transition": {"target_state", "context_update"}, "message", "reasoning"?}``;
    the flat form with ``target_state``/``context_update`` at the top; ``transition``
    given as a bare state id; ``"response"`` or ``"reply"`` instead of ``"message"``;
    ``context_update`` null or absent (→ ``{}``); ``target_state`` null or empty (→ ``STAY``).
    """
    if not isinstance(obj, dict):
        raise MalformedOutputError(f"the reply must be a JSON object, got {_json_type(obj)}")
    problems: list[str] = []

    message = _message(obj, problems)
    target, update = _transition(obj, problems)
    if target is not None and target != STAY and allowed_targets is not None:
        target = _match_target(target, allowed_targets, problems, strict_targets)
    reasoning = _reasoning(obj.get("reasoning"))
    intent = _intent(obj.get("intent"))
    flow_value = obj.get("flow")
    flow = flow_value if isinstance(flow_value, str) and flow_value.strip() else None

    if problems:
        raise MalformedOutputError("; ".join(problems))
    assert message is not None and target is not None and update is not None
    return LLMResponse(
        transition=StateTransition(target_state=target, context_update=update),
        message=message,
        reasoning=reasoning,
        intent=intent,  # type: ignore[arg-type]
        flow=flow.strip() if flow else None,
    )


_INTENT_SYNONYMS = {
    "continue": "continue",
    "answer": "continue",
    "slot_value": "continue",
    "correction": "continue",
    "": "continue",
    "digression": "digression",
    "question": "digression",
    "help": "digression",
    "clarification": "digression",
    "cancel": "cancel",
    "cancellation": "cancel",
    "stop": "cancel",
    "start_flow": "start_flow",
    "start": "start_flow",
    "new_flow": "start_flow",
    "resume_flow": "resume_flow",
    "resume": "resume_flow",
    "confirm": "confirm",
    "yes": "confirm",
    "confirmed": "confirm",
    "deny": "deny",
    "no": "deny",
    "denied": "deny",
    "change": "deny",
}


def _intent(value: Any) -> str:
    """The model's intent, normalised; anything unrecognised is an ordinary answer (the engine decides anyway)."""
    if not isinstance(value, str):
        return "continue"
    return _INTENT_SYNONYMS.get(value.strip().lower().replace(" ", "_").replace("-", "_"), "continue")


# --- internals -------------------------------------------------------------------------


class _Problem:
    """Why a candidate failed, ranked so the error shown is the most useful one.

    rank 0: text that never decoded; 1: a decoded object that does not look like
    a reply; 2: an object that looks like a reply but breaks a rule.
    """

    __slots__ = ("message", "rank")

    def __init__(self, message: str, rank: int) -> None:
        self.message = message
        self.rank = rank


_REPLY_KEYS = frozenset({"transition", "target_state", "context_update", *MESSAGE_KEYS})


def _variants(text: str) -> Iterator[str]:
    """Texts to scan, most trustworthy first, each produced only once the previous ones failed.

    Lazy because almost every reply is valid as written: the repairs must cost
    nothing then.
    """
    tried: set[str] = set()
    without_thinking = _THINK_BLOCK.sub(" ", text) if "<" in text else text
    for candidate in (without_thinking, text):
        if candidate not in tried:
            tried.add(candidate)
            yield candidate
    for candidate in (without_thinking, text):
        if _TRAILING_COMMA.search(candidate):
            repaired = _remove_trailing_commas(candidate)
            if repaired not in tried:
                tried.add(repaired)
                yield repaired


def _first_valid(
    text: str, allowed_targets: Sequence[str] | None, strict_targets: bool
) -> tuple[LLMResponse | None, _Problem | None]:
    best: _Problem | None = None
    for obj, decode_error in _scan(text):
        if obj is None:
            problem = _Problem(f"the reply contains '{{' but no complete JSON object ({decode_error})", 0)
        else:
            try:
                return response_from_object(obj, allowed_targets, strict_targets=strict_targets), None
            except MalformedOutputError as exc:
                rank = 2 if _REPLY_KEYS.intersection(obj) else 1
                problem = _Problem(exc.problem, rank)
        if best is None or problem.rank > best.rank:
            best = problem
    return None, best


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(strict=False, parse_constant=_reject_constant)


def _scan(text: str) -> Iterator[tuple[dict[str, Any] | None, str]]:
    """Every JSON object starting at a ``{``, in order, nested ones included.

    Yields ``(object, "")`` for each object decoded and ``(None, error)`` for
    the first ``{`` that does not start one (later failures add nothing useful).
    """
    reported_failure = False
    start = text.find("{")
    tries = 0
    while start != -1 and tries < MAX_CANDIDATE_STARTS:
        tries += 1
        try:
            obj, _end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError) as exc:
            if not reported_failure:
                reported_failure = True
                yield None, _short_decode_error(exc)
        else:
            if isinstance(obj, dict):
                yield obj, ""
        start = text.find("{", start + 1)


def _short_decode_error(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)


def _remove_trailing_commas(text: str) -> str:
    """Drop commas that directly precede ``}`` or ``]`` outside strings (a common model slip)."""
    out: list[str] = []
    in_string = False
    escaped = False
    pending_comma: list[str] = []  # a comma and the whitespace after it, held until we know what follows
    for ch in text:
        if in_string:
            out.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if pending_comma:
            if ch.isspace():
                pending_comma.append(ch)
                continue
            if ch in "}]":
                out.extend(pending_comma[1:])
            else:
                out.extend(pending_comma)
            pending_comma = []
        if ch == ",":
            pending_comma = [ch]
            continue
        out.append(ch)
        if ch == '"':
            in_string = True
    out.extend(pending_comma)
    return "".join(out)


def _message(obj: dict[str, Any], problems: list[str]) -> str | None:
    key = next((k for k in MESSAGE_KEYS if k in obj), None)
    if key is None:
        problems.append('the object has no "message" field (the text shown to the user)')
        return None
    value = obj[key]
    if not isinstance(value, str) or not value.strip():
        problems.append(f'"{key}" must be a non-empty string, got {_describe(value)}')
        return None
    if value.strip() in _PLACEHOLDERS:
        problems.append(f'"{key}" is the example\'s placeholder {value.strip()!r}; write the actual reply to the user')
        return None
    return value


def _transition(obj: dict[str, Any], problems: list[str]) -> tuple[str | None, dict[str, Any] | None]:
    """(target_state, context_update) from the nested, flat or bare-id forms."""
    raw_update: Any = obj.get("context_update")
    if "transition" in obj:
        transition = obj["transition"]
        if transition is None or isinstance(transition, str):
            raw_target: Any = transition
        elif isinstance(transition, dict):
            raw_target = transition.get("target_state")
            if "context_update" in transition:
                raw_update = transition["context_update"]
        else:
            problems.append(
                '"transition" must be an object {"target_state": ..., "context_update": {...}}, '
                f"got {_describe(transition)}"
            )
            return None, None
    elif "target_state" in obj:
        raw_target = obj["target_state"]
    else:
        problems.append('the object has no "transition" field ({"target_state": <state id>, "context_update": {...}})')
        return None, None

    target: str | None
    if raw_target is None:
        target = STAY
    elif isinstance(raw_target, str):
        target = raw_target.strip()
    else:
        problems.append(f'"target_state" must be a string (a state id), got {_describe(raw_target)}')
        target = None

    update: dict[str, Any] | None
    if raw_update is None:
        update = {}
    elif isinstance(raw_update, dict):
        update = {
            k: v
            for k, v in raw_update.items()
            if k not in _PLACEHOLDERS and not (isinstance(v, str) and v in _PLACEHOLDERS)
        }
    else:
        problems.append(f'"context_update" must be an object of key: value pairs, got {_describe(raw_update)}')
        update = None
    return target, update


def _match_target(target: str, allowed: Sequence[str], problems: list[str], strict: bool) -> str | None:
    """Exact match, else a unique case-insensitive match; anything else is refused, or kept when not strict."""
    if target in allowed:
        return target
    folded = [name for name in allowed if name.casefold() == target.casefold()]
    if len(folded) == 1:
        return folded[0]
    if not strict:
        return target
    choices = ", ".join(json.dumps(name) for name in allowed if name != STAY) or "(none)"
    problems.append(f'"target_state" must be one of {choices}; got {_describe(target)}')
    return None


def _reasoning(value: Any) -> str | None:
    """Reasoning is for debugging only, so any value is kept rather than failing the turn."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _describe(value: Any) -> str:
    """Type and a short excerpt, so the model sees what it sent without the whole of it."""
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return json.dumps(shown, ensure_ascii=False) if value.strip() else "an empty string"
    return _json_type(value)
