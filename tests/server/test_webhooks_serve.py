"""``llm-fsm serve --webhook URL``: the command's webhooks, end to end in a real process, and what it refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from llm_fsm.cli import main
from llm_fsm.webhooks import verify_request

from .conftest import ALICE_KEY
from .receiver import receiving
from .test_serve_cli import _free_port, _wait_ready, keys_file, replies  # noqa: F401 - fixtures

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def test_a_webhook_without_a_secret_exits_2_before_listening(definitions: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "serve",
            str(definitions),
            "--model",
            "scripted:x",
            "--store",
            "memory://",
            "--webhook",
            "http://127.0.0.1:9/h",
        ],
        env={"LLM_FSM_API_KEYS": "", "LLM_FSM_WEBHOOK_SECRET": ""},
    )
    assert result.exit_code == 2 and "--webhook needs a signing secret" in result.output


def test_a_webhook_url_that_is_not_http_exits_2(definitions: Path, tmp_path: Path, replies: str) -> None:  # noqa: F811
    result = CliRunner().invoke(
        main,
        ["serve", str(definitions), "--model", replies, "--store", "memory://", "--webhook", "ftp://x/h"],
        env={"LLM_FSM_API_KEYS": "", "LLM_FSM_WEBHOOK_SECRET": "s3cret"},
    )
    assert result.exit_code == 2 and "http:// or https://" in result.output


@pytest.mark.slow
def test_serve_posts_each_event_signed_to_the_webhook(
    definitions: Path,
    replies: str,  # noqa: F811
    keys_file: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("file-secret-0123\n", encoding="utf-8")
    port = _free_port()
    with receiving() as receiver:
        command = [sys.executable, "-c", "from llm_fsm.cli import main; main()", "serve", str(definitions)]
        command += ["--model", replies, "--store", f"sqlite:///{tmp_path}/c.db", "--keys", keys_file]
        command += ["--port", str(port), "--log-level", "warning", "--webhook", receiver.url]
        command += ["--webhook-secret-file", str(secret_file), "--webhook-outbox", str(tmp_path / "outbox.db")]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ})
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(base, process)
            headers = {"Authorization": f"Bearer {ALICE_KEY}"}
            started = httpx.post(f"{base}/v1/conversations", json={"definition": "signup"}, headers=headers, timeout=5)
            cid = started.json()["conversation_id"]
            got = receiver.wait_for(lambda r: sum(x.event["conversation_id"] == cid for x in r) == 2)
        finally:
            process.terminate()
            process.wait(timeout=20)
    assert all(verify_request("file-secret-0123", r.body, r.headers) for r in got)
    assert (tmp_path / "outbox.db").exists()


@pytest.mark.parametrize("outbox", ["missing/folder/outbox.db", "not-sqlite.db"])
def test_an_outbox_that_cannot_be_opened_exits_2_naming_it(
    definitions: Path,
    tmp_path: Path,
    replies: str,  # noqa: F811
    outbox: str,
) -> None:
    (tmp_path / "not-sqlite.db").write_text("not a database", encoding="utf-8")
    path = tmp_path / outbox
    result = CliRunner().invoke(
        main,
        ["serve", str(definitions), "--model", replies, "--store", "memory://", "--webhook", "http://127.0.0.1:9/h"]
        + ["--webhook-outbox", str(path)],
        env={"LLM_FSM_API_KEYS": "", "LLM_FSM_WEBHOOK_SECRET": "s3cret"},
    )
    assert result.exit_code == 2 and f"webhook outbox {path}" in result.output and "unexpected" not in result.output
