"""``benchmarks/timers.py`` still runs, and its exactly-once check can tell a timer fired twice from one lost.

Its figures are only worth reading if the kill -9 phase really kills workers mid-drain and the count per timer id
(from what the conversations recorded) would notice a doubled or a missing firing. These run it in ``--quick`` mode
on SQLite and check the checker on conversations made to be wrong. No timing is asserted.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

timers = importlib.import_module("timers")


def test_a_quick_run_kills_workers_and_fires_every_timer_exactly_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert timers.main(["--quick", "--stores", "sqlite", "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    kill9 = result["kill9"]
    assert kill9["kills"] >= 1
    assert (kill9["fired_twice"], kill9["lost"], kill9["parked_fired"]) == (0, 0, 0)
    assert kill9["fired"] == result["timers"] // 2
    assert result["lateness"]["unfired"] == 0 and result["lateness"]["p99_ms"] is not None
    assert all(result["fires_per_second"][w] > 0 and result["baseline_saves_per_second"][w] > 0 for w in ("1", "4"))


def test_the_exactly_once_check_counts_a_doubled_firing_and_a_lost_one(tmp_path: Path) -> None:
    from llm_fsm.engine._records import TraceEvent
    from llm_fsm.stores import open_store

    url = f"sqlite:///{tmp_path}/check.db"
    store = open_store(url)
    for n in range(3):
        instance = timers.conversation(f"c{n}", (f"c{n}-parked", 1e12))
        if n == 1:  # never fired: still armed
            instance.timers.append(timers.conversation("x", ("c1-due", 0.0)).timers[0])
        for _ in range({0: 2, 1: 0, 2: 1}[n]):
            instance.trace.append(TraceEvent(event=timers.FIRED, data={"timer_id": f"c{n}-due", "due_at": 0.0}))
        store.save(instance, expected_version=None)
    store.close()
    assert timers.exactly_once(url, 3, "c") == {"fired": 3, "fired_twice": 1, "lost": 1, "parked_fired": 0}
