"""``benchmarks/serve.py`` still drives the server, and its checks can tell a lost or doubled turn.

The benchmark's figures are only worth reading if its client really sends every turn, its
re-sent message ids really reach the server, and its transcript check would notice a turn that
went missing or landed twice. These run its core on a handful of turns against the app in
process (and once through a real uvicorn), so the script cannot rot unnoticed. No timing is
asserted.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

serve = importlib.import_module("serve")
serve_app = importlib.import_module("serve_app")


@pytest.fixture
def app(tmp_path: Path) -> Any:
    definition = tmp_path / "loop.json"
    definition.write_text(json.dumps(serve_app.LOOP))
    return serve_app.build_app(f"sqlite:///{tmp_path}/bench.db", str(definition), 0.001)


def _run(app: Any, *argv: str) -> dict[str, Any]:
    args = serve.parse_args(["--latency-ms", "1", *argv])
    transport = httpx.ASGITransport(app=app)
    figures: dict[str, Any] = asyncio.run(
        serve.run_configuration("http://bench", args.conversations[0], args.turns, 0.001, args, transport=transport)
    )
    return figures


def test_every_turn_of_a_small_run_is_answered_and_found_once_in_its_transcript(app: Any) -> None:
    figures = _run(app, "--conversations", "4", "--turns", "3", "--stream-turns", "4", "--resend", "0.5")

    assert figures["turns_answered"] == 12
    assert figures["resends"] == 6  # half of the 12 messages are sent a second time with the same id
    assert figures["stream_turns"] == 4
    assert figures["checked"] == 12
    assert (figures["errors"], figures["lost"], figures["duplicated"], figures["mismatched"]) == (0, 0, 0, 0)


def test_the_transcript_check_counts_a_lost_turn_and_a_doubled_one(app: Any) -> None:
    async def scenario() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
            started = await client.post("/v1/conversations", json={"definition": "loop"})
            cid = started.json()["conversation_id"]
            for message_id in ("first", "second"):  # two ids: the server rightly runs two turns
                await client.post(f"/v1/conversations/{cid}/messages", json={"message": "a", "message_id": message_id})
            return await serve.check_transcripts(client, {cid: ["a", "b"]})

    check = asyncio.run(scenario())

    assert (check.checked, check.lost, check.duplicated, check.mismatched) == (2, 1, 1, 0)


def test_the_resend_plan_picks_its_share_of_messages_half_in_flight_together() -> None:
    plan = serve.resend_plan(conversations=20, turns=10, fraction=0.1, seed=3)

    assert len(plan) == 20
    assert sorted(plan.values()).count("together") == 10


def test_the_script_serves_through_uvicorn_and_reports_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--conversations", "3", "--turns", "2", "--workers", "1", "--stores", "sqlite", "--paced"]
    assert serve.main([*argv, "--stream-turns", "2", "--latency-ms", "1", "--json"]) == 0

    report = json.loads(capsys.readouterr().out)
    (row,) = report["rows"]
    assert (row["store"], row["workers"], row["turns_answered"], row["stream_turns"]) == ("sqlite", 1, 6, 2)
    assert (row["errors"], row["lost"], row["duplicated"], row["mismatched"]) == (0, 0, 0, 0)


def test_the_bare_app_answers_every_route_the_client_calls() -> None:
    serve_bare = importlib.import_module("serve_bare")
    args = serve.parse_args(["--latency-ms", "1", "--conversations", "3", "--turns", "2", "--stream-turns", "2"])
    transport = httpx.ASGITransport(app=serve_bare.build_bare_app(0.001))
    figures: dict[str, Any] = asyncio.run(
        serve.run_configuration("http://bench", 3, 2, 0.001, args, transport=transport, transcripts=False)
    )

    assert (figures["turns_answered"], figures["stream_turns"], figures["errors"]) == (6, 2, 0)
    assert figures["checked"] == 0  # it keeps no transcript: the check does not run on it


def test_a_row_of_ours_is_set_beside_the_bare_apps_of_the_same_load() -> None:
    report = importlib.import_module("serve_report")
    counts = dict.fromkeys(("errors", "lost", "duplicated", "mismatched", "unreadable", "landed_after_error"), 0)
    ours = {"conversations": 200, "think_ms": 1000.0, "workers": 1, "store": "sqlite", **counts}
    rows = [{**ours, "added_p99_ms": 30.0, "server_cpu_ms_per_turn": 1.5}]
    limit = [{**ours, "store": "bare", "added_p99_ms": 10.0, "server_cpu_ms_per_turn": 1.0}]

    (compared,) = report.against_limit(rows, limit)

    assert (compared["added_p99_ms"]["ratio"], compared["server_cpu_ms_per_turn"]["ratio"]) == (3.0, 1.5)
    assert [t["met"] for t in report.targets(rows, limit) if "bare app" in t["target"]] == [False, True]
