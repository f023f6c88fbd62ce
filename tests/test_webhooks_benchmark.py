"""``benchmarks/webhooks.py --quick`` still runs: it prints its figures, loses no event across a receiver restart,
and exits 0 (no timing is asserted: the script prints figures)."""

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
@pytest.mark.timeout(300)  # about 8 s alone; a busy 2-core machine can take several times that
def test_the_webhooks_benchmark_loses_nothing_across_a_receiver_restart_and_exits_0() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/webhooks.py", "--quick"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert re.search(r"receiver \(another process\), raw POSTs/s, 8 at once: [\d,]+", out)
    for run in ("steady", "receiver restarted"):
        line = re.search(
            rf"{run}: 120 events \(the turns that made them took [\d.]+ s\) delivered in [\d.]+ s = [\d,]+ events/s = [\d.]+x the raw POST rate; "
            r"lost (\d+), duplicates (\d+)",
            out,
        )
        assert line is not None, out
        assert line.group(1) == "0"
