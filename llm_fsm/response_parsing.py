"""Turn a model's text into an ``LLMResponse``, or say precisely why it cannot be.

Models wrap their JSON in code fences, explain it in prose, think aloud inside
``<think>`` blocks, show an example object before the real one, or drift from
the shape they were asked for. This module is tolerant where the meaning is
unambiguous (a flat object, ``"response"`` for ``"message"``, a null
``context_update``) and strict where guessing would put words in the model's
mouth (a missing reply text, a ``context_update`` that is not an object).

Every failure is a ``MalformedOutputError`` whose message is written for the
model: the LLM edge sends it back verbatim when it re-asks.

Pure: no I/O, no litellm, no logging side effects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

from llm_fsm.errors import MalformedOutputError
from llm_fsm.runtime import LLMResponse, StateTransition

STAY = ""
"""``target_state`` when the model made no proposal (null, empty or absent): the engine treats it as "stay"."""

MAX_OUTPUT_CHARS = 200_000
"""Replies longer than this are refused rather than scanned: no real reply is this long."""

MAX_CANDIDATE_STARTS = 500
"""How many ``{`` positions the scanner tries before giving up; bounds the work on hostile text."""

MESSAGE_KEYS = ("message", "response", "reply")
"""Names a model may give the user-facing text; the first present wins."""

PLACEHOLDER_KEY, PLACEHOLDER_VALUE, PLACEHOLDER_STATE, PLACEHOLDER_MESSAGE = "KEY", "VALUE", "STATE", "REPLY"
"""The placeholders of the reply example in the prompt (``prompts.py`` builds it from these).

Small models copy examples word for word; a reply whose message is a placeholder
is re-asked (the user must never read "REPLY") and placeholder entries of
``context_update`` are dropped (an email of "VALUE" is not an email)."""

CORRECTION_STATE, CORRECTION_MESSAGE = "<state id>", "<your reply to the user>"
"""The placeholders of the reply shape shown again after an invalid reply (``llm.correction_message``):
refused and dropped like the prompt's, since a model that copied once copies again."""

_PLACEHOLDERS = frozenset(
    {PLACEHOLDER_KEY, PLACEHOLDER_VALUE, PLACEHOLDER_STATE, PLACEHOLDER_MESSAGE, CORRECTION_STATE, CORRECTION_MESSAGE}
)

_DEFAULT_VALUE_DEPTH = 2

_TRAILING_COMMA = re.compile(r",\s*[}\]]")

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)


# --- the schema the model is asked to follow ------------------------------------------


def response_json_schema(
    allowed_targets: Sequence[str] | None = None,
    *,
    max_message_chars: int = 2000,
    max_string_chars: int = 500,
    max_value_depth: int = _DEFAULT_VALUE_DEPTH,
    intents: Sequence[str] | None = None,
    flows: Sequence[str] | None = None,
    context_keys: Sequence[str] | None = None,
    max_items: int = 20,
    bounded: bool = True,
) -> dict[str, Any]:
    """The JSON Schema of one reply object, for structured output and for the prompt.

    ``bounded=False`` gives the lean form the engine sends by default: the same
    shape and enums without length bounds, value definitions or ``reasoning``.
    Hosted models do not loop under a schema, and providers that bill the
    schema as prompt tokens (OpenAI structured outputs) charge for every byte
    of it; the LLM edge bounds it (``closed_schema``) only for local models.

    Every string carries ``maxLength``: small local models decoding under a
    grammar at temperature 0 can otherwise repeat a phrase until the token
    limit. Strings inside ``context_update`` values are bounded the same way
    down to ``max_value_depth`` levels of nesting (shared ``$defs``, so the
    schema stays linear in size); deeper data is allowed but not bounded.

    ``allowed_targets`` becomes an ``enum`` on ``target_state``; an empty list
    means no move is possible and only the empty "stay" proposal is allowed.
    ``intents`` adds an ``intent`` enum (and ``flows`` a ``flow`` enum) when the
    state offers more than an ordinary answer: small models only fill fields
    the schema names.

    ``context_keys`` closes ``context_update`` to those keys, and makes its
    values flat (scalars, or arrays of at most ``max_items`` scalars). That is
    what keeps a small model honest under a grammar: with an open object it
    invents keys and nests objects until the token limit (measured with
    SmolLM2-135M: "I'm Ada" gave ``{"message": "Transitions: ..."}`` open and
    ``{"name": "Ada"}`` closed to ``["name"]``), because llama.cpp's grammars
    cannot bound the number of keys of an object. Leave it ``None`` for
    capable models, which may extract more than the state asks for.
    """
    if not bounded:
        return _lean_schema(allowed_targets, intents, flows)
    # An enum bounds the string by itself; type and maxLength only matter without one.
    target: dict[str, Any] = {"type": "string", "maxLength": max_string_chars}
    if allowed_targets is not None:
        target = {"enum": list(dict.fromkeys(allowed_targets)) or [STAY]}
    depth = max(1, max_value_depth)
    context_update: dict[str, Any] = {"type": "object", "additionalProperties": {"$ref": "#/$defs/value1"}}
    if context_keys is not None:
        context_update = {
            "type": "object",
            "properties": {key: {"$ref": "#/$defs/value1"} for key in dict.fromkeys(context_keys)},
            "additionalProperties": False,
        }
    extra: dict[str, Any] = {}
    if intents:
        extra["intent"] = {"enum": list(dict.fromkeys(intents))}
    if flows:
        extra["flow"] = {
            "enum": [*dict.fromkeys(flows), None],
        }
    return {
        "type": "object",
        "properties": {
            **extra,
            "transition": {
                "type": "object",
                "properties": {
                    "target_state": target,
                    "context_update": context_update,
                },
                "required": ["target_state", "context_update"],
                "additionalProperties": False,
            },
            "message": {
                "type": "string",
                "minLength": 1,
                "maxLength": max_message_chars,
            },
            "reasoning": {"type": "string", "maxLength": max_string_chars},
        },
        "required": ["transition", "message"],
        "additionalProperties": False,
        "$defs": _flat_value_defs(max_string_chars, max_items)
        if context_keys is not None
        else _value_defs(max_string_chars, depth),
    }


def _lean_schema(
    allowed_targets: Sequence[str] | None, intents: Sequence[str] | None, flows: Sequence[str] | None
) -> dict[str, Any]:
    target: dict[str, Any] = {"type": "string"}
    if allowed_targets is not None:
        target = {"enum": list(dict.fromkeys(allowed_targets)) or [STAY]}
    properties: dict[str, Any] = {}
    if intents:
        properties["intent"] = {"enum": list(dict.fromkeys(intents))}
    if flows:
        properties["flow"] = {"enum": [*dict.fromkeys(flows), None]}
    properties["transition"] = {
        "type": "object",
        "properties": {"target_state": target, "context_update": {"type": "object"}},
        "required": ["target_state", "context_update"],
        "additionalProperties": False,
    }
    # no minLength: hosted models are only guided by a non-strict schema, and the parser refuses an
    # empty message anyway; each keyword is billed as prompt tokens on every call
    properties["message"] = {"type": "string"}
    return {
        "type": "object",
        "properties": properties,
        "required": ["transition", "message"],
        "additionalProperties": False,
    }


def _value_defs(max_string_chars: int, depth: int) -> dict[str, Any]:
    """``value1`` … ``valueN``: JSON values whose strings are bounded.

    Arrays and objects at the last level hold any JSON: bounding strings
    where models actually write them matters, forbidding deep data does not.
    """
    defs: dict[str, Any] = {}
    for level in range(1, depth + 1):
        containers: list[dict[str, Any]]
        if level < depth:
            deeper = {"$ref": f"#/$defs/value{level + 1}"}
            containers = [{"type": "array", "items": deeper}, {"type": "object", "additionalProperties": deeper}]
        else:
            containers = [{"type": "array"}, {"type": "object"}]
        defs[f"value{level}"] = {
            "anyOf": [
                {"type": "string", "maxLength": max_string_chars},
                {"type": "number"},
                {"type": "boolean"},
                {"type": "null"},
                *containers,
            ]
        }
    return defs


def _flat_value_defs(max_string_chars: int, max_items: int) -> dict[str, Any]:
    """``value1``: a scalar or a bounded array of scalars; every part has an upper bound a grammar can enforce."""
    scalars: list[dict[str, Any]] = [
        {"type": "string", "maxLength": max_string_chars},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "null"},
    ]
    return {"value1": {"anyOf": [*scalars, {"type": "array", "items": {"anyOf": scalars}, "maxItems": max_items}]}}


def closed_schema(
    schema: dict[str, Any],
    context_keys: Sequence[str],
    *,
    max_message_chars: int = 300,
    max_string_chars: int = 120,
    max_items: int = 8,
) -> dict[str, Any]:
    """The same reply schema with ``context_update`` closed to ``context_keys`` and a short message.

    For small local models under a grammar (see ``response_json_schema``): the
    engine sends the open schema and the keys that matter in the state; the
    LLM edge closes it only for models that need it. Values are short (names,
    emails, dates): a 120-character bound stops a looping model well before
    ``max_tokens`` cuts the JSON off (measured with SmolLM2-135M). Lists are
    short for the same reason: a slot a user fills in conversation holds a
    few items, and SmolLM2 at temperature 0 repeated one value until the
    old bound of 20, spending tokens the message then lacked.
    """
    properties = schema.get("properties", {})
    intents = (properties.get("intent") or {}).get("enum")
    flows = [f for f in (properties.get("flow") or {}).get("enum", []) if f is not None] or None
    return response_json_schema(
        allowed_targets_from_schema(schema),
        intents=intents,
        flows=flows,
        context_keys=list(context_keys),
        max_message_chars=max_message_chars,
        max_string_chars=max_string_chars,
        max_items=max_items,
    )


def allowed_targets_from_schema(schema: dict[str, Any] | None) -> list[str] | None:
    """Read the ``target_state`` enum back out of a schema built by ``response_json_schema``.

    Lets the LLM edge validate proposals against exactly what the engine asked
    for, without a second channel between them. ``None`` when the schema has no enum.
    """
    if not isinstance(schema, dict):
        return None
    try:
        enum = schema["properties"]["transition"]["properties"]["target_state"]["enum"]
    except (KeyError, TypeError):
        return None
    if isinstance(enum, list) and all(isinstance(item, str) for item in enum):
        return list(enum)
    return None


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
    flow = obj.get("flow") if isinstance(obj.get("flow"), str) and obj.get("flow").strip() else None

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
    "continue": "continue", "answer": "continue", "slot_value": "continue", "correction": "continue", "": "continue",
    "digression": "digression", "question": "digression", "help": "digression", "clarification": "digression",
    "cancel": "cancel", "cancellation": "cancel", "stop": "cancel",
    "start_flow": "start_flow", "start": "start_flow", "new_flow": "start_flow",
    "resume_flow": "resume_flow", "resume": "resume_flow",
    "confirm": "confirm", "yes": "confirm", "confirmed": "confirm",
    "deny": "deny", "no": "deny", "denied": "deny", "change": "deny",
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
            problem = _Problem(
                f"the reply contains '{{' but no complete JSON object ({decode_error})", 0
            )
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
        problems.append(
            'the object has no "transition" field '
            '({"target_state": <state id>, "context_update": {...}})'
        )
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
            k: v for k, v in raw_update.items() if k not in _PLACEHOLDERS and not (isinstance(v, str) and v in _PLACEHOLDERS)
        }
    else:
        problems.append(
            f'"context_update" must be an object of key: value pairs, got {_describe(raw_update)}'
        )
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


__all__ = [
    "MAX_CANDIDATE_STARTS",
    "MAX_OUTPUT_CHARS",
    "MESSAGE_KEYS",
    "STAY",
    "allowed_targets_from_schema",
    "parse_llm_output",
    "response_from_object",
    "response_json_schema",
]
