"""What the LLM edge costs: parsing model text, and LiteLLMInterface around litellm.

Printed (each beside a baseline measured in the same run):
- ``parse_llm_output`` on a clean reply vs ``json.loads`` + building the
  ``LLMResponse`` by hand (the least any parser must do), and on messy replies
  (code fence + prose, ``<think>`` block, an example object first, trailing
  commas) — µs per reply;
- the worst hostile input we know of (200,000 characters of nested objects):
  ms per reply, which bounds what one malicious reply can cost;
- ``LiteLLMInterface.complete`` vs a bare ``litellm.completion`` + ``json.loads``,
  both with litellm's ``mock_response`` (no network), µs per call and the ratio;
- tokens (o200k_base) of the reply JSON Schema sent as ``response_format``.

Run from the repository root::

    python benchmarks/llm_edge.py
    python benchmarks/llm_edge.py --quick
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import contextlib

from llm_fsm.engine._records import LLMRequest, LLMResponse, StateTransition
from llm_fsm.engine._reply_schema import response_json_schema
from llm_fsm.errors import MalformedOutputError
from llm_fsm.llm._litellm import LiteLLMInterface
from llm_fsm.llm._parsing import parse_llm_output

TARGETS = ["ask_name", "ask_email", "confirm"]
REPLY = {
    "transition": {"target_state": "ask_email", "context_update": {"name": "Ada Lovelace", "age": 36}},
    "message": "Nice to meet you, Ada! What is your email address?",
    "reasoning": "The user gave their name and age.",
}
CLEAN = json.dumps(REPLY)
MESSY = {
    "fenced + prose": "Sure! Here is my answer:\n```json\n" + json.dumps(REPLY, indent=2) + "\n```\nAnything else?",
    "<think> block": "<think>The user said {name: Ada}. I should move on.</think>\n" + CLEAN,
    "example object first": 'Format: {"transition": {}, "message": ""}\n' + CLEAN,
    "trailing commas": CLEAN[:-1] + ",}",
}


def per_call(fn: Callable[[], object], seconds: float) -> float:
    """Median seconds per call over five batches sized to take ``seconds`` in total."""
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds / 10:
        fn()
        n += 1
    batch = max(1, n * 2)
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - t0) / batch)
    return statistics.median(samples)


def baseline_parse() -> LLMResponse:
    obj = json.loads(CLEAN)
    t = obj["transition"]
    return LLMResponse(
        transition=StateTransition(target_state=t["target_state"], context_update=t["context_update"]),
        message=obj["message"],
        reasoning=obj.get("reasoning"),
    )


def hostile() -> None:
    text = '{"a":' * 2000 + '"' + "v" * (195_000 - 6 * 2000) + '"' + "}" * 2000
    with contextlib.suppress(MalformedOutputError):
        parse_llm_output(text, TARGETS)


def schema_tokens() -> tuple[int, str]:
    text = json.dumps(response_json_schema(TARGETS), separators=(",", ":"))
    try:
        from tokens_util import count_tokens, tokenizer_name  # type: ignore[import-not-found]

        return count_tokens(text), tokenizer_name()
    except Exception:  # noqa: BLE001 - the helper is optional; fall back to an honest estimate
        return len(text.encode()) // 4, "estimate: 4 bytes per token"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timing runs")
    args = parser.parse_args()
    budget = 0.3 if args.quick else 1.5

    assert parse_llm_output(CLEAN, TARGETS) == baseline_parse()
    for text in MESSY.values():
        assert parse_llm_output(text, TARGETS) == baseline_parse()

    base = per_call(baseline_parse, budget)
    ours = per_call(lambda: parse_llm_output(CLEAN, TARGETS), budget)
    print("parsing one reply (µs, median of 5 batches)")
    print(f"  json.loads + LLMResponse (baseline)  {base * 1e6:8.1f}")
    print(f"  parse_llm_output, clean reply        {ours * 1e6:8.1f}   ratio {ours / base:.2f}x")
    for name, text in MESSY.items():
        t = per_call(lambda text=text: parse_llm_output(text, TARGETS), budget)
        print(f"  parse_llm_output, {name:19s} {t * 1e6:8.1f}   ratio {t / base:.2f}x")
    worst = per_call(hostile, budget)
    print(f"  hostile 195k-char nested reply       {worst * 1e3:8.1f} ms (refused)")

    import litellm

    litellm.suppress_debug_info = True
    request = LLMRequest(
        system_prompt="<task>collect a name</task>",
        user_message="I'm Ada",
        response_schema=response_json_schema(TARGETS),
    )
    messages = [{"role": "system", "content": request.system_prompt}, {"role": "user", "content": request.user_message}]
    interface = LiteLLMInterface("gpt-4o", mock_response=CLEAN)

    def bare() -> object:
        reply = litellm.completion(model="gpt-4o", messages=messages, mock_response=CLEAN)
        return json.loads(reply.choices[0].message.content)

    interface.complete(request)  # warm litellm's caches for both
    bare()
    b = per_call(bare, budget)
    o = per_call(lambda: interface.complete(request), budget)
    print("one model call with litellm mock_response (µs, no network)")
    print(f"  litellm.completion + json.loads (baseline)  {b * 1e6:8.1f}")
    print(f"  LiteLLMInterface.complete                   {o * 1e6:8.1f}   ratio {o / b:.2f}x")

    tokens, how = schema_tokens()
    print(f"reply JSON Schema sent as response_format: {tokens} tokens ({how}), {len(TARGETS)} targets")


if __name__ == "__main__":
    main()
