"""The server is an extra: the package and its command line import none of it until `serve` runs."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> str:
    probe = f"import sys; {code}; print(sorted(m for m in ('fastapi', 'starlette', 'uvicorn', 'llm_fsm.server') if m in sys.modules))"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()


def test_importing_the_package_and_the_cli_imports_no_server_module() -> None:
    assert _modules_after("import llm_fsm, llm_fsm.cli") == "[]"


def test_loading_the_serve_command_imports_no_server_module() -> None:
    assert _modules_after("import llm_fsm.cli.serve") == "[]"
