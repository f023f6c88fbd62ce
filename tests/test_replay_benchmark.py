"""``benchmarks/replay.py`` still runs: on a small store it prints every figure it promises and exits 0.

No timing is asserted: the script prints figures. This checks it builds the store, verifies and replays it through
the CLI (every recorded turn verified, some decisions changed by the swapped priorities, nothing stranded) and
prints the storage figures, so the script cannot rot unnoticed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


@pytest.mark.slow
@pytest.mark.timeout(300)  # about 10 s alone; a busy 2-core machine can take several times that
def test_the_replay_benchmark_prints_its_figures_and_exits_0() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/replay.py", "--quick"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    turns = int(re.search(r"store: ([\d,]+) recorded turns", out).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert turns >= 2000
    assert re.search(r"live turns/s \(0 ms model\): [\d,]+ on SQLite .* [\d,]+ on memory://", out)
    assert re.search(r"live turns/s on memory:// just before verify and after replay .*: [\d,]+", out)
    assert re.search(r"verify: [\d,]+ turns/s = [\d.]+x live on SQLite, [\d.]+x live on memory://, [\d.]+x", out)
    assert f"{turns} turn record(s): {turns} verified" in out and "0 conversation(s) failed" in out
    assert re.search(r"replay: [\d,]+ turns/s = [\d.]+x live on SQLite", out)
    changed = re.search(r"(\d+) decision\(s\) change", out)
    assert changed and 0 < int(changed.group(1)) < turns  # the swap changes the turns where both transitions held
    assert "ok: no in-flight conversation is stranded" in out
    assert len(re.findall(r"at +[\d,]+ turns: verify +[\d.]+ MB, replay +[\d.]+ MB", out)) == 2
    assert re.search(r"hot record [\d,]+ bytes \(limit 8,000\): (met|MISSED)", out)
    assert re.search(r"turn log [\d,]+ bytes per record with inputs and chain, [\d,]+ without", out)
    assert re.search(r"definition versions: 1 row\(s\), [\d,]+ bytes for [\d,]+ conversations", out)
