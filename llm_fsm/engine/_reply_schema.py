"""The reply the engine asks the model for: its JSON Schema (lean, closed for local models) and the placeholders of the
prompt's example.

The engine owns this contract; the LLM edge parses replies against it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from llm_fsm.definition._enums import DONTCARE
from llm_fsm.definition._keys import KeyDeclaration

STAY = ""
"""``target_state`` when the model made no proposal (null, empty or absent): the engine treats it as "stay"."""

MAX_OUTPUT_CHARS = 200_000
"""Replies longer than this are refused rather than scanned: no real reply is this long."""

MAX_CANDIDATE_STARTS = 500
"""How many ``{`` positions the scanner tries before giving up; bounds the work on hostile text."""

MESSAGE_KEYS = ("message", "response", "reply")
"""Names a model may give the user-facing text; the first present wins."""

PLACEHOLDER_KEY, PLACEHOLDER_VALUE, PLACEHOLDER_STATE, PLACEHOLDER_MESSAGE = "KEY", "VALUE", "STATE", "REPLY"

"""The placeholders of the reply example in the prompt (``engine._prompts`` builds it from these).

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


#: string formats constrained decoders and strict structured outputs know (llama.cpp grammars, OpenAI);
#: the others (time as we store it, phone, uri) are checked by the engine only
_DECODER_FORMATS = frozenset({"date", "date-time", "email", "uuid"})


def key_json_schema(declaration: KeyDeclaration) -> dict[str, Any] | None:
    """The JSON Schema of a declared key's value, or None when it constrains nothing beyond "a string".

    Only what a decoder can enforce and what changes the model's choice: an enum replaces the type, bounds
    and patterns are kept, descriptions stay in the prompt (each schema keyword is billed on every call).
    """
    schema: dict[str, Any] = {}
    if declaration.enum is not None:
        schema["enum"] = list(declaration.enum)
    elif declaration.type != "string":
        schema["type"] = declaration.type
    if declaration.format in _DECODER_FORMATS:
        schema.update(type="string", format=declaration.format)
    if declaration.pattern is not None:
        schema.update(type="string", pattern=declaration.pattern)
    for ours, theirs in (
        ("minimum", "minimum"),
        ("maximum", "maximum"),
        ("min_length", "minLength"),
        ("max_length", "maxLength"),
        ("min_items", "minItems"),
        ("max_items", "maxItems"),
    ):
        bound = getattr(declaration, ours)
        if bound is not None:
            schema[theirs] = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
    if declaration.items is not None:
        items = key_json_schema(declaration.items)
        if items is not None:
            schema["items"] = items
    if schema and "type" not in schema and "enum" not in schema:
        schema["type"] = declaration.type
    if declaration.dontcare and schema:  # (a plain string key takes "dontcare" already)
        if "enum" in schema:
            schema["enum"] = list(dict.fromkeys([*schema["enum"], DONTCARE]))  # (an enum may list it already)
        else:
            schema = {"anyOf": [schema, {"const": DONTCARE}]}
    return schema or None


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
    key_schemas: Mapping[str, dict[str, Any]] | None = None,
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

    ``key_schemas`` (``key_json_schema`` of declared keys) types those keys'
    values, so constrained decoding enforces a declaration before the engine
    checks it; in the closed form a typed key replaces the generic bounded value.
    """
    key_schemas = key_schemas or {}
    if not bounded:
        return _lean_schema(allowed_targets, intents, flows, key_schemas)
    # An enum bounds the string by itself; type and maxLength only matter without one.
    target: dict[str, Any] = {"type": "string", "maxLength": max_string_chars}
    if allowed_targets is not None:
        target = {"enum": list(dict.fromkeys(allowed_targets)) or [STAY]}
    depth = max(1, max_value_depth)
    context_update: dict[str, Any] = {"type": "object", "additionalProperties": {"$ref": "#/$defs/value1"}}
    if context_keys is not None:
        context_update = {
            "type": "object",
            "properties": {
                key: _bounded_key(key_schemas[key], max_string_chars, max_items)
                if key in key_schemas
                else {"$ref": "#/$defs/value1"}
                for key in dict.fromkeys(context_keys)
            },
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


def _bounded_key(schema: dict[str, Any], max_string_chars: int, max_items: int) -> dict[str, Any]:
    """A typed key under a grammar: strings and lists still get an upper bound (a looping model must stop)."""
    if "anyOf" in schema:  # a key that may also be "dontcare": its own schema bounded
        return {"anyOf": [_bounded_key(s, max_string_chars, max_items) for s in schema["anyOf"]]}
    bounded = dict(schema)
    if bounded.get("type") == "string" and "enum" not in bounded and "pattern" not in bounded:
        bounded.setdefault("maxLength", max_string_chars)
    if bounded.get("type") == "array":
        bounded.setdefault("maxItems", max_items)
    return bounded


def _lean_schema(
    allowed_targets: Sequence[str] | None,
    intents: Sequence[str] | None,
    flows: Sequence[str] | None,
    key_schemas: Mapping[str, dict[str, Any]] | None = None,
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
        "properties": {
            "target_state": target,
            "context_update": {"type": "object", "properties": dict(key_schemas)}
            if key_schemas
            else {"type": "object"},
        },
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
    try:
        typed = dict(properties["transition"]["properties"]["context_update"].get("properties") or {})
    except (KeyError, TypeError, AttributeError):
        typed = {}
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
        key_schemas=typed,
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
