"""``benchmarks/timers.py`` still runs, and its exactly-once check can tell a timer fired twice from one lost.

Its figures are only worth reading if the kill -9 phase really kills workers mid-drain and the count per timer id
(the timer turns in the conversations' turn logs) would notice a doubled or a missing firing. These run it in
``--quick`` mode on SQLite, its workers firing through ``FSMManager.run_due_timers``, and check the checker on
conversations made to be wrong. No timing is asserted.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

timers = importlib.import_module("timers")
timers_firing = importlib.import_module("timers_firing")


def test_a_quick_run_kills_workers_and_fires_every_timer_exactly_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert timers.main(["--quick", "--stores", "sqlite", "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    kill9 = result["kill9"]
    assert kill9["kills"] >= 1
    assert (kill9["fired_twice"], kill9["lost"], kill9["parked_fired"]) == (0, 0, 0)
    assert kill9["fired"] == result["timers"] // 2
    assert kill9["index_left"] == result["timers"] // 2  # the parked timers, and nothing else
    assert result["lateness"]["unfired"] == 0 and result["lateness"]["p99_ms"] is not None
    for key in ("fires_per_second", "baseline_saves_per_second", "baseline_turns_per_second"):
        assert all(result[key][w] > 0 for w in ("1", "4")), key


def test_the_exactly_once_check_counts_a_doubled_firing_and_a_lost_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/check.db"
    bench = timers.Bench(url)
    now = time.time()
    fired = bench.arm(0, 2, 2, (now - 60, now - 30))
    assert timers.fire_due(bench.manager, now=now, limit=10, lease=30.0) == (2, 0, 0)
    (never,) = bench.arm(0, 1, 1, (now - 60, now - 60))  # due, never fired: still armed
    doubled = bench.store.load(fired[0], user_id=timers_firing.USER)  # its timer turn, recorded a second time
    record = doubled.turns[-1]
    assert (record.intent, record.timer) == ("timer", doubled.timers[0].id.replace("/1@", "/0@"))
    doubled.turns.append(record.model_copy(update={"index": record.index + 1}))
    doubled.turn_count += 1
    bench.store.save(doubled, expected_version=doubled.version)
    bench.close()
    counted = timers.exactly_once(url, [fired[0], never, fired[1]])
    assert counted == {"fired": 3, "fired_twice": 1, "lost": 1, "parked_fired": 0}
