"""``llm-fsm schema``: print the definition JSON Schema or check a file against it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click

from llm_fsm.cli._app import EXIT_FINDINGS, EXIT_UNREADABLE, GuardedCommand, _fail
from llm_fsm.definition._schema import render_schema

# --- schema --------------------------------------------------------------------------

#: where the committed copy lives in a source checkout
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "fsm_definition.schema.json"


@click.command("schema", cls=GuardedCommand)
@click.option(
    "--check",
    "check_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Compare this file with the generated schema; exit 1 when they differ.",
)
@click.pass_context
def schema_command(ctx: click.Context, check_file: str | None) -> None:
    """Print the JSON Schema (2020-12) of definition files, generated from the models.

    \b
    Example:
        llm-fsm schema > schemas/fsm_definition.schema.json
        llm-fsm schema --check schemas/fsm_definition.schema.json
    """
    from llm_fsm.definition._schema import render_schema

    text = render_schema()
    if check_file is None:
        click.echo(text, nl=False)
        return
    try:
        current = Path(check_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        _fail(f"{check_file}: cannot read: {exc}")
        ctx.exit(EXIT_UNREADABLE)
    if current != text:
        _fail(f"{check_file} is out of date; regenerate it with: python -m llm_fsm.cli.schema")
        ctx.exit(EXIT_FINDINGS)
    click.echo(f"{check_file} is up to date")


def write_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m llm_fsm.cli.schema", description=__doc__.splitlines()[0])
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
            print(f"{args.output} is out of date; run: python -m llm_fsm.cli.schema", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(write_main())
