"""Drive the original llm-fsm 0.1.1 through a scripted conversation; JSON lines in, JSON lines out.

Runs ONLY inside the baseline venv made by ``original_env.py`` (started as
``<venv>/bin/python -I original_driver.py``), where ``llm_fsm`` is the original
package, not ours. It uses the original's public API only: ``FSMManager``,
``LLMInterface``, ``LLMResponse``, ``StateTransition``, ``load_fsm_definition``.
Its model is replaced by a scripted fake that answers instantly with the
canned reply of the current turn and records every request it is sent.

Protocol: one JSON object per line on stdin, one JSON object per line back on
stdout, until stdin closes. The process stays up between requests so the
caller can interleave timing rounds with its own engine's (a busy machine then
slows both alike).

- ``{"op": "setup", "definition_path", "opening", "turns", "short_turns", "logging"?}``
  → ``{"package", "version", "module_file", "python", "logging"}``
  (``logging``: ``"default"``, ``"no-file"`` or ``"off"``, see ``set_logging``; default ``"default"``)
- ``{"op": "timing", "runs": n, "warmup": w}`` → ``{"short_runs_engine_ms": [[ms per turn] * n]}``
  (w untimed, then n timed conversations of the first ``short_turns`` turns)
- ``{"op": "long", "capture_at": [turn numbers]}`` → ``{"long": {...}, "captured": {turn: [requests]}}``
  (one conversation of all turns; full requests kept for the listed turns, 0 = opening)
- ``{"op": "validate", "path", "timeout"}`` → ``{"seconds", "outcome", "errors", "warnings"}``: the
  original's own validator (``llm_fsm.validator.validate_fsm_from_file``, what its ``llm-fsm-validate``
  command runs) on one JSON file, stopped after ``timeout`` seconds (outcome ``timeout``); needs no ``setup``.
- ``{"op": "live", "definition_path", "user_turns": [...], "initial_context", "litellm": {model,
  api_base, api_key, temperature, max_tokens, ...}}`` → one conversation against a real model
  with the original's *own* ``LiteLLMInterface`` (see ``live_conversation``); needs no ``setup``.
- ``{"op": "dst", "definition_path", "turns": [{"user", "system"}], "greeting", "litellm": {...}}``
  → one dialogue-state-tracking replay (``benchmarks/dst.py``, see ``dst_conversation``): the context
  after every user turn, and the history the original kept; needs no ``setup``.

Errors end the process with a message on stderr and exit status 3.

The original logs through loguru at import: INFO to stderr and DEBUG (with the
whole system prompt of every turn) to ``logs/`` under the working directory.
That is its default behaviour and what ``"logging": "default"`` measures; the
caller runs us in a scratch directory and sends stderr to a scratch file.
``"no-file"`` removes the file sink (the DEBUG log with the prompts) after
import and keeps the INFO sink on stderr; ``"off"`` removes every sink, so
loguru drops each call before formatting it. Our engine writes no log records
at all by default (stdlib logging without handlers), so ``"off"`` is the
like-for-like setting.
"""

import gc
import json
import os
import sys
import time


def _fail(message):
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    sys.exit(3)


def _load_original():
    try:
        import importlib.metadata as metadata

        import llm_fsm
        from llm_fsm import (
            FSMManager,
            LLMInterface,
            LLMResponse,
            StateTransition,
            load_fsm_definition,
        )
    except Exception as exc:  # the venv is broken or holds the wrong package
        _fail("cannot import the original llm_fsm: %r" % (exc,))
    module_file = os.path.abspath(llm_fsm.__file__)
    repo_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if module_file.startswith(repo_root + os.sep):
        _fail("refusing to run: llm_fsm was imported from the repository (%s), not the baseline venv" % module_file)
    return metadata, module_file, FSMManager, LLMInterface, LLMResponse, StateTransition, load_fsm_definition


LOGGING_MODES = {
    "default": "loguru defaults of the package (INFO to stderr, DEBUG to a logs/ file)",
    "no-file": "loguru with the package's file sink removed (INFO to stderr only)",
    "off": "loguru with every sink removed (nothing formatted or written)",
}


def set_logging(mode):
    """Apply a logging mode to the original's loguru configuration (done by the package at import).

    Sinks are found through loguru's public ``repr(logger)``, which lists each
    handler as ``(id=N, level=L, sink=...)``; the file sink is the one that is not
    a standard stream. Fails loudly when the configuration is not what the
    package is known to set up, rather than measuring something else.
    """
    import re

    from loguru import logger

    if mode not in LOGGING_MODES:
        _fail("unknown logging mode %r; use one of %s" % (mode, ", ".join(sorted(LOGGING_MODES))))
    if mode == "default":
        return LOGGING_MODES[mode]
    handlers = re.findall(r"\(id=(\d+), level=\d+, sink=(.*?)\)(?:, |\]>)", repr(logger))
    files = [int(i) for i, sink in handlers if sink not in ("<stderr>", "<stdout>")]
    if len(files) != 1:
        _fail("expected exactly one loguru file sink, found %r in %r" % (handlers, repr(logger)))
    if mode == "no-file":
        logger.remove(files[0])
    else:
        logger.remove()
    return LOGGING_MODES[mode]


def _json_safe(value):
    """The original's context as JSON (it may hold anything the model or its engine put there)."""
    return json.loads(json.dumps(value, default=repr))


def _count_calls(original_llm, calls):
    """Wrap the ``completion`` the original's llm module imported: one record per HTTP call in ``calls``.

    Returns the real function, to put back with ``original_llm.completion = real``.
    """
    real_completion = original_llm.completion

    def counting_completion(*args, **kwargs):
        record = {"usage": None, "seconds": None, "error": None}
        calls.append(record)
        started = time.perf_counter()
        try:
            response = real_completion(*args, **kwargs)
        except Exception as exc:
            record["error"] = "%s: %s" % (type(exc).__name__, str(exc)[:300])
            record["messages"] = kwargs.get("messages")
            raise
        finally:
            record["seconds"] = time.perf_counter() - started
        try:
            record["text_head"] = (response.choices[0].message.content or "")[:400]
        except Exception:
            record["text_head"] = ""
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        if isinstance(prompt, int) and isinstance(completion, int):
            record["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion}
        else:  # the caller counts these texts itself
            record["messages"] = kwargs.get("messages")
            try:
                record["completion_text"] = response.choices[0].message.content or ""
            except Exception:
                record["completion_text"] = ""
        return response

    original_llm.completion = counting_completion
    return real_completion


def live_conversation(job, FSMManager, load_fsm_definition):
    """Play the user turns of one conversation through the original, talking to a real model.

    The model is reached through the original's own ``LiteLLMInterface`` with the
    litellm keyword arguments it is given (model, api_base, api_key, temperature,
    max_tokens, timeout), exactly as a user of the package would configure it.
    To count what it costs, the ``completion`` function that its llm module
    imported from litellm is wrapped: every HTTP call to the model is counted
    with the usage the server reports (the original itself discards it). The
    conversation stops at the first exception, which is recorded.
    """
    # The ORIGINAL package's layout: llm_fsm/llm.py is one module (not our llm/ package).
    import llm_fsm.llm as original_llm
    from llm_fsm.llm import LiteLLMInterface

    calls = []
    real_completion = _count_calls(original_llm, calls)
    try:
        options = dict(job["litellm"])
        model = options.pop("model")
        api_key = options.pop("api_key", None)
        interface = LiteLLMInterface(model=model, api_key=api_key, **options)
        manager = FSMManager(fsm_loader=load_fsm_definition, llm_interface=interface)
        result = {"turns": [], "error": None, "opening": None, "final_state": None, "ended": None, "data": {}}
        conversation_id = None
        del calls[:]
        started = time.perf_counter()
        try:
            conversation_id, opening = manager.start_conversation(job["definition_path"], job.get("initial_context"))
            result["opening"] = {"seconds": time.perf_counter() - started, "calls": list(calls), "message": opening}
        except Exception as exc:
            result["opening"] = {"seconds": time.perf_counter() - started, "calls": list(calls)}
            result["error"] = "opening: %s: %s" % (type(exc).__name__, str(exc)[:500])
        if conversation_id is not None:
            for index, message in enumerate(job["user_turns"], start=1):
                if manager.is_conversation_ended(conversation_id):
                    result["turns"].append({"index": index, "skipped": "the conversation had ended"})
                    break
                del calls[:]
                started = time.perf_counter()
                turn = {"index": index}
                try:
                    turn["reply"] = manager.process_message(conversation_id, message)
                except Exception as exc:
                    turn["error"] = "%s: %s" % (type(exc).__name__, str(exc)[:500])
                turn["seconds"] = time.perf_counter() - started
                turn["calls"] = list(calls)
                turn["state"] = manager.get_conversation_state(conversation_id)
                result["turns"].append(turn)
                if "error" in turn:
                    result["error"] = "turn %d: %s" % (index, turn["error"])
                    break
            result["final_state"] = manager.get_conversation_state(conversation_id)
            result["ended"] = manager.is_conversation_ended(conversation_id)
            result["data"] = _json_safe(manager.get_conversation_data(conversation_id))
        return result
    finally:
        original_llm.completion = real_completion


def dst_conversation(job, FSMManager, load_fsm_definition, LLMResponse, StateTransition):
    """Replay one dialogue's user turns through the original, for dialogue state tracking (``benchmarks/dst.py``).

    The original's own ``LiteLLMInterface`` asks the model every turn; its reply's
    ``message`` is then replaced by the dataset's SYSTEM utterance that follows
    the user turn, so the conversation history the original shows the model on
    the next turn is the dataset's (an offer the user accepts is in it). The
    opening is the fixed ``greeting`` without a model call (the dataset's
    dialogues start with the user). A turn that raises is recorded and the
    dialogue goes on; its dangling user message is taken out of the history, as
    our engine records nothing of a failed turn. The context after each turn is
    returned for scoring.
    """
    import llm_fsm.llm as original_llm
    from llm_fsm.llm import LiteLLMInterface

    with open(job["definition_path"], encoding="utf-8") as handle:
        initial_state = json.load(handle)["initial_state"]

    class DatasetTurns(LiteLLMInterface):
        reply = None  # None during the opening: answer without the model

        def send_request(self, request):
            if self.reply is None:
                return LLMResponse(
                    transition=StateTransition(target_state=initial_state, context_update={}),
                    message=job["greeting"],
                )
            response = super().send_request(request)
            response.message = self.reply
            return response

    calls = []
    real_completion = _count_calls(original_llm, calls)
    try:
        options = dict(job["litellm"])
        model = options.pop("model")
        api_key = options.pop("api_key", None)
        interface = DatasetTurns(model=model, api_key=api_key, **options)
        manager = FSMManager(fsm_loader=load_fsm_definition, llm_interface=interface)
        conversation_id, _ = manager.start_conversation(job["definition_path"])
        turns = []
        for turn in job["turns"]:
            del calls[:]
            interface.reply = turn["system"]
            record = {}
            started = time.perf_counter()
            try:
                manager.process_message(conversation_id, turn["user"])
            except Exception as exc:
                record["error"] = "%s: %s" % (type(exc).__name__, str(exc)[:300])
                exchanges = manager.instances[conversation_id].context.conversation.exchanges
                if exchanges and "user" in exchanges[-1]:
                    exchanges.pop()
            record["seconds"] = time.perf_counter() - started
            record["calls"] = list(calls)
            record["state"] = manager.get_conversation_state(conversation_id)
            record["data"] = _json_safe(manager.get_conversation_data(conversation_id))
            turns.append(record)
        history = manager.instances[conversation_id].context.conversation.exchanges
        return {"turns": turns, "history": _json_safe(history)}
    finally:
        original_llm.completion = real_completion


class _OutOfTime(BaseException):
    """Raised by the timer inside the original's validator: not an Exception, so its ``except Exception`` lets it by."""


def validate_file(job):
    """Time the original's validator on one file; a timer stops it after ``timeout`` seconds."""
    import signal

    from llm_fsm.validator import validate_fsm_from_file

    def out_of_time(signum, frame):
        raise _OutOfTime()

    previous = signal.signal(signal.SIGALRM, out_of_time)
    signal.setitimer(signal.ITIMER_REAL, float(job.get("timeout", 60)))
    gc.collect()
    started = time.perf_counter()
    try:
        result = validate_fsm_from_file(job["path"])
    except _OutOfTime:
        return {"seconds": time.perf_counter() - started, "outcome": "timeout", "errors": [], "warnings": 0}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "outcome": "valid" if result.is_valid else "invalid",
        "errors": [str(e)[:200] for e in result.errors[:5]],
        "warnings": len(result.warnings),
    }


def main():
    metadata, module_file, FSMManager, LLMInterface, LLMResponse, StateTransition, load_fsm_definition = (
        _load_original()
    )

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
                self.requests.append({"system_prompt": request.system_prompt, "user_message": request.user_message})
            else:
                self.requests.append(None)
            self.seconds += time.perf_counter() - started
            return response

    scenario = {}

    def run(turn_list, capture):
        """One conversation: opening, then the given turns. Returns (opening ms, per-turn records, captured)."""
        fake = ScriptedFake()
        manager = FSMManager(fsm_loader=load_fsm_definition, llm_interface=fake)
        fake.reply = scenario["opening"]
        fake.record = 0 in capture
        started = time.perf_counter()
        conversation_id, _ = manager.start_conversation(scenario["definition_path"])
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

    def handle(job):
        op = job.get("op")
        if op == "live":
            return live_conversation(job, FSMManager, load_fsm_definition)
        if op == "dst":
            return dst_conversation(job, FSMManager, load_fsm_definition, LLMResponse, StateTransition)
        if op == "validate":
            return validate_file(job)
        if op == "setup":
            scenario.update(
                definition_path=job["definition_path"],
                opening=job["opening"],
                turns=job["turns"],
                short=int(job.get("short_turns", 10)),
            )
            return {
                "package": "llm-fsm",
                "version": metadata.version("llm-fsm"),
                "module_file": module_file,
                "python": sys.version.split()[0],
                "logging": set_logging(job.get("logging", "default")),
            }
        if not scenario:
            _fail("the first request must be 'setup'")
        short_turns = scenario["turns"][: scenario["short"]]
        if op == "timing":
            for _ in range(int(job.get("warmup", 0))):
                run(short_turns, set())
            gc.collect()
            runs = []
            for _ in range(int(job["runs"])):
                _, records, _ = run(short_turns, set())
                runs.append([r["engine_ms"] for r in records])
            return {"short_runs_engine_ms": runs}
        if op == "long":
            gc.collect()
            opening_ms, records, captured = run(scenario["turns"], set(int(n) for n in job.get("capture_at", [])))
            return {
                "long": {
                    "opening_ms": opening_ms,
                    "engine_ms": [r["engine_ms"] for r in records],
                    "calls": [r["calls"] for r in records],
                    "prompt_chars": [r["prompt_chars"] for r in records],
                    "states": [r["state"] for r in records],
                },
                "captured": captured,
            }
        _fail("unknown op %r" % (op,))

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            job = json.loads(line)
        except ValueError as exc:
            _fail("bad request line: %s" % (exc,))
        result = handle(job)
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
