"""The command line: one click group (``llm-fsm``) with a module per command, and ``fsm-lint``."""

from __future__ import annotations

from llm_fsm.cli import chat, graph, init, local, schema, test  # noqa: F401  (importing them registers their commands on the group)
from llm_fsm.cli._app import main
from llm_fsm.cli.lint import fsm_lint, lint_main

for _command in (
    chat.chat_command,
    chat.run_command,
    chat.explain_command,
    chat.trace_command,
    chat.conversations_command,
    test.test_command,
    local.local_group,
    init.init_command,
):
    main.add_command(_command)

__all__ = ["fsm_lint", "lint_main", "main"]
