"""The hostile-model property at full size: 10,000 generated definitions and model outputs.

CI runs ``tests/test_hostile_model.py`` with 150 examples; this runs the same
property with many more and prints how long it took and whether it held:

    python benchmarks/hostile_model.py            # 10,000 examples
    python benchmarks/hostile_model.py --examples 2000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000)
    args = parser.parse_args()
    env = {**os.environ, "HOSTILE_EXAMPLES": str(args.examples), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_hostile_model.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - started
    held = result.returncode == 0
    print(f"hostile-model property: {args.examples} examples, {elapsed:.1f} s, {'HELD' if held else 'BROKEN'}")
    if not held:
        print(result.stdout[-4000:])
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
