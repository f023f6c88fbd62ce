"""The click group and the error guard every command runs under (exit codes: 0 clean, 1 findings, 2 usage or unreadable
input)."""

from __future__ import annotations

from typing import Any

import click

from llm_fsm.errors import FSMError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE = 0, 1, 2

LINT_SUFFIXES = (".json", ".yaml", ".yml")

#: conversation test scripts live next to definitions but are not definitions
SKIP_SUFFIXES = (".conv.yaml", ".conv.yml", ".conv.json")


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)


class _Guarded:
    """Mixin: turn any unexpected exception into one line on stderr and exit 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except FSMError as exc:
            _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            ctx.exit(EXIT_UNREADABLE)
        except Exception as exc:  # the promised no-traceback guarantee
            _fail(f"unexpected {type(exc).__name__}: {exc}")
            ctx.exit(EXIT_UNREADABLE)


class GuardedGroup(_Guarded, click.Group):
    pass


class GuardedCommand(_Guarded, click.Command):
    pass


@click.group(cls=GuardedGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="llm_fsm", prog_name="llm-fsm")
def main() -> None:
    """llm-fsm: declarative finite-state machines for LLM conversations.

    \b
    Example:
        llm-fsm lint definitions/
        llm-fsm graph definitions/coffee_order.yaml --format mermaid
    """
