"""Time to the first streamed character: what the engine adds to the model's own time to first token.

A fake streaming model (``TimedModel``) waits ``--ttft`` ms, then sends the reply's decision part and
the first characters of its message in one chunk, then the rest of the message ``--chars`` characters
every ``--interval`` ms. So the model's first message character is available at exactly ``--ttft``: the
figure ``first character - ttft`` is the engine's own delay (prompt, schema, parse, decide, hooks,
driver), the issue's target being <= 30 ms when the proposal stands.

Printed, over ``--turns`` turns on the memory store and on SQLite (median and p99, ms):

- streamed, proposal stands: first ``token`` event - ttft;
- streamed, proposal refused: first ``token`` event of the regenerated reply - (2 x ttft), the two
  model calls' own waits (the first stream is dropped as soon as its decision is read: nothing of the
  refused reply is shown, and its message is not waited for);
- not streamed (``aprocess_message``): the whole reply - (ttft + streaming time of the whole reply),
  the engine's own time without streaming;
- and, for what a user sees: the wait for the first visible text, streamed and not.

Run from the repository root::

    python benchmarks/stream.py                 # 200 turns each
    python benchmarks/stream.py --turns 50 --ttft 50 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llm_fsm.definition import FSMDefinition  # noqa: E402
from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult, StateTransition  # noqa: E402
from llm_fsm.llm._interface import LLMInterface  # noqa: E402
from llm_fsm.manager import FSMManager  # noqa: E402

MESSAGE = "Thanks, I have noted that. Could you tell me which day suits you best for the appointment?"

LOOP = FSMDefinition.model_validate(
    {
        "name": "loop",
        "description": "a form that loops",
        "initial_state": "ask",
        "states": {
            "ask": {
                "id": "ask",
                "description": "ask",
                "purpose": "collect the user's answers",
                "required_context_keys": ["answer"],
                "transitions": [
                    {"target_state": "ask", "description": "another question"},
                    {
                        "target_state": "never",
                        "description": "never allowed",
                        "conditions": [{"description": "impossible", "logic": {"==": [1, 2]}}],
                    },
                ],
            },
            "never": {"id": "never", "description": "n", "purpose": "n", "transitions": []},
        },
    }
)


class TimedModel(LLMInterface):
    """A streaming model with a fixed time to first token and a fixed pace."""

    def __init__(self, ttft: float, chars: int, interval: float) -> None:
        self.ttft, self.chars, self.interval = ttft, chars, interval
        self.propose = "ask"

    def _response(self, request: LLMRequest) -> LLMResponse:
        target = self.propose if request.purpose == "turn" else "ask"
        return LLMResponse(
            transition=StateTransition(target_state=target, context_update={"answer": "x"}), message=MESSAGE
        )

    def send_request(self, request: LLMRequest) -> LLMResponse:  # pragma: no cover - the async path is measured
        time.sleep(self.ttft + self.interval * (len(MESSAGE) // self.chars))
        return self._response(request)

    async def acomplete(self, request: LLMRequest) -> LLMResult:
        await asyncio.sleep(self.ttft + self.interval * (len(MESSAGE) // self.chars))
        return LLMResult(response=self._response(request))

    async def astream(self, request: LLMRequest) -> AsyncIterator[str | LLMResult]:
        response = self._response(request)
        prefix = json.dumps(
            {"transition": {"target_state": response.transition.target_state, "context_update": {"answer": "x"}}}
        )[:-1]
        text = MESSAGE
        await asyncio.sleep(self.ttft)
        yield prefix + ', "message": "' + text[: self.chars]
        for start in range(self.chars, len(text), self.chars):
            await asyncio.sleep(self.interval)
            yield text[start : start + self.chars]
        yield '"}'
        yield LLMResult(response=response)


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
    }


async def _measure(store: str, turns: int, model: TimedModel) -> dict[str, Any]:
    manager = FSMManager(fsm_loader=lambda _id: LOOP, llm_interface=model, store=store)
    cid, _ = await manager.astart_conversation("loop")
    stream_time = model.interval * len(range(model.chars, len(MESSAGE), model.chars))
    stands, refused, whole = [], [], []
    for _ in range(turns):
        model.propose = "ask"
        began = time.perf_counter()
        async for event in manager.astream_message(cid, "my answer is x"):
            if event.event == "token":
                stands.append(time.perf_counter() - began - model.ttft)
                break
        await asyncio.gather(*manager._background)  # the rest of the turn finishes before the next one
        model.propose = "never"
        began = time.perf_counter()
        async for event in manager.astream_message(cid, "skip to the end"):
            if event.event == "token":
                refused.append(time.perf_counter() - began - 2 * model.ttft)
                break
        await asyncio.gather(*manager._background)
        model.propose = "ask"
        began = time.perf_counter()
        await manager.aprocess_message(cid, "my answer is x")
        whole.append(time.perf_counter() - began - model.ttft - stream_time)
    return {
        "first_visible_text_streamed": _percentiles([v + model.ttft for v in stands]),
        "first_visible_text_not_streamed": _percentiles([v + model.ttft + stream_time for v in whole]),
        "streamed_first_char_minus_ttft": _percentiles(stands),
        "refused_first_char_minus_model_time": _percentiles(refused),
        "not_streamed_whole_reply_minus_model_time": _percentiles(whole),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--ttft", type=float, default=50.0, help="model time to first token, ms")
    parser.add_argument("--chars", type=int, default=8, help="characters per streamed chunk")
    parser.add_argument("--interval", type=float, default=10.0, help="ms between chunks")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = TimedModel(args.ttft / 1000, args.chars, args.interval / 1000)
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            "memory": asyncio.run(_measure("memory://", args.turns, model)),
            "sqlite": asyncio.run(_measure(f"sqlite:///{tmp}/stream.db", args.turns, model)),
        }
    if args.json:
        print(json.dumps({"turns": args.turns, "ttft_ms": args.ttft, **results}, indent=2))
        return
    print(f"Time to first streamed character, {args.turns} turns each, model ttft {args.ttft:g} ms (target <= 30 ms)")
    print(f"{'store':<8} {'case':<45} {'median ms':>10} {'p99 ms':>10}")
    for store, figures in results.items():
        for case, values in figures.items():
            print(f"{store:<8} {case:<45} {values['median_ms']:>10} {values['p99_ms']:>10}")


if __name__ == "__main__":
    main()
