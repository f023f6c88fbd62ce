"""Run the original LLM-FSM beside ours, in a virtual environment of its own.

The original package (``llm-fsm`` 0.1.1 on PyPI, GPL-3.0) is measured, never
used: it is installed into a venv *outside* this repository and driven by
``original_driver.py`` in a separate process that talks JSON lines over stdin
and stdout (``DriverSession``). Nothing of it is imported into our process or copied into our package.
Both packages import as ``llm_fsm``; the separate interpreter (started with
``-I``, isolated mode, so neither PYTHONPATH, the user site nor this folder is
on its path) is what keeps the two apart.

Usage (from the repository root)::

    python benchmarks/baseline/original_env.py            # create the venv if missing, print its python
    python benchmarks/baseline/original_env.py --recreate

The venvs live under ``$LLM_FSM_BENCH_DIR`` (default ``~/.cache/llm_fsm/bench``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DRIVER = Path(__file__).resolve().with_name("original_driver.py")


@dataclass(frozen=True)
class Baseline:
    """One released package we compare against, pinned, with the venv it lives in."""

    key: str
    label: str
    requirement: str
    venv_name: str
    dist_name: str
    import_name: str


BASELINES: dict[str, Baseline] = {
    "original": Baseline(
        key="original",
        label="llm-fsm 0.1.1 (original)",
        requirement="llm-fsm==0.1.1",
        venv_name="original-venv",
        dist_name="llm-fsm",
        import_name="llm_fsm",
    ),
}


class BaselineUnavailable(RuntimeError):
    """The baseline venv could not be created or its driver failed; the message says why."""


def bench_dir() -> Path:
    """Where baseline venvs and caches live: outside the repository, reused across runs."""
    configured = os.environ.get("LLM_FSM_BENCH_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    return Path.home() / ".cache" / "llm_fsm" / "bench"


def venv_path(baseline: Baseline) -> Path:
    return bench_dir() / baseline.venv_name


def venv_python(baseline: Baseline) -> Path:
    root = venv_path(baseline)
    if os.name == "nt":
        return root / "Scripts" / "python.exe"
    return root / "bin" / "python"


def _marker(baseline: Baseline) -> Path:
    # Written last, only after a successful install: its presence means "ready".
    return venv_path(baseline) / ".llm_fsm_bench_ready.json"


def _clean_env() -> dict[str, str]:
    """The environment for child processes: nothing that could leak our package into theirs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONNOUSERSITE"] = "1"
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return env


def is_ready(baseline: Baseline) -> bool:
    marker = _marker(baseline)
    if not marker.is_file() or not venv_python(baseline).is_file():
        return False
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded.get("requirement") == baseline.requirement


def ensure_venv(baseline: Baseline, *, recreate: bool = False, quiet: bool = True) -> Path:
    """Create the venv and install the pinned package once; later calls return at once.

    Returns the venv's python. Raises BaselineUnavailable with pip's output when
    the install fails (for example when the package index cannot be reached).
    """
    root = venv_path(baseline)
    if recreate and root.exists():
        shutil.rmtree(root)
    if is_ready(baseline):
        return venv_python(baseline)
    if root.exists():
        # A half-built venv from an interrupted run: start over rather than trust it.
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    # system_site_packages=False matters: our own llm_fsm is installed globally
    # under the same import name as the original.
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(root)
    python = venv_python(baseline)
    cmd = [str(python), "-m", "pip", "install", "--disable-pip-version-check", baseline.requirement]
    if quiet:
        cmd.insert(4, "-q")
    done = subprocess.run(cmd, env=_clean_env(), capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise BaselineUnavailable(
            f"pip install {baseline.requirement} into {root} failed "
            f"(exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        )
    version = subprocess.run(
        [str(python), "-I", "-c", f"import importlib.metadata as m; print(m.version({baseline.dist_name!r}))"],
        env=_clean_env(),
        capture_output=True,
        text=True,
    )
    _marker(baseline).write_text(
        json.dumps({"requirement": baseline.requirement, "version": version.stdout.strip()}),
        encoding="utf-8",
    )
    return python


def installed_version(baseline: Baseline) -> str | None:
    try:
        return json.loads(_marker(baseline).read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


class DriverSession:
    """A running driver process inside the baseline's venv: send a request, get its JSON answer.

    The process stays up between requests so that timing rounds can alternate
    with our own engine's. Use as a context manager; on exit the process is
    ended and its scratch directory (log files the original writes) removed.
    """

    def __init__(self, baseline: Baseline, *, timeout: float = 1800.0) -> None:
        self.baseline = baseline
        self.timeout = timeout
        self._process: subprocess.Popen[str] | None = None
        self._scratch: str | None = None
        self._stderr: Any = None

    def __enter__(self) -> DriverSession:
        python = ensure_venv(self.baseline)
        # The original writes log files under ./logs at import: give it a scratch
        # directory that is thrown away afterwards, never the repository. Its
        # stderr goes to a file there: a pipe nobody drains would block it.
        self._scratch = tempfile.mkdtemp(prefix="run-", dir=bench_dir())
        self._stderr = open(os.path.join(self._scratch, "stderr.log"), "w+", encoding="utf-8")
        self._process = subprocess.Popen(
            [str(python), "-I", str(DRIVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=_clean_env(),
            text=True,
            cwd=self._scratch,
        )
        return self

    def stderr_tail(self, limit: int = 4000) -> str:
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read()[-limit:]

    def request(self, job: dict[str, Any]) -> dict[str, Any]:
        process = self._process
        if process is None or process.stdin is None or process.stdout is None:
            raise BaselineUnavailable("driver session is not running")
        watchdog = threading.Timer(self.timeout, process.kill)
        watchdog.start()
        try:
            process.stdin.write(json.dumps(job) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        finally:
            watchdog.cancel()
        if not line:
            try:
                code: int | None = process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            raise BaselineUnavailable(
                f"{self.baseline.label} driver stopped (exit {code}) during {job.get('op')!r}:\n{self.stderr_tail()}"
            )
        try:
            return json.loads(line)
        except ValueError as exc:
            raise BaselineUnavailable(f"{self.baseline.label} driver printed no JSON: {line[:500]}") from exc

    def __exit__(self, *exc_info: object) -> None:
        process = self._process
        if process is not None:
            try:
                if process.stdin is not None:
                    process.stdin.close()
                process.wait(timeout=30)
            except (subprocess.TimeoutExpired, OSError):
                process.kill()
                process.wait()
        if self._stderr is not None:
            self._stderr.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--which", choices=sorted(BASELINES), default="original")
    parser.add_argument("--recreate", action="store_true", help="delete and rebuild the venv")
    args = parser.parse_args(argv)
    baseline = BASELINES[args.which]
    try:
        python = ensure_venv(baseline, recreate=args.recreate, quiet=False)
    except BaselineUnavailable as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"{baseline.label}: {python} (installed {installed_version(baseline)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
