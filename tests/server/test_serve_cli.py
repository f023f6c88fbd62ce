"""``llm-fsm serve``: it refuses what would be unsafe or cannot work before listening, and then it serves."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from llm_fsm.cli import main
from llm_fsm.cli.serve import is_loopback
from llm_fsm.server import hash_key

from .conftest import ALICE_KEY

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, list(args), input=input, env=env or {"LLM_FSM_API_KEYS": ""})


@pytest.fixture
def replies(tmp_path: Path) -> str:
    path = tmp_path / "replies.yaml"
    path.write_text("- Hello! Your name and card, please.\n- Noted.\n- Noted again.\n", encoding="utf-8")
    return f"scripted:{path}"


@pytest.fixture
def keys_file(tmp_path: Path) -> str:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps([{"key_sha256": hash_key(ALICE_KEY), "tenant": "alice"}]), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.0.1", "localhost", "::1", "[::1]"])
def test_loopback_hosts_are_recognised(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com", "10.0.0.1"])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


def test_serving_without_keys_on_a_non_loopback_host_refuses_to_start(definitions: Path, replies: str) -> None:
    result = invoke("serve", str(definitions), "--model", replies, "--store", "memory://", "--host", "0.0.0.0")
    assert result.exit_code == 2 and "refusing to serve on 0.0.0.0 without API keys" in result.output


def test_an_empty_keys_file_on_a_non_loopback_host_refuses_to_start(
    definitions: Path, replies: str, tmp_path: Path
) -> None:
    empty = tmp_path / "keys.yaml"
    empty.write_text("[]\n", encoding="utf-8")
    result = invoke("serve", str(definitions), "--model", replies, "--keys", str(empty), "--host", "0.0.0.0")
    assert result.exit_code == 2 and "without API keys" in result.output


def test_serving_nothing_exits_2(replies: str) -> None:
    result = invoke("serve", "--model", replies)
    assert result.exit_code == 2 and "at least one definition" in result.output


def test_a_broken_definition_exits_2_before_listening(tmp_path: Path, replies: str) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nstates: 5\n", encoding="utf-8")
    result = invoke("serve", str(broken), "--model", replies, "--store", "memory://")
    assert result.exit_code == 2 and "broken.yaml" in result.output


def test_no_model_exits_2_before_listening(definitions: Path) -> None:
    result = invoke(
        "serve", str(definitions), "--store", "memory://", env={"LLM_FSM_API_KEYS": "", "LLM_FSM_MODEL": ""}
    )
    assert result.exit_code == 2 and "no model configured" in result.output


def test_a_memory_store_with_several_workers_exits_2(definitions: Path, replies: str) -> None:
    result = invoke("serve", str(definitions), "--model", replies, "--store", "memory://", "--workers", "2")
    assert result.exit_code == 2 and "several workers" in result.output


def test_hash_key_prints_the_keys_sha256() -> None:
    result = invoke("serve", "--hash-key", ALICE_KEY)
    assert result.exit_code == 0 and result.output.strip() == hash_key(ALICE_KEY)


def test_hash_key_reads_the_key_from_stdin_with_a_dash() -> None:
    result = invoke("serve", "--hash-key", "-", input=ALICE_KEY + "\n")
    assert result.exit_code == 0 and result.output.strip() == hash_key(ALICE_KEY)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(base: str, process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"llm-fsm serve exited with {process.returncode}: {process.stderr.read()!r}")  # type: ignore[union-attr]
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("llm-fsm serve did not become ready")


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_answers_over_http_with_one_or_several_workers(
    definitions: Path, replies: str, keys_file: str, tmp_path: Path, workers: str
) -> None:
    port = _free_port()
    command = [sys.executable, "-c", "from llm_fsm.cli import main; main()", "serve", str(definitions)]
    command += ["--model", replies, "--store", f"sqlite:///{tmp_path}/c.db", "--keys", keys_file]
    command += ["--port", str(port), "--workers", workers, "--log-level", "warning"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ})
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, process)
        headers = {"Authorization": f"Bearer {ALICE_KEY}"}
        assert httpx.get(f"{base}/v1/definitions", timeout=5).status_code == 401
        started = httpx.post(f"{base}/v1/conversations", json={"definition": "signup"}, headers=headers, timeout=5)
        assert started.status_code == 201, started.text
        cid = started.json()["conversation_id"]
        sent = httpx.post(f"{base}/v1/conversations/{cid}/messages", json={"message": "hi"}, headers=headers, timeout=5)
        assert sent.status_code == 200 and sent.json()["state"] == "ask"
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_every_accepted_connection_turns_nagles_algorithm_off() -> None:
    # Found by benchmarks/serve.py: with --workers N each response waited ~40 ms for a delayed ACK.
    import socket

    from uvicorn.config import Config
    from uvicorn.importer import import_from_string
    from uvicorn.server import ServerState

    protocol_class = import_from_string("llm_fsm.cli.serve:NoDelayH11Protocol")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    try:
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0

        class Transport:
            def get_extra_info(self, name: str, default: object = None) -> object:
                return {"socket": accepted, "peername": ("127.0.0.1", 1), "sockname": ("127.0.0.1", 2)}.get(
                    name, default
                )

            def is_closing(self) -> bool:
                return False

        config = Config(app=lambda *a: None)
        config.load()

        async def connect() -> None:
            # uvicorn makes its protocols inside its running loop (the constructor asks for the current loop, which
            # outside one fails once any earlier asyncio.run in this thread has cleared it)
            protocol = protocol_class(config=config, server_state=ServerState(), app_state={})
            protocol.connection_made(Transport())

        asyncio.run(connect())
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        for sock in (client, accepted, listener):
            sock.close()


def test_the_servers_log_carries_llm_fsm_records() -> None:
    import uvicorn

    from llm_fsm.cli.serve import _log_config

    config = _log_config(uvicorn, "warning")
    assert config["loggers"]["llm_fsm"] == {"handlers": ["default"], "level": "WARNING", "propagate": False}
    assert "llm_fsm" not in uvicorn.config.LOGGING_CONFIG["loggers"]  # uvicorn's own default is left as it was


REPO = Path(__file__).resolve().parents[2]


def _serve_capturing_the_app(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[Any, Any]:
    """``llm-fsm serve ARGS`` up to the point it would listen: the app it built, and the command's result."""
    import uvicorn

    served: dict[str, Any] = {}

    def run(server: Any, sockets: Any = None) -> None:
        served.setdefault("app", server.config.app)
        server.started = True

    monkeypatch.setattr(uvicorn.Server, "run", run)
    # building uvicorn's Config applies serve's logging configuration (llm_fsm's logger stops propagating):
    # right for a served process, wrong for this test process, whose later tests read logs through the root
    monkeypatch.setattr(uvicorn.Config, "configure_logging", lambda self: None)
    try:
        result = invoke("serve", *args, "--store", "memory://", "--port", "0")  # bound, never listened on
    finally:
        gc.unfreeze()  # serve froze start-up's heap, a process-wide choice this test process must not keep
    return served.get("app"), result


def test_serve_with_relative_actions_from_another_folder_runs_the_action_in_a_turn_over_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient

    monkeypatch.chdir(tmp_path)
    shipped = Path(os.path.relpath(REPO / "definitions", tmp_path))
    script = shipped / "conversations" / "customer_support_router.conv.yaml"
    app, result = _serve_capturing_the_app(
        monkeypatch, str(shipped), "--actions", f"{shipped}/actions.py:registry", "--model", f"scripted:{script}"
    )
    assert result.exit_code == 0, result.output
    with TestClient(app) as client:
        cid = client.post("/v1/conversations", json={"definition": "customer_support_router"}).json()["conversation_id"]
        sent = client.post(f"/v1/conversations/{cid}/messages", json={"message": "It's C-1001, charged twice"})
        (action,) = client.get(f"/v1/conversations/{cid}/turns/-1").json()["actions"]
    assert sent.json()["state"] == "billing_issues"
    assert (action["call"], action["outcome"], action["outputs"]["customer.tier"]) == (
        "lookup_customer",
        "ok",
        "premium",
    )


def test_serving_definitions_whose_actions_have_no_function_warns_before_listening(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = REPO / "definitions" / "conversations" / "customer_support_router.conv.yaml"
    app, result = _serve_capturing_the_app(monkeypatch, str(REPO / "definitions"), "--model", f"scripted:{script}")
    assert result.exit_code == 0 and app is not None  # the definitions without actions are still served
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    (warning,) = [line for line in warnings if "--actions" in line]  # shop_help's retriever is warned of on its own
    assert "customer_support_router (lookup_customer)" in warning and "--actions" in warning
    assert "simple_greeting" not in warning


def test_each_worker_freezes_what_start_up_built_once_its_app_is_built(
    definitions: Path, replies: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Full collections walked start-up's ~68,000 objects (60-70 ms each, the served p99's tail): a worker moves
    them out of the collector's reach once its app is built (benchmarks/serve.py --server-gc measures it)."""
    import gc

    from llm_fsm.cli.serve import SETTINGS_ENV, ServeSettings, app_from_environment

    settings = ServeSettings(definitions=[str(definitions)], model=replies, store="memory://", anonymous=True)
    monkeypatch.setenv(SETTINGS_ENV, settings.to_json())
    gc.unfreeze()
    try:
        app = app_from_environment()
        assert gc.get_freeze_count() > 0
        app.state.manager.store.close()
    finally:
        gc.unfreeze()


# --- start-up: every check before listening, one line when one fails, a summary when all pass ----------------


def _serve(*args: str, env: dict[str, str] | None = None, seconds: float = 30) -> tuple[int, str, str]:
    """Run ``llm-fsm serve`` to its exit; a server that starts listening instead fails the test."""
    command = [sys.executable, "-c", "from llm_fsm.cli import main; main()", "serve", *args]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or {**os.environ, "LLM_FSM_API_KEYS": ""}
    )
    try:
        out, err = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"llm-fsm serve listened instead of exiting: {out.decode()!r} {err.decode()!r}") from None
    return process.returncode, out.decode(), err.decode()


def test_an_unreachable_redis_exits_2_with_one_line_before_listening(definitions: Path, replies: str) -> None:
    closed = _free_port()
    code, out, err = _serve(
        str(definitions), "--model", replies, "--store", f"redis://:hunter2@127.0.0.1:{closed}/0",
        "--port", str(_free_port()),
    )  # fmt: skip
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("error: ") and f"127.0.0.1:{closed}" in err, err
    assert "hunter2" not in out + err and "listening" not in out and "Uvicorn running" not in err


def test_an_unreachable_postgresql_exits_2_with_exactly_one_line(definitions: Path, replies: str) -> None:
    pytest.importorskip("psycopg_pool")
    closed = _free_port()
    code, out, err = _serve(
        str(definitions), "--model", replies, "--store", f"postgresql://llm:hunter2@127.0.0.1:{closed}/db",
        "--port", str(_free_port()),
    )  # fmt: skip
    assert code == 2, (out, err)
    # psycopg_pool logs every failed connection attempt; none of that may reach the terminal before our line
    assert err.count("\n") == 1 and err.startswith("error: ") and f"127.0.0.1:{closed}" in err, err
    assert "hunter2" not in out + err and "listening" not in out


def test_a_missing_provider_key_exits_2_naming_the_variable(definitions: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"} | {"LLM_FSM_API_KEYS": ""}
    code, out, err = _serve(
        str(definitions), "--model", "openai/gpt-4o-mini", "--store", "memory://", "--port", str(_free_port()),
        env=env,
    )  # fmt: skip
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and "OPENAI_API_KEY" in err and "openai/gpt-4o-mini" in err, err


def test_no_key_check_starts_a_provider_that_authenticates_another_way(definitions: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"} | {"LLM_FSM_API_KEYS": ""}
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:  # the next check fails: it was reached
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = _serve(
            str(definitions), "--model", "openai/gpt-4o-mini", "--store", "memory://", "--port", str(port),
            "--no-key-check", env=env,
        )  # fmt: skip
    assert code == 2, (out, err)
    assert "OPENAI_API_KEY" not in err and f"port {port}" in err, err


def test_a_busy_port_exits_2_with_one_line(definitions: Path, replies: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = _serve(str(definitions), "--model", replies, "--store", "memory://", "--port", str(port))
    assert code == 2, (out, err)
    assert err == f"error: port {port} on 127.0.0.1 is in use\n", err
    assert "listening" not in out


@pytest.mark.slow
def test_serve_prints_what_it_serves_before_serving(
    definitions: Path, replies: str, keys_file: str, tmp_path: Path
) -> None:
    port = _free_port()
    store = "sqlite:///" + str(tmp_path / "c.db")
    command = [sys.executable, "-c", "from llm_fsm.cli import main; main()", "serve", str(definitions)]
    command += ["--model", replies, "--store", store, "--keys", keys_file, "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ})
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, process)
        process.terminate()
        out, _ = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    lines = out.decode().splitlines()
    assert lines[:6] == [
        "definitions: signup",
        f"store: {store}",
        f"model: {replies}",
        f"inspector: {base}/",
        f"API docs: {base}/docs",
        f"listening on {base} (Ctrl+C stops)",
    ], lines


# --- --alias NAME=FILE: versions served side by side (docs/server.md, "Several versions at once") -------------


def test_an_alias_without_a_file_exits_2(definitions: Path, replies: str) -> None:
    result = invoke("serve", str(definitions), "--model", replies, "--store", "memory://", "--alias", "staging")
    assert result.exit_code == 2 and "--alias NAME=FILE" in result.output


def test_an_alias_no_served_definition_is_named_like_exits_2_before_listening(
    definitions: Path, replies: str, tmp_path: Path
) -> None:
    stray = tmp_path / "stray.yaml"
    stray.write_text((definitions / "signup.yaml").read_text().replace("name: Signup", "name: Stray"))
    result = invoke(
        "serve", str(definitions), "--model", replies, "--store", "memory://", "--alias", f"staging={stray}"
    )
    assert result.exit_code == 2 and "alias 'staging'" in result.output and "'Stray'" in result.output


def test_aliases_reach_the_app_every_worker_builds(
    definitions: Path, replies: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llm_fsm.cli.serve import ServeSettings, build_app

    staging = tmp_path / "staging.yaml"
    staging.write_text((definitions / "signup.yaml").read_text().replace("Asking", "Asking again"))
    monkeypatch.chdir(tmp_path)  # the settings hold absolute paths: a worker started elsewhere reads the same file
    settings = ServeSettings(
        definitions=[str(definitions)],
        store="memory://",
        model=replies,
        anonymous=True,
        aliases={"staging": str(staging)},
    )
    app = build_app(ServeSettings.from_json(settings.to_json()))
    alias = app.state.registry.aliases["staging"]
    assert alias.definition_id == "signup" and alias.definition.states["ask"].description == "Asking again"
