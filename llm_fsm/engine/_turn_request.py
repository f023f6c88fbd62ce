"""The model request for a state: its prompt, and a reply schema that offers only what the state allows.

Its own module because the opening, the turn and the regenerated reply all ask the model through it, and the reply
schemas it builds are cached across conversations (they depend only on the state's options).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_fsm.definition._model import FSMDefinition, State
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._records import LLMRequest
from llm_fsm.engine._reply_schema import key_json_schema, response_json_schema
from llm_fsm.engine._snippets import Snippet


def _allowed_targets(definition: FSMDefinition, state: State) -> list[str]:
    targets = [state.id]
    for t in definition.transitions_from(state.id):
        if t.target_state not in targets:
            targets.append(t.target_state)
    return targets


def _request(
    builder: PromptBuilder,
    definition: FSMDefinition,
    instance: FSMInstance,
    state: State,
    message: str,
    purpose: str,
    *,
    note: str | None = None,
    allow_moves: bool = True,
    schema_sent: bool = False,
    user_content: list[dict[str, Any]] | None = None,
    snippets: Sequence[Snippet] = (),
) -> LLMRequest:
    prompt = builder.build_system_prompt(
        instance, state, definition=definition, engine_decision=note, schema_sent=schema_sent, retrieved=snippets
    )
    if allow_moves:
        options = _options(definition, state)
        schema = _schema(
            options.targets,
            tuple(builder.intents_for(definition, instance, state)),
            tuple(builder.flow_names_for(definition, instance, state)),
            options.typed_keys,
        )
        context_keys = _context_keys(options, instance)
    else:
        schema, context_keys = _schema((state.id,), None, None, ()), []
    return LLMRequest(
        system_prompt=prompt,
        user_message=message,
        user_content=user_content,
        response_schema=schema,
        purpose=purpose,  # type: ignore[arg-type]
        context_keys=context_keys,
        conversation_id=instance.conversation_id,
    )


def _context_keys(options: _Options, instance: FSMInstance) -> list[str]:
    """What the model may usefully write in this state: keys to collect, keys its conditions need, and
    keys already collected (so a correction of any of them is possible)."""
    return list(dict.fromkeys([*options.keys, *(k for k in instance.context.data if not str(k).startswith("_"))]))


@dataclass(frozen=True, slots=True)
class _Options:
    """What the model may do in a state as far as the definition says; the same every turn, so built once."""

    targets: tuple[str, ...]
    """The state itself, then its transitions' targets."""
    keys: tuple[str, ...]
    """The keys to collect, then the keys its conditions need."""
    typed_keys: tuple[tuple[str, str], ...]
    """(key, JSON Schema as text) of those the model may write and that are declared with a type (hashable)."""


_OPTIONS: dict[tuple[str, str], _Options] = {}


def _options(definition: FSMDefinition, state: State) -> _Options:
    """The state's options, cached by the definition's content (a definition is not edited in place)."""
    cache_key = (definition.content_hash, state.id)
    found = _OPTIONS.get(cache_key)
    if found is None:
        keys = list(state.required_context_keys or ())
        for transition in definition.transitions_from(state.id):
            for condition in transition.conditions or ():
                keys += condition.requires_context_keys or ()
                if condition.compiled is not None:
                    keys += sorted(condition.compiled.reads)
        unique = tuple(dict.fromkeys(keys))
        found = _Options(tuple(_allowed_targets(definition, state)), unique, _typed_keys(definition, unique))
        if len(_OPTIONS) < 4096:
            _OPTIONS[cache_key] = found
    return found


def _typed_keys(definition: FSMDefinition, keys: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    typed = []
    for key in keys:
        declaration = (definition.context_keys or {}).get(key)
        if declaration is None or key in definition.application_only_keys:
            continue
        schema = key_json_schema(declaration)
        if schema is not None:
            typed.append((key, json.dumps(schema, sort_keys=True)))
    return tuple(typed)


@functools.lru_cache(maxsize=512)
def _schema(
    targets: tuple[str, ...],
    intents: tuple[str, ...] | None,
    flows: tuple[str, ...] | None,
    typed_keys: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """Reply schemas depend only on the state's options, so each is built once (and shared: do not mutate)."""
    key_schemas = {key: json.loads(text) for key, text in typed_keys}
    return response_json_schema(list(targets), intents=intents, flows=flows, bounded=False, key_schemas=key_schemas)
