"""The server runs timers itself: ``create_app(..., timer_interval=...)`` starts a loop in the app's lifespan that
fires due timers (``llm-fsm serve`` turns it on by default, ``--no-timers`` off), and stops it with the app."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from llm_fsm import EngineConfig
from llm_fsm.errors import UsageError
from llm_fsm.manager import FSMManager
from llm_fsm.server._timer_loop import DEFAULT_TIMER_INTERVAL
from llm_fsm.stores.memory import MemoryStore
from llm_fsm.testing import FunctionLLM
from tests.runtime.timed import HOLD, Clock

from .conftest import ALICE_KEY, MakeServer, Model


def wait_for(condition: Any, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the timer loop did not fire in time"
        time.sleep(0.02)


def timed_server(make_server: MakeServer, definitions: Path, clock: Clock, **options: Any) -> Any:
    (definitions / "hold.json").write_text(json.dumps(HOLD), encoding="utf-8")
    manager = FSMManager(llm_interface=FunctionLLM(Model()), store=MemoryStore(), config=EngineConfig(clock=clock))
    return make_server(manager=manager, **options)


def test_the_server_fires_a_due_timer_and_its_message_is_in_the_transcript(
    make_server: MakeServer, definitions: Path
) -> None:
    clock = Clock()
    server = timed_server(make_server, definitions, clock, timer_interval=0.05)
    heard: list[Any] = []
    with server.client:  # runs the lifespan: the loop starts
        server.app.state.timers.listeners.append(heard.append)
        cid = server.start(definition="hold")
        clock.advance(10 * 60)
        wait_for(lambda: len(heard) == 2)
        last = server.client.get(f"/v1/conversations/{cid}/turns/-1", headers=server.headers(ALICE_KEY)).json()
    assert (last["intent"], last["reply"]) == ("timer", "Your table is held for 5 more minutes.")
    said = server.manager.get_conversation_history(cid, user_id="alice")
    assert said[-1]["text"] == "Your table is held for 5 more minutes."
    assert {firing.conversation_id for firing in heard} == {cid}


def test_without_a_timer_interval_the_app_fires_nothing(make_server: MakeServer, definitions: Path) -> None:
    clock = Clock()
    server = timed_server(make_server, definitions, clock)
    with server.client:
        cid = server.start(definition="hold")
        clock.advance(20 * 60)
        time.sleep(0.2)
        assert server.app.state.timers is None
        assert server.manager.get_instance(cid, user_id="alice").turn_count == 0


def test_the_loop_stops_with_the_app(make_server: MakeServer, definitions: Path) -> None:
    server = timed_server(make_server, definitions, Clock(), timer_interval=0.05)
    with server.client:
        wait_for(lambda: server.app.state.timers.runs > 0)
    runs = server.app.state.timers.runs
    time.sleep(0.2)
    assert server.app.state.timers.runs == runs


def test_serve_runs_timers_every_five_seconds_unless_told_otherwise() -> None:
    from llm_fsm.cli.serve import DEFAULT_TIMER_INTERVAL as SERVE_DEFAULT
    from llm_fsm.cli.serve import ServeSettings

    settings = ServeSettings(definitions=[])
    assert (settings.timers, settings.timer_interval) == (True, DEFAULT_TIMER_INTERVAL) == (True, SERVE_DEFAULT)


def test_serve_has_options_to_run_timers_or_not_and_how_often() -> None:
    from click.testing import CliRunner

    from llm_fsm.cli._app import main

    result = CliRunner().invoke(main, ["serve", "--help"])
    assert "--timers / --no-timers" in result.output and "--timer-interval" in result.output


def test_a_timer_the_loop_fires_reaches_an_open_event_stream_at_once(
    make_server: MakeServer, definitions: Path
) -> None:
    """The loop fires through the served manager, so its save wakes the stream (whose own poll is a minute away)."""
    from .serving import uvicorn_serving
    from .test_events import streaming

    clock = Clock()
    server = timed_server(make_server, definitions, clock, timer_interval=0.05, events_poll_seconds=60.0)
    cid = server.start(definition="hold")
    with uvicorn_serving(server.app) as origin, streaming(origin, cid) as stream:
        stream.until("state")
        started = time.monotonic()
        clock.advance(10 * 60)
        texts = [stream.next().data.get("text") for _ in range(2)]
    assert "Your table is held for 5 more minutes." in texts
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("interval", [0.0, -1.0, float("nan"), float("inf")])
def test_a_timer_interval_that_is_not_a_finite_positive_number_is_refused(
    make_server: MakeServer, definitions: Path, interval: float
) -> None:
    with pytest.raises(UsageError, match="timer interval"):  # nan and inf would sleep forever: no timer would fire
        timed_server(make_server, definitions, Clock(), timer_interval=interval)


@pytest.mark.parametrize("interval", ["nan", "inf"])
def test_serve_exits_2_for_a_timer_interval_that_is_not_a_finite_number(
    definitions: Path, tmp_path: Path, interval: str
) -> None:
    from click.testing import CliRunner

    from llm_fsm.cli._app import main

    replies = tmp_path / "replies.yaml"
    replies.write_text("- Hello!\n", encoding="utf-8")
    arguments = ["serve", str(definitions), "--model", f"scripted:{replies}", "--store", "memory://"]
    result = CliRunner().invoke(main, [*arguments, "--timer-interval", interval], env={"LLM_FSM_API_KEYS": ""})
    assert result.exit_code == 2 and "timer interval" in result.output
