"""The click group, and the one exit-code policy every command follows.

Exit codes:

* ``0`` (``EXIT_CLEAN``): the command did everything it was asked.
* ``1`` (``EXIT_FINDINGS``): it ran, and what it checked or played failed — lint
  findings, failed conversation tests, a schema file out of date, a conversation
  turn that could not be completed (the model's answer unusable, the provider
  failing the call, a hook raising, ...).
* ``2`` (``EXIT_UNREADABLE``): it could not run on what it was given — a usage
  error, an unknown file, id or conversation, an unreadable or invalid
  definition, script or recording, a model that is not configured or not set
  up, a store that cannot be opened or reached, a file that cannot be read or
  written, or an unexpected internal error.

``exit_code_for`` decides per error type; ``report_error`` prints the one line a
person reads (never a traceback). Commands raise, or return their code through
``ctx.exit``; ``GuardedCommand`` / ``GuardedGroup`` apply the policy to whatever
escapes.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import Any

import click

from llm_fsm.errors import (
    ActionError,
    ActionNotRegisteredError,
    BudgetExceededError,
    ConcurrentUpdateError,
    ContextError,
    ConversationEndedError,
    FlowError,
    FSMError,
    HookError,
    InvalidMessageError,
    InvalidTransitionError,
    LLMResponseError,
    LLMScriptExhaustedError,
    MigrationError,
)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE = 0, 1, 2

#: ``--actions``: where the functions a definition's actions call come from (chat, run, test, serve)
actions_option = click.option(
    "--actions",
    "actions",
    metavar="MODULE:NAME",
    default=None,
    help="The ActionRegistry (or dict of functions) the definition's actions call: module:name or file.py:name.",
)

#: ``--retrievers``: where the retrievers a definition's ``retrieve`` names come from (chat, run)
retrievers_option = click.option(
    "--retrievers",
    "retrievers",
    metavar="MODULE:NAME",
    default=None,
    help="The RetrieverRegistry (or dict of retrievers) the definition's retrieve names: module:name or file.py:name.",
)

#: ``--mcp``: the MCP servers whose tools ``call: mcp:SERVER/TOOL`` runs (fsm-lint, chat, run, test, serve)
mcp_option = click.option(
    "--mcp",
    "mcp",
    metavar="CONFIG",
    default=None,
    help='The MCP servers whose tools "call: mcp:SERVER/TOOL" runs: a JSON or YAML file {"mcpServers": {...}}.',
)


def action_registry(actions: str | None, mcp: str | None) -> Any:
    """``--actions`` and ``--mcp`` as one ``ActionRegistry`` (None without either). The MCP servers' sessions end
    with the command (and at the latest with the process): a stdio server is a child process."""
    from llm_fsm.actions import ActionRegistry, load_registry

    registry = load_registry(actions) if actions else None
    if mcp:
        from llm_fsm.mcp import MCPTools

        tools = MCPTools(mcp)  # a wrong file stops the command here, before any conversation starts
        registry = (registry or ActionRegistry()).attach(tools)
        ctx = click.get_current_context(silent=True)
        if ctx is not None:
            ctx.call_on_close(tools.close)
    return registry


LINT_SUFFIXES = (".json", ".yaml", ".yml")

#: conversation test scripts live next to definitions but are not definitions
SKIP_SUFFIXES = (".conv.yaml", ".conv.yml", ".conv.json")

#: errors of a run that started and then failed (exit 1); every other error means it could not run (exit 2)
RUN_FAILURES: tuple[type[FSMError], ...] = (
    LLMResponseError,  # the model's answer was unusable after re-asks, or the provider failed the call
    LLMScriptExhaustedError,  # a scripted model ran out of replies
    HookError,
    FlowError,
    ContextError,  # includes RecordTooLargeError
    InvalidMessageError,
    InvalidTransitionError,
    ConversationEndedError,
    ConcurrentUpdateError,
    BudgetExceededError,  # the conversation spent its budget: the run started and could not go on
    ActionError,  # a backend call a state declares failed with on_error: fail
    MigrationError,  # a conversation the new version cannot hold: a finding about the definition, not bad input
)

EXIT_CODE_HELP = """\b
Exit status (every command):
  0  done, nothing failed
  1  ran, and something failed: lint findings, failed conversation
     tests, a schema out of date, a turn the model could not complete
  2  could not run: usage error, unknown file or conversation,
     unreadable definition/script/recording, model not configured,
     store unreachable, or an internal error"""


def recordings_note(recordings: Sequence[str | os.PathLike[str]]) -> list[str]:
    """One line per folder for the ``--record`` files a walk skipped: they are JSON, but not definitions."""
    folders: dict[str, int] = {}
    for path in recordings:
        folder = os.path.dirname(os.fspath(path)) or "."
        folders[folder] = folders.get(folder, 0) + 1
    return [
        f"skipped {count} recording{'s' if count != 1 else ''} of `llm-fsm test --record` in {folder}/ "
        "(not definitions)"
        for folder, count in folders.items()
    ]


def exit_code_for(error: BaseException) -> int:
    """The exit code of an error that stopped a command (see the module docstring)."""
    if isinstance(error, ActionNotRegisteredError):
        return EXIT_UNREADABLE  # a setup problem (no --actions registry), not a failed run
    if isinstance(error, RUN_FAILURES):
        return EXIT_FINDINGS
    return EXIT_UNREADABLE


def error_message(error: BaseException) -> str:
    """One line for a person: the error's first line; the type for an error we did not expect."""
    if isinstance(error, FSMError):
        text = str(error)
        return text.splitlines()[0] if text.strip() else type(error).__name__
    if isinstance(error, OSError):
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror or error}{where}"
    return f"unexpected {type(error).__name__}: {error}"


def report_error(error: BaseException) -> int:
    """Print ``error: …`` on stderr and return its exit code."""
    _fail(error_message(error))
    return exit_code_for(error)


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)


class _Guarded:
    """Mixin: whatever escapes a command becomes one line on stderr and the policy's exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except BrokenPipeError:  # `llm-fsm test definitions/ | head`: the reader has read enough; click ends quietly
            raise
        except Exception as exc:  # the promised no-traceback guarantee
            ctx.exit(report_error(exc))


class GuardedGroup(_Guarded, click.Group):
    """A guarded group whose subcommands may be named here and imported only when run.

    ``fsm-lint`` on one file should not pay for importing the engine, the stores and the
    local-model supervisor that ``chat``, ``test`` and ``local`` need (measured: they were most
    of a cold fsm-lint's start-up).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands: dict[str, tuple[str, str]] = {}

    def add_lazy_command(self, name: str, module: str, attribute: str) -> None:
        self.lazy_commands[name] = (module, attribute)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self.lazy_commands:
            module, attribute = self.lazy_commands[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
            self.add_command(command, cmd_name)
        return command


class GuardedCommand(_Guarded, click.Command):
    pass


GuardedGroup.command_class = GuardedCommand  # @group.command(...) makes guarded commands
GuardedGroup.group_class = GuardedGroup


@click.group(cls=GuardedGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=EXIT_CODE_HELP)
@click.version_option(package_name="llm_fsm", prog_name="llm-fsm")
def main() -> None:
    """llm-fsm: declarative finite-state machines for LLM conversations.

    \b
    Example:
        llm-fsm init signup && llm-fsm test signup.yaml
        llm-fsm lint definitions/
        llm-fsm graph definitions/coffee_order.yaml --format mermaid
    """
