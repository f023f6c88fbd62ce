"""The JSON Schema of definition files, generated from the pydantic models.

The models are the single source of truth; ``schemas/fsm_definition.schema.json``
is this module's output, committed so editors can point YAML files at it
(``# yaml-language-server: $schema=../schemas/fsm_definition.schema.json``).
A test keeps the committed file equal to a fresh generation and checks that
jsonschema and the models accept the same documents.

Regenerate with ``python -m llm_fsm.schema`` (``--check`` to verify only).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .definitions import SCHEMA_ID, FSMDefinition

DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: where the committed copy lives in a source checkout
SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "fsm_definition.schema.json"


def build_schema() -> dict[str, Any]:
    """The models' schema with ``$schema`` and ``$id`` first (what the 2020-12 dialect expects)."""
    generated = FSMDefinition.model_json_schema(mode="validation")
    generated.pop("$id", None)
    return {"$schema": DIALECT, "$id": SCHEMA_ID, **generated}


def render_schema() -> str:
    """The schema as committed: two-space indented JSON with a final newline."""
    return json.dumps(build_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llm_fsm.schema", description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=SCHEMA_PATH, help="file to write (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs from the models")
    args = parser.parse_args(argv)
    text = render_schema()
    if args.check:
        try:
            current = args.output.read_text(encoding="utf-8")
        except OSError as exc:
            print(f"error: cannot read {args.output}: {exc}", file=sys.stderr)
            return 2
        if current != text:
            print(f"{args.output} is out of date; run: python -m llm_fsm.schema", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
