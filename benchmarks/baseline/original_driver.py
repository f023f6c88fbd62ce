"""Drive the original llm-fsm 0.1.1 through a scripted conversation; JSON in, JSON out.

Runs ONLY inside the baseline venv made by ``original_env.py`` (started as
``<venv>/bin/python -I original_driver.py``), where ``llm_fsm`` is the original
package, not ours. It uses the original's public API only: ``FSMManager``,
``LLMInterface``, ``LLMResponse``, ``StateTransition``, ``load_fsm_definition``.
Its model is replaced by a scripted fake that answers instantly with the
canned reply of the current turn and records every request it is sent.

stdin: a job (see ``benchmarks/baseline/scenario.py`` ``Scenario.to_job``) plus
    ``capture_at``   turn numbers whose requests are returned in full (0 = opening),
    ``timing_runs``  conversations of the short script timed for overhead,
    ``warmup_runs``  conversations run first and not timed.
stdout: one JSON object (see ``result`` at the bottom of ``main``).

The original logs through loguru at import: INFO to stderr and DEBUG (with the
whole system prompt of every turn) to ``logs/`` under the working directory.
That is its default behaviour and part of what is measured; the caller runs us
in a scratch directory and keeps stderr away from the terminal.
"""

import gc
import json
import os
import sys
import time


def _fail(message):
    sys.stderr.write(message + "\n")
    sys.exit(3)


def main():
    job = json.load(sys.stdin)
    try:
        import importlib.metadata as metadata

        import llm_fsm
        from llm_fsm import FSMManager, LLMInterface, LLMResponse, StateTransition, load_fsm_definition
    except Exception as exc:  # the venv is broken or holds the wrong package
        _fail("cannot import the original llm_fsm: %r" % (exc,))

    here = os.path.dirname(os.path.abspath(__file__))
    module_file = os.path.abspath(llm_fsm.__file__)
    if module_file.startswith(os.path.dirname(os.path.dirname(here))):
        _fail("refusing to run: llm_fsm was imported from the repository (%s), not the baseline venv" % module_file)

    class ScriptedFake(LLMInterface):
        """Answers with ``self.reply`` at once; records each request and the time spent here."""

        def __init__(self):
            self.reply = None
            self.requests = []
            self.seconds = 0.0
            self.prompt_chars = 0
            self.record = False

        def send_request(self, request):
            started = time.perf_counter()
            canned = self.reply
            response = LLMResponse(
                transition=StateTransition(
                    target_state=canned["transition"]["target_state"],
                    context_update=dict(canned["transition"].get("context_update") or {}),
                ),
                message=canned["message"],
                reasoning=canned.get("reasoning"),
            )
            self.prompt_chars += len(request.system_prompt) + len(request.user_message)
            if self.record:
                self.requests.append(
                    {"system_prompt": request.system_prompt, "user_message": request.user_message}
                )
            else:
                self.requests.append(None)
            self.seconds += time.perf_counter() - started
            return response

    definition_path = job["definition_path"]
    opening = job["opening"]
    turns = job["turns"]
    short = int(job.get("short_turns", 10))
    capture_at = set(int(n) for n in job.get("capture_at", []))

    def run(turn_list, capture, on_turn=None):
        """One conversation: opening, then the given turns. Returns per-turn records."""
        fake = ScriptedFake()
        manager = FSMManager(fsm_loader=load_fsm_definition, llm_interface=fake)
        fake.reply = opening
        fake.record = 0 in capture
        started = time.perf_counter()
        conversation_id, _ = manager.start_conversation(definition_path)
        opening_ms = (time.perf_counter() - started - fake.seconds) * 1000.0
        captured = {}
        if fake.record:
            captured["0"] = [r for r in fake.requests if r is not None]
        records = []
        for index, turn in enumerate(turn_list, start=1):
            fake.reply = turn["reply"]
            fake.record = index in capture
            fake.requests = []
            fake.seconds = 0.0
            fake.prompt_chars = 0
            started = time.perf_counter()
            manager.process_message(conversation_id, turn["user"])
            elapsed = time.perf_counter() - started
            records.append(
                {
                    "engine_ms": (elapsed - fake.seconds) * 1000.0,
                    "calls": len(fake.requests),
                    "prompt_chars": fake.prompt_chars,
                    "state": manager.get_conversation_state(conversation_id),
                }
            )
            if fake.record:
                captured[str(index)] = [r for r in fake.requests if r is not None]
        return opening_ms, records, captured

    for _ in range(int(job.get("warmup_runs", 3))):
        run(turns[:short], set())

    gc.collect()
    short_runs = []
    for _ in range(int(job.get("timing_runs", 20))):
        _, records, _ = run(turns[:short], set())
        short_runs.append([r["engine_ms"] for r in records])

    gc.collect()
    opening_ms, long_records, captured = run(turns, capture_at)

    result = {
        "package": "llm-fsm",
        "version": metadata.version("llm-fsm"),
        "module_file": module_file,
        "python": sys.version.split()[0],
        "logging": "loguru defaults of the package (INFO to stderr, DEBUG to logs/ file)",
        "short_runs_engine_ms": short_runs,
        "long": {
            "opening_ms": opening_ms,
            "engine_ms": [r["engine_ms"] for r in long_records],
            "calls": [r["calls"] for r in long_records],
            "prompt_chars": [r["prompt_chars"] for r in long_records],
            "states": [r["state"] for r in long_records],
        },
        "captured": captured,
    }
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
