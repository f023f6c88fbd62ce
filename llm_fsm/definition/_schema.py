"""The JSON Schema of the definition format, generated from the pydantic model."""

from __future__ import annotations

import json
from typing import Any

from llm_fsm.definition._model import SCHEMA_ID, FSMDefinition

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def build_schema() -> dict[str, Any]:
    """The models' schema with ``$schema`` and ``$id`` first (what the 2020-12 dialect expects)."""
    generated = FSMDefinition.model_json_schema(mode="validation")
    generated.pop("$id", None)
    return {"$schema": DIALECT, "$id": SCHEMA_ID, **generated}


def render_schema() -> str:
    """The schema as committed: two-space indented JSON with a final newline."""
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"
