"""The command line: one click group (``llm-fsm``) with a module per command, and ``fsm-lint``.

Commands are imported when they run (or when ``--help`` lists them), so a cold ``fsm-lint``
loads the linter, not the engine, the stores or the local-model supervisor.
"""

from __future__ import annotations

from llm_fsm.cli._app import main
from llm_fsm.cli.lint import fsm_lint, lint_main

for _name, _module, _attribute in (
    ("graph", "llm_fsm.cli.graph", "graph_command"),
    ("schema", "llm_fsm.cli.schema", "schema_command"),
    ("chat", "llm_fsm.cli.chat", "chat_command"),
    ("run", "llm_fsm.cli.chat", "run_command"),
    ("explain", "llm_fsm.cli._stored", "explain_command"),
    ("trace", "llm_fsm.cli._stored", "trace_command"),
    ("conversations", "llm_fsm.cli._stored", "conversations_command"),
    ("test", "llm_fsm.cli.test", "test_command"),
    ("local", "llm_fsm.cli.local", "local_group"),
    ("init", "llm_fsm.cli.init", "init_command"),
    ("serve", "llm_fsm.cli.serve", "serve_command"),
    ("audit", "llm_fsm.cli.audit", "audit_group"),
    ("replay", "llm_fsm.cli.audit", "replay_command"),
    ("migrate", "llm_fsm.cli.audit", "migrate_command"),
    ("index", "llm_fsm.cli.index", "index_command"),
    ("mcp", "llm_fsm.cli.mcp", "mcp_command"),
):
    main.add_lazy_command(_name, _module, _attribute)

__all__ = ["fsm_lint", "lint_main", "main"]
