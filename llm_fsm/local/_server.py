"""The llama-server process: command lines, a state file per model, start, stop, health and status."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import importlib.metadata
import importlib.util
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from llm_fsm.errors import LLMConfigurationError
from llm_fsm.local._catalogue import (
    DEFAULT_CTX_SIZE,
    DEFAULT_MODEL,
    DEFAULT_START_TIMEOUT,
    MODELS,
    SETUP_HINT,
    STOP_TIMEOUT,
    LocalModel,
    ResponseFormatMode,
    Runtime,
    find_model_file,
    home_dir,
    key_path,
    log_path,
    parse_local_model_name,
    server_binary_path,
    state_path,
)

logger = logging.getLogger(__name__)

# --- server command lines (pure) --------------------------------------------------


def default_threads() -> int:
    """Half the CPUs this process may use, at least one.

    llama.cpp's threads wait for each other at every layer; when other work
    (the test suite, the engine, a build) competes for the cores, each wait
    stretches and latency collapses. Measured on 2 cores under a load average
    of 3.5-5 (same run, alternating): 1 thread answered a 1,288-token prompt in
    10 s cold / 5 s warm, 2 threads in 29 s / 12 s. ``--threads`` overrides.
    """
    return max(1, cpu_count() // 2)


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask, not the whole machine)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def llama_server_command(
    binary: Path,
    model: LocalModel,
    model_file: Path,
    *,
    port: int,
    api_key_file: Path,
    threads: int,
    ctx_size: int = DEFAULT_CTX_SIZE,
) -> list[str]:
    """The llama-server command line: loopback only, one slot so the prompt cache is reused.

    The API key is read from a private file, so it does not show in ``ps``.
    """
    return [
        str(binary),
        "--model",
        str(model_file),
        "--alias",
        model.alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--api-key-file",
        str(api_key_file),
        "--threads",
        str(threads),
        "--ctx-size",
        str(ctx_size),
        "--parallel",
        "1",
        "--no-webui",
        "--offline",
        *model.server_args,
    ]


def llama_cpp_server_command(
    python: str,
    model: LocalModel,
    model_file: Path,
    *,
    port: int,
    api_key: str,
    threads: int,
    ctx_size: int = DEFAULT_CTX_SIZE,
) -> list[str]:
    """The ``python -m llama_cpp.server`` fallback.

    ``--logits_all false`` matters: its default kept logits for every token
    (3 GB of memory and twice the latency with our prompts).
    """
    command = [
        python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_file),
        "--model_alias",
        model.alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--api_key",
        api_key,
        "--n_threads",
        str(threads),
        "--n_ctx",
        str(ctx_size),
        "--logits_all",
        "false",
    ]
    if model.llama_cpp_chat_format:
        command += ["--chat_format", model.llama_cpp_chat_format]
    return command


def response_format_mode_for(runtime: Runtime) -> ResponseFormatMode:
    """How the runtime wants a JSON schema sent (llama_cpp.server fails on ``json_schema``)."""
    return "json_schema" if runtime == "llama-server" else "schema_object"


def litellm_kwargs_for(state: ServerState) -> dict[str, Any]:
    """What LiteLLMInterface passes to litellm to reach a running server.

    The key goes in as a keyword argument, never through ``os.environ``: the
    process may also talk to a hosted provider with its own key.
    """
    return {
        "model": f"openai/{state.alias}",
        "api_base": f"http://127.0.0.1:{state.port}/v1",
        "api_key": state.api_key,
        "response_format_mode": response_format_mode_for(state.runtime),
    }


# --- server state (a small JSON file per model) -------------------------------------


@dataclasses.dataclass(frozen=True)
class ServerState:
    """What a later process needs to reuse, check or stop a server we started."""

    model: str
    alias: str
    runtime: Runtime
    pid: int
    port: int
    api_key: str
    command: tuple[str, ...]
    model_file: str
    started_at: float

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["command"] = list(self.command)
        return json.dumps(data, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ServerState:
        """Parse a state file; anything malformed is a ValueError (treated as 'no server')."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("state file is not a JSON object")
        try:
            state = cls(
                model=str(data["model"]),
                alias=str(data["alias"]),
                runtime=data["runtime"],
                pid=int(data["pid"]),
                port=int(data["port"]),
                api_key=str(data["api_key"]),
                command=tuple(str(part) for part in data["command"]),
                model_file=str(data["model_file"]),
                started_at=float(data["started_at"]),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"state file lacks or mistypes a field: {exc}") from exc
        if state.runtime not in ("llama-server", "llama_cpp.server"):
            raise ValueError(f"unknown runtime {state.runtime!r}")
        if state.pid <= 0 or not 0 < state.port < 65536:
            raise ValueError("state file has an impossible pid or port")
        return state


def read_state(path: Path) -> ServerState | None:
    """The recorded server, or None when there is none or the record is unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        logger.warning("cannot read %s: %s", path, exc)
        return None
    try:
        return ServerState.from_json(text)
    except ValueError as exc:
        logger.warning("ignoring unreadable server state %s: %s", path, exc)
        return None


def write_state(path: Path, state: ServerState) -> None:
    """Write atomically and private to the user: the file holds the server's API key."""
    _write_private(path, state.to_json())


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def remove_state(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


# --- processes ------------------------------------------------------------------------


def process_matches(pid: int, command: tuple[str, ...]) -> bool:
    """True when ``pid`` is alive and still runs the command we started.

    Guards against pid reuse: a stale state file must never make us signal
    someone else's process.
    """
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return _pid_alive(pid) and not Path("/proc").is_dir()
    argv = [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]
    if not argv:
        return False  # a zombie: it has exited
    return tuple(argv) == command


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def healthy(port: int, timeout: float = 2.0) -> bool:
    """llama-server answers 200 on /health once the model is loaded (503 while loading)."""
    for path in ("/health", "/v1/models"):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as reply:
                if reply.status == 200:
                    return True
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                return True  # up, and guarding its models with the API key
            if path == "/health" and exc.code != 404:
                return False  # 503: still loading
        except (urllib.error.URLError, OSError):
            return False
    return False


def free_port() -> int:
    """A port on the loopback interface that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _locked(home: Path, name: str) -> Iterator[None]:
    """One process at a time per model: two `chat` sessions must not start two servers."""
    lock_file = home / "run" / f"{name}.lock"
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def available_runtime(home: Path) -> Runtime | None:
    """llama-server when built; else llama_cpp.server when its package and web stack are installed."""
    if server_binary_path(home).is_file():
        return "llama-server"
    if all(importlib.util.find_spec(name) for name in ("llama_cpp", "uvicorn", "fastapi")):
        return "llama_cpp.server"
    return None


def running_server(model: LocalModel, home: Path | None = None) -> ServerState | None:
    """The recorded server for ``model`` if its process is alive and answers; cleans stale records."""
    home = home or home_dir()
    path = state_path(home, model)
    state = read_state(path)
    if state is None:
        return None
    if not process_matches(state.pid, state.command):
        logger.info("forgetting stale %s server record (pid %d is gone)", model.key, state.pid)
        _forget(home, model)
        return None
    if not healthy(state.port):
        return None
    return state


def start(
    model: str = DEFAULT_MODEL,
    *,
    port: int | None = None,
    home: Path | None = None,
    threads: int | None = None,
    ctx_size: int = DEFAULT_CTX_SIZE,
    timeout: float = DEFAULT_START_TIMEOUT,
) -> ServerState:
    """Start a server for ``model`` on 127.0.0.1, or return the one already running.

    The server outlives this process (its own session, so Ctrl-C in a chat
    does not kill it); `llm-fsm local stop` ends it.
    """
    spec = parse_local_model_name(model)
    home = home or home_dir()
    with _locked(home, f"server-{spec.key}"):
        existing = running_server(spec, home)
        if existing is not None:
            if port is None or existing.port == port:
                return existing
            raise LLMConfigurationError(
                f"the {spec.key} server already runs on port {existing.port}; "
                "stop it first (`llm-fsm local stop`) to move it"
            )
        stale = read_state(state_path(home, spec))
        if stale is not None and process_matches(stale.pid, stale.command):
            # alive but not answering: a hung server is replaced, not reused
            _terminate(stale)
        _forget(home, spec)
        return _launch(spec, home, port=port, threads=threads, ctx_size=ctx_size, timeout=timeout)


def _launch(
    spec: LocalModel,
    home: Path,
    *,
    port: int | None,
    threads: int | None,
    ctx_size: int,
    timeout: float,
) -> ServerState:
    runtime = available_runtime(home)
    if runtime is None:
        raise LLMConfigurationError(f"no local model server is built; {SETUP_HINT}")
    model_file = find_model_file(spec, home)
    chosen_port = port if port is not None else free_port()
    api_key = "sk-local-" + secrets.token_hex(16)
    n_threads = threads or default_threads()
    if runtime == "llama-server":
        key_file = key_path(home, spec)
        _write_private(key_file, api_key + "\n")
        command = llama_server_command(
            server_binary_path(home),
            spec,
            model_file,
            port=chosen_port,
            api_key_file=key_file,
            threads=n_threads,
            ctx_size=ctx_size,
        )
    else:
        command = llama_cpp_server_command(
            sys.executable,
            spec,
            model_file,
            port=chosen_port,
            api_key=api_key,
            threads=n_threads,
            ctx_size=ctx_size,
        )
    log_file = log_path(home, spec)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    logger.info("starting %s for %s on 127.0.0.1:%d", runtime, spec.key, chosen_port)
    began = time.monotonic()
    with open(log_file, "ab") as log:
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise LLMConfigurationError(f"cannot run {command[0]}: {exc}; {SETUP_HINT}") from exc
    state = ServerState(
        model=spec.key,
        alias=spec.alias,
        runtime=runtime,
        pid=process.pid,
        port=chosen_port,
        api_key=api_key,
        command=tuple(command),
        model_file=str(model_file),
        started_at=time.time(),
    )
    write_state(state_path(home, spec), state)
    deadline = began + timeout
    while time.monotonic() < deadline:
        code = process.poll()
        if code is not None:
            _forget(home, spec)
            raise LLMConfigurationError(
                f"{runtime} exited with code {code} while starting; see {log_file}:\n" + _tail(log_file)
            )
        if healthy(chosen_port, timeout=1.0):
            logger.info("%s ready in %.1f s", runtime, time.monotonic() - began)
            return state
        time.sleep(0.1)
    _terminate(state)
    _forget(home, spec)
    raise LLMConfigurationError(
        f"{runtime} did not become ready within {timeout:.0f} s; see {log_file}:\n" + _tail(log_file)
    )


def _forget(home: Path, spec: LocalModel) -> None:
    remove_state(state_path(home, spec))
    remove_state(key_path(home, spec))


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _terminate(state: ServerState) -> None:
    """SIGTERM, then SIGKILL after a grace period; only ever the process we recorded."""
    if not process_matches(state.pid, state.command):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while time.monotonic() < deadline:
        _reap(state.pid)
        if not process_matches(state.pid, state.command):
            return
        time.sleep(0.1)
    logger.warning("server pid %d ignored SIGTERM; killing it", state.pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.pid, signal.SIGKILL)
    _reap(state.pid)


def _reap(pid: int) -> None:
    """Collect our own child's exit status so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def stop(model: str | None = None, *, home: Path | None = None) -> list[ServerState]:
    """Stop the server of ``model`` (every local model when None); returns what was stopped."""
    home = home or home_dir()
    specs = list(MODELS.values()) if model is None else [parse_local_model_name(model)]
    stopped: list[ServerState] = []
    for spec in specs:
        with _locked(home, f"server-{spec.key}"):
            path = state_path(home, spec)
            state = read_state(path)
            if state is not None and process_matches(state.pid, state.command):
                _terminate(state)
                stopped.append(state)
            _forget(home, spec)
    return stopped


# --- status -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelStatus:
    key: str
    model_file: str | None
    server: ServerState | None


@dataclasses.dataclass(frozen=True)
class LocalStatus:
    home: str
    binary: str | None
    runtime: Runtime | None
    models: tuple[ModelStatus, ...]

    @property
    def ready(self) -> bool:
        """A default model can be served: a runtime and the SmolLM2 file are there."""
        default = next(m for m in self.models if m.key == DEFAULT_MODEL)
        return self.runtime is not None and default.model_file is not None


def status(home: Path | None = None) -> LocalStatus:
    home = home or home_dir()
    binary = server_binary_path(home)
    models = []
    for spec in MODELS.values():
        try:
            model_file: str | None = str(find_model_file(spec, home, assemble=False))
        except LLMConfigurationError:
            model_file = None
        models.append(ModelStatus(spec.key, model_file, running_server(spec, home)))
    return LocalStatus(
        home=str(home),
        binary=str(binary) if binary.is_file() else None,
        runtime=available_runtime(home),
        models=tuple(models),
    )


# --- the hook for LiteLLMInterface --------------------------------------------------------


def resolve_local_model(name: str, *, home: Path | None = None, start_server: bool = True) -> dict[str, Any]:
    """litellm keyword arguments for ``local`` / ``local/<model>``, starting the server if needed.

    Returns ``model`` (``openai/<alias>``), ``api_base``, ``api_key`` and
    ``response_format_mode`` (``json_schema`` for llama-server,
    ``schema_object`` for llama_cpp.server).
    """
    spec = parse_local_model_name(name)
    home = home or home_dir()
    state = running_server(spec, home)
    if state is None:
        if not start_server:
            raise LLMConfigurationError(f"no {spec.key} server is running; start one with `llm-fsm local start`")
        state = start(spec.key, home=home)
    return litellm_kwargs_for(state)


def local_litellm_kwargs(model_name: str) -> dict[str, Any]:
    """Integration hook: LiteLLMInterface calls this when its model name starts with ``local``."""
    return resolve_local_model(model_name)
