"""The offline local model: start time, latency, memory, and how well it extracts.

Starts llama-server with SmolLM2-135M (or ``--model gemma3``) in a private
cache directory that borrows the binary built by ``llm-fsm local setup``,
sends the engine's own prompts (``definitions/personal_information_collection.json``,
state ``collect_email``, with a few exchanges of history: about 1,500 prompt
tokens) with the engine's JSON Schema as ``response_format``, and prints:

- seconds from ``start()`` to a healthy server;
- latency of the first request (cold: nothing cached) and of later requests
  that share the system prompt (warm: llama-server reuses the cached prefix),
  with the warm/cold ratio measured in the same run;
- the server's resident memory after loading and after the requests;
- how many of ten users' email addresses came back in ``context_update``.

Run from the repository root after ``llm-fsm local setup``::

    python benchmarks/local_model.py
    python benchmarks/local_model.py --model gemma3 --warm-runs 3
    python benchmarks/local_model.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llm_fsm.engine._instance import FSMInstance
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._reply_schema import closed_schema
from llm_fsm.engine._turn import CallLLM, EngineConfig, run_turn
from llm_fsm.errors import FSMError
from llm_fsm.loading import load_fsm_definition
from llm_fsm.local import _catalogue, _server

DEFINITION = ROOT / "definitions" / "personal_information_collection.json"
STATE = "collect_email"

HISTORY = [
    ("user", "Hello there, I'd like to sign up for the newsletter and the community events."),
    ("assistant", "Welcome! I'll collect a few details to register you. Are you ready to begin?"),
    ("user", "Yes, ready. Before we start: is my data shared with anyone else at all?"),
    ("assistant", "Your details are used only for your registration and are never sold. What is your name?"),
    ("user", "My name is Robin Alvarez-Whitfield, Robin is fine. I moved here recently from Lisbon."),
    ("assistant", "Thanks, Robin! Next I need an email address where we can reach you about events."),
]

USERS = [
    ("Sure, it's robin.alvarez@example.org", "robin.alvarez@example.org"),
    ("my email is kim_lee42@mailbox.net thanks", "kim_lee42@mailbox.net"),
    ("You can reach me at j.doe@uni-hamburg.de.", "j.doe@uni-hamburg.de"),
    ("a.nguyen@example.com", "a.nguyen@example.com"),
    ("Use priya.s@company.co.uk for everything please", "priya.s@company.co.uk"),
    ("ok: tom@tomsmith.io", "tom@tomsmith.io"),
    ("It is maria.garcia1990@example.es", "maria.garcia1990@example.es"),
    ("write to info+robin@service.example", "info+robin@service.example"),
    ("Email? sure — lee.chen@research.example.edu", "lee.chen@research.example.edu"),
    ("it's ola.nordmann@posten.example.no, I check it daily", "ola.nordmann@posten.example.no"),
]


LONG_HISTORY = [
    (
        role,
        f"{text} "
        + " ".join(
            f"(Side note {i}: the community centre is open on weekdays, the garden club meets on Thursdays "
            f"and the library lends tools as well as books.)"
            for i in range(1, 4)
        ),
    )
    for role, text in HISTORY
]


def engine_prompt(history: list[tuple[str, str]] = HISTORY) -> tuple[str, dict[str, Any]]:
    """The system prompt and reply schema the engine itself sends a local model in this state.

    Taken from the engine's own turn (``run_turn`` up to its model call), not rebuilt
    here, so this benchmark measures what users' conversations send: the prompt for
    an interface that sends the schema, and the schema closed to the state's keys as
    ``LiteLLMInterface`` closes it for ``local`` models.
    """
    definition = load_fsm_definition(str(DEFINITION))
    instance = FSMInstance(fsm_id=definition.name, current_state=STATE)
    instance.context.data.update({"name": "Robin Alvarez-Whitfield"})
    for role, text in history:
        if role == "user":
            instance.context.conversation.add_user_message(text)
        else:
            instance.context.conversation.add_assistant_message(text)
    builder = PromptBuilder(max_history_size=len(history))
    turn = run_turn(definition, instance, USERS[0][0], builder, EngineConfig(), schema_sent=True)
    effect = next(turn)
    while not isinstance(effect, CallLLM):  # hook calls: no hooks here
        effect = turn.send(None)
    request = effect.request
    turn.close()
    assert request.response_schema is not None and request.context_keys is not None
    return request.system_prompt, closed_schema(request.response_schema, request.context_keys)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def ask(kwargs: dict[str, Any], prompt: str, schema: dict[str, Any], user: str) -> tuple[float, dict[str, Any], int]:
    import litellm

    call = dict(kwargs)
    mode = call.pop("response_format_mode")
    if mode == "json_schema":
        fmt: dict[str, Any] = {"type": "json_schema", "json_schema": {"name": "fsm_response", "schema": schema}}
    else:
        fmt = {"type": "json_object", "schema": schema}
    began = time.perf_counter()
    response = litellm.completion(
        messages=[{"role": "system", "content": prompt}, {"role": "user", "content": user}],
        response_format=fmt,
        temperature=0,
        max_tokens=400,
        timeout=300,
        **call,
    )
    elapsed = time.perf_counter() - began
    text = response.choices[0].message.content or ""
    try:
        reply = json.loads(text)
    except json.JSONDecodeError:
        reply = {"_unparsed": text}
    return elapsed, reply, int(response.usage.prompt_tokens)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2", choices=sorted(_catalogue.MODELS))
    parser.add_argument("--warm-runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = parser.parse_args()

    real_home = _catalogue.home_dir()
    binary = _catalogue.server_binary_path(real_home)
    if not binary.is_file():
        print(f"llama-server is not built in {real_home}: run `llm-fsm local setup` first", file=sys.stderr)
        return 2
    prompt, schema = engine_prompt()
    long_prompt = engine_prompt(LONG_HISTORY)
    with tempfile.TemporaryDirectory(prefix="llm_fsm_bench_") as tmp:
        home = Path(tmp)
        private = _catalogue.server_binary_path(home)
        private.parent.mkdir(parents=True)
        private.symlink_to(binary)
        try:
            began = time.perf_counter()
            state = _server.start(args.model, home=home, threads=args.threads)
            start_s = time.perf_counter() - began
            rss_loaded = rss_mib(state.pid)
            kwargs = _server.litellm_kwargs_for(state)
            timings: dict[str, dict[str, Any]] = {}
            for name, (text, reply_schema) in (("engine", (prompt, schema)), ("long", long_prompt)):
                cold_s, _, tokens = ask(kwargs, text, reply_schema, USERS[0][0])
                warm = [ask(kwargs, text, reply_schema, user)[0] for user, _ in USERS[1 : 1 + args.warm_runs]]
                timings[name] = {
                    "prompt_tokens": tokens,
                    "cold_s": round(cold_s, 2),
                    "warm_median_s": round(statistics.median(warm), 2),
                    "warm_over_cold": round(statistics.median(warm) / cold_s, 2),
                }
            right = 0
            replies = []
            for user, email in USERS:
                _, reply, _ = ask(kwargs, prompt, schema, user)
                update = (reply.get("transition") or {}).get("context_update") or {}
                got = update.get("email") if isinstance(update, dict) else None
                right += got == email
                replies.append(reply)
            rss_after = rss_mib(state.pid)
        except FSMError as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        finally:
            _server.stop(home=home)
    figures = {
        "model": args.model,
        "runtime": state.runtime,
        "threads": args.threads or _server.default_threads(),
        "start_s": round(start_s, 2),
        **{f"{name}_{key}": value for name, values in timings.items() for key, value in values.items()},
        "rss_loaded_mib": round(rss_loaded, 1),
        "rss_after_mib": round(rss_after, 1),
        "emails_right": f"{right}/{len(USERS)}",
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:24} {value}")
        print("first reply:", json.dumps(replies[0])[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
