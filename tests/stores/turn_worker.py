"""A worker process for the multi-process store test: applies turns with load → change → compare-and-set save.

Run as a script: ``python turn_worker.py URL WORKER TURNS CID [CID ...]``. It
prints ``ready``, waits for a line on stdin so all workers start together, then
applies its turns, retrying each on ConcurrentUpdateError from a fresh load,
and finally prints a JSON line with how many conflicts it met.
"""

from __future__ import annotations

import json
import sys

from llm_fsm.errors import ConcurrentUpdateError
from llm_fsm.stores import open_store


def main(argv: list[str]) -> int:
    url, worker, turns, cids = argv[0], int(argv[1]), int(argv[2]), argv[3:]
    store = open_store(url)
    print("ready", flush=True)
    sys.stdin.readline()
    conflicts = 0
    for turn in range(turns):
        cid = cids[turn % len(cids)]
        message = f"w{worker}-t{turn}"
        while True:
            instance = store.load(cid, user_id="alice", room_id="room-1")
            instance.context.conversation.add_user_message(message)
            instance.context.conversation.add_assistant_message(f"reply to {message}")
            instance.turn_count += 1
            try:
                store.save(instance, expected_version=instance.version)
                break
            except ConcurrentUpdateError:
                conflicts += 1
    store.close()
    print(json.dumps({"worker": worker, "conflicts": conflicts}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
