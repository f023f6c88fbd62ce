"""A worker process for the concurrent timer-claim test: claims due timers until none are left.

Run as a script: ``python timer_claim_worker.py URL NOW LIMIT``. It prints ``ready``, waits for a line on stdin so
all workers start together, then claims batches of ``LIMIT`` (lease long enough never to run out during the test)
until a claim comes back empty, and prints one JSON line: every claim it got, as ``[conversation, timer, token]``.
"""

from __future__ import annotations

import json
import sys

from llm_fsm.stores import open_store


def main(argv: list[str]) -> int:
    url, now, limit = argv[0], float(argv[1]), int(argv[2])
    store = open_store(url)
    print("ready", flush=True)
    sys.stdin.readline()
    claimed: list[list[str]] = []
    while True:
        batch = store.claim_due_timers(now=now, limit=limit, lease=3600.0)  # type: ignore[attr-defined]
        if not batch:
            break
        claimed += [[t.conversation_id, t.timer_id, t.token] for t in batch]
    store.close()
    print(json.dumps(claimed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
