"""A worker process for the PostgreSQL multi-process test: turns that survive the server going away.

Run as a script: ``python outage_worker.py URL WORKER TURNS CID [CID ...]``. Like ``turn_worker.py`` it
prints ``ready``, waits for a line on stdin, then applies its turns (load, change, compare-and-set save,
retried from a fresh load on ConcurrentUpdateError). Each turn also logs a turn record and its message id,
as the engine does. On StoreUnavailableError it waits and tries the turn again, first asking the store
whether the message id was already answered: a save whose connection dropped may have committed. It
prints a JSON line with its conflicts, the errors it met by type, and how many turns it found already
applied on a retry. Any other error ends it with a traceback.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter

from llm_fsm.engine._records import TurnRecord, Verdict
from llm_fsm.errors import ConcurrentUpdateError, StoreUnavailableError
from llm_fsm.stores import open_store

OWNER = {"user_id": "alice", "room_id": "room-1"}
OUTAGE_LIMIT_SECONDS = 60.0


def main(argv: list[str]) -> int:
    url, worker, turns, cids = argv[0], int(argv[1]), int(argv[2]), argv[3:]
    store = open_store(url, connect_timeout=2)
    print("ready", flush=True)
    sys.stdin.readline()
    conflicts, found_applied = 0, 0
    errors: Counter[str] = Counter()
    for turn in range(turns):
        cid = cids[turn % len(cids)]
        message = f"w{worker}-t{turn}"
        outage_started: float | None = None
        while True:
            try:
                instance = store.load_for_turn(cid, message_id=message, **OWNER)  # type: ignore[attr-defined]
                if message in instance.processed_messages:
                    found_applied += 1  # the save that lost its connection had committed
                    break
                instance.context.conversation.add_user_message(message)
                instance.context.conversation.add_assistant_message(f"reply to {message}")
                instance.turn_count += 1
                instance.turns = [
                    TurnRecord(
                        index=instance.turn_count,
                        message_id=message,
                        user_message=message,
                        state_before="start",
                        state_after="start",
                        verdict=Verdict(kind="stay", target_state="start", reason="outage test"),
                        reply=f"reply to {message}",
                        started_at=0.0,
                        finished_at=0.0,
                    )
                ]
                instance.processed_messages = {message: f"reply to {message}"}
                store.save(instance, expected_version=instance.version)
                break
            except ConcurrentUpdateError:
                conflicts += 1
            except StoreUnavailableError:
                errors["StoreUnavailableError"] += 1
                outage_started = outage_started or time.monotonic()
                if time.monotonic() - outage_started > OUTAGE_LIMIT_SECONDS:
                    raise
                time.sleep(0.05)
    store.close()
    report = {"worker": worker, "conflicts": conflicts, "errors": dict(errors), "found_applied": found_applied}
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
