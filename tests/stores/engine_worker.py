"""A worker process for the engine-level multi-process test: real FSMManager turns on a shared store.

Usage: engine_worker.py URL WORKER TURNS DEFINITION CID...
Prints "ready", waits for "go" on stdin, then sends TURNS messages spread over
the conversations and prints a JSON report of what it sent.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager


def echo(request):
    return {"transition": {"target_state": "", "context_update": {}}, "message": f"re: {request.user_message}"}


def main() -> None:
    url, worker, turns, definition, *cids = sys.argv[1:]
    manager = FSMManager(llm_interface=FunctionLLM(echo), store=url, max_save_retries=1000)
    print("ready", flush=True)
    sys.stdin.readline()
    sent: dict[str, list[str]] = {cid: [] for cid in cids}
    for i in range(int(turns)):
        cid = cids[(i * 7 + int(worker) * 3) % len(cids)]
        message = f"w{worker} m{i}"
        reply = manager.process_message(cid, message)
        assert reply == f"re: {message}", (reply, message)
        sent[cid].append(message)
    print(json.dumps(sent), flush=True)


if __name__ == "__main__":
    main()
