"""Failed key attempts are limited per client address, and a client cannot choose its address with X-Forwarded-For.

uvicorn's default trusts X-Forwarded-For from 127.0.0.1, so a local client (or one behind a local proxy
that passes the header on) rotated its bucket with each guess. ``llm-fsm serve`` trusts the header only
from the proxies ``--forwarded-allow-ips`` names.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .test_serve_cli import _free_port, _wait_ready

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def serve(definitions: Path, tmp_path: Path) -> Iterator[object]:
    started: list[subprocess.Popen[bytes]] = []
    replies = tmp_path / "replies.yaml"
    replies.write_text("- Hello!\n", encoding="utf-8")
    keys = tmp_path / "keys.json"
    keys.write_text('[{"key": "alice-secret-key-0123456789", "tenant": "alice"}]', encoding="utf-8")

    def start(*options: str) -> str:
        port = _free_port()
        command = [sys.executable, "-c", "from llm_fsm.cli import main; main()", "serve", str(definitions)]
        command += ["--model", f"scripted:{replies}", "--store", "memory://", "--keys", str(keys)]
        command += ["--port", str(port), "--log-level", "warning", "--rate-limit", "2", *options]
        env = {k: v for k, v in os.environ.items() if k != "FORWARDED_ALLOW_IPS"}
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        started.append(process)
        base = f"http://127.0.0.1:{port}"
        _wait_ready(base, process)
        return base

    yield start
    for process in started:
        process.terminate()
        process.wait(timeout=20)


def guesses_from_rotating_addresses(base: str, count: int) -> list[int]:
    wrong = {"Authorization": "Bearer guess-0123456789abcdef"}
    return [
        httpx.get(
            f"{base}/v1/definitions", headers={**wrong, "X-Forwarded-For": f"203.0.113.{n}"}, timeout=5
        ).status_code
        for n in range(count)
    ]


@pytest.mark.slow
def test_a_local_client_rotating_x_forwarded_for_stays_in_one_bucket_by_default(serve: object) -> None:
    base = serve()  # type: ignore[operator]
    assert guesses_from_rotating_addresses(base, 4) == [401, 401, 429, 429]


@pytest.mark.slow
def test_x_forwarded_for_from_a_configured_proxy_names_the_client(serve: object) -> None:
    base = serve("--forwarded-allow-ips", "127.0.0.1")  # type: ignore[operator]
    assert guesses_from_rotating_addresses(base, 4) == [401, 401, 401, 401]
