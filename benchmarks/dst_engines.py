"""The engines ``dst.py`` replays SGD dialogues through: ours (with or without declarations) and the original.

The dataset's SYSTEM turns are the dataset's, not ours: every engine asks its
model each user turn as usual, then the reply's ``message`` is replaced by the
SYSTEM utterance that follows that user turn. The engine stores the replaced
message in its transcript, so on the next turn the model sees the dialogue as
the dataset has it, offers included ("Would you like Akiko's?" "Yes" can only be
tracked if the offer is in view). The opening, which the dataset has not (its
dialogues start with the user), is a fixed greeting without a model call, for
both engines; so is our engine's second "regenerate" call, whose only product
is a message that would be replaced anyway.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from dst_convert import Dialogue, UserTurn, state_id
from live_engines import CallCounter, Server
from original_env import BASELINES, BaselineUnavailable, DriverSession, installed_version

from llm_fsm.engine._effects import EngineConfig
from llm_fsm.engine._records import LLMRequest, LLMResponse, LLMResult
from llm_fsm.llm._interface import LLMInterface
from llm_fsm.llm.fakes import to_response
from llm_fsm.manager import FSMManager

GREETING = "Hello! How can I help you today?"


@dataclasses.dataclass
class TurnRun:
    """What one engine did with one user turn: the context it holds afterwards, and what the turn cost."""

    data: dict[str, Any]
    state: str | None = None
    error: str | None = None
    seconds: float = 0.0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    refused: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Keys of the model's update the engine did not store, with its reason (ours only: from the turn record)."""
    extracted: dict[str, int] = dataclasses.field(default_factory=dict)
    """What the engine's extractors did this turn: fills, repairs and questions (``ask``), counted (ours only)."""
    invented_held: int = 0
    """Of the values the ``invented`` oracle wrote this turn, how many the context holds afterwards."""


@dataclasses.dataclass
class DialogueRun:
    engine: str
    dialogue_id: str
    turns: list[TurnRun] = dataclasses.field(default_factory=list)
    history: list[dict[str, str]] = dataclasses.field(default_factory=list)
    """The transcript the engine kept at the end (the original's; ours keeps it in the store)."""


ORACLES = ("words", "canonical", "invented")

SGD_TODAY = dt.datetime(2019, 3, 1, 9, 0, tzinfo=dt.UTC)
"""The dialogues' "now": SGD's users speak on Friday 1 March 2019 ("tomorrow" is 2019-03-02, "this Sunday"
2019-03-03 in its canonical values). Our engine gets it as the conversation's clock (``EngineConfig.clock``)."""


class OracleLLM(LLMInterface):
    """A model that knows the answers: each turn's gold slot values and its intent's state.

    It proposes the active intent's state and writes, as ``context_update``, every slot whose gold value
    changed in this turn, as ``mode`` says:

    - ``words``: the first listed form (the user's words, or the offer they took). With a right converter
      and scorer, ours without declarations then scores 100%; with declarations, whatever validation or
      grounding refuses of the gold shows in the turn records.
    - ``canonical``: SGD's canonical form of that value (``2019-03-08`` for "next Friday", ``18:15`` for "a
      quarter past six"): what a perfect model writes for typed keys. Grounding must not refuse it.
    - ``invented``: instead of the gold, one value per turn nobody said, into a free-form slot (a date in
      2031, a time at an odd minute, a made-up name). Grounding must refuse every one.
    """

    def __init__(self, mode: str = "words", slots: Mapping[str, Sequence[tuple[str, str]]] | None = None) -> None:
        """``slots``: the free-form slots of each service and their formats (``invented`` writes into those)."""
        if mode not in ORACLES:
            raise ValueError(f"oracle mode {mode!r}: one of {', '.join(ORACLES)}")
        self.mode = mode
        self.slots = slots or {}
        self.service = ""
        self.turn: UserTurn | None = None
        self.previous: Mapping[str, tuple[str, ...]] = {}
        self.index = 0
        self.invented: list[tuple[str, str]] = []
        """(slot, value) the ``invented`` oracle wrote, for the benchmark to look for in the contexts."""

    def send_request(self, request: LLMRequest) -> LLMResponse:
        turn = self.turn
        if turn is None:
            return to_response({"target_state": None, "message": GREETING}, request)
        changed = {k: v for k, v in turn.slot_values.items() if v and self.previous.get(k) != v}
        if self.mode == "canonical":
            update: dict[str, Any] = {k: (turn.canonical.get(k) or v)[0] for k, v in changed.items()}
        elif self.mode == "invented":
            update = self._invent()
        else:
            update = {k: v[0] for k, v in changed.items()}
        target = None if turn.active_intent == "NONE" else state_id(turn.active_intent)
        return to_response({"target_state": target, "context_update": update, "message": "(oracle)"}, request)

    def _invent(self) -> dict[str, Any]:
        slots = self.slots.get(self.service, ())
        if not slots:
            return {}
        self.index += 1
        slot, kind = slots[self.index % len(slots)]
        if kind == "date":
            value = f"2031-0{1 + self.index % 9}-{10 + self.index % 19}"
        elif kind == "time":
            value = f"{self.index % 24:02d}:{(7, 23, 37, 53)[self.index % 4]:02d}"
        else:
            value = f"Zorvex {self.index}"
        self.invented.append((slot, value))
        return {slot: value}


class NoDataLLM(LLMInterface):
    """A model that returns no data at all: no move, no value, only a reply. What our engine stores with it is what
    its own extractors read from the user's words (``--engines extractors``)."""

    def send_request(self, request: LLMRequest) -> LLMResponse:
        return to_response({"target_state": None, "message": "(no model)"}, request)


class DatasetTurnsLLM(LLMInterface):
    """Asks the real model each user turn, then puts the dataset's SYSTEM utterance in its reply's place."""

    def __init__(self, inner: LLMInterface) -> None:
        self.inner = inner
        self.reply: str | None = None

    @property
    def sends_reply_schema(self) -> bool:
        return self.inner.sends_reply_schema

    def send_request(self, request: LLMRequest) -> LLMResponse:
        return self.complete(request).response

    def complete(self, request: LLMRequest) -> LLMResult:
        if request.purpose != "turn" or self.reply is None:
            # The opening and the "regenerate" call produce only a message: the dataset's, without the model.
            message = GREETING if self.reply is None else self.reply
            return LLMResult(response=to_response({"target_state": None, "message": message}, request))
        result = self.inner.complete(request)
        return dataclasses.replace(result, response=result.response.model_copy(update={"message": self.reply}))


class OursDST:
    """Our FSMManager (memory store), one fresh conversation per dialogue, on the given model interface."""

    def __init__(
        self, name: str, inner: LLMInterface, definitions: Mapping[str, Path], counter: CallCounter | None = None
    ) -> None:
        """``counter``: an installed ``CallCounter`` (one for every engine of this process) when calls are counted."""
        self.name = name
        self.llm = DatasetTurnsLLM(inner)
        self.definitions = definitions
        self.counter = counter

    def play(self, dialogue: Dialogue) -> DialogueRun:
        run = DialogueRun(self.name, dialogue.dialogue_id)
        config = EngineConfig(clock=lambda: SGD_TODAY)
        manager = FSMManager(llm_interface=self.llm, store="memory://", config=config)
        oracle = self.llm.inner if isinstance(self.llm.inner, OracleLLM) else None
        self.llm.reply = None
        if oracle is not None:
            oracle.turn, oracle.previous, oracle.service = None, {}, dialogue.service
        conversation_id, _ = manager.start_conversation(str(self.definitions[dialogue.service]))
        previous: Mapping[str, tuple[str, ...]] = {}
        for turn in dialogue.turns:
            self.llm.reply = turn.system_reply
            if oracle is not None:
                oracle.turn, oracle.previous = turn, previous
            if self.counter is not None:
                self.counter.take()
            before = manager.get_instance(conversation_id).turn_count
            invented = len(oracle.invented) if oracle is not None else 0
            error = None
            started = time.perf_counter()
            try:
                manager.process_message(conversation_id, turn.utterance)
            except Exception as exc:  # noqa: BLE001 - a failed turn is a result; the dialogue goes on
                error = f"{type(exc).__name__}: {exc}"[:300]
            seconds = time.perf_counter() - started
            instance = manager.get_instance(conversation_id)
            record = instance.turns[-1] if instance.turn_count > before and instance.turns else None
            refused = [
                {"key": c.key, "value": c.value, "reason": c.reason, "rule": getattr(c, "rule", None)}
                for c in (record.context_changes if record else [])
                if not c.applied
            ]
            extracted: Counter[str] = Counter(
                c.extracted.rule for c in (record.context_changes if record else []) if c.extracted
            )
            written = oracle.invented[invented:] if oracle is not None else []
            calls = self.counter.take() if self.counter is not None else []
            run.turns.append(
                TurnRun(
                    data=dict(instance.context.data),
                    state=instance.current_state,
                    error=error,
                    seconds=seconds,
                    calls=len(calls),
                    prompt_tokens=sum(int((c.get("usage") or {}).get("prompt_tokens", 0)) for c in calls),
                    completion_tokens=sum(int((c.get("usage") or {}).get("completion_tokens", 0)) for c in calls),
                    refused=refused,
                    extracted=dict(extracted),
                    invented_held=sum(instance.context.data.get(slot) == value for slot, value in written),
                )
            )
            previous = turn.slot_values
        return run


class OriginalDST:
    """llm-fsm 0.1.1 in its venv (``original_driver.py``, op ``dst``), on the same server as ours."""

    name = "original"

    def __init__(self, server: Server, options: Mapping[str, Any], definitions: Mapping[str, Path]) -> None:
        wanted = ("model", "api_base", "api_key")  # a local server's; a provider model has the first only
        self.litellm = {**{k: server.kwargs[k] for k in wanted if k in server.kwargs}, **dict(options)}
        self.definitions = definitions
        self.session = DriverSession(BASELINES["original"], timeout=3600.0)
        self.version: str | None = None

    def __enter__(self) -> Self:
        self.session.__enter__()
        self.version = installed_version(BASELINES["original"])
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.session.__exit__(*exc_info)

    def play(self, dialogue: Dialogue) -> DialogueRun:
        run = DialogueRun(self.name, dialogue.dialogue_id)
        job = {
            "op": "dst",
            "definition_path": str(self.definitions[dialogue.service]),
            "turns": [{"user": t.utterance, "system": t.system_reply} for t in dialogue.turns],
            "greeting": GREETING,
            "litellm": self.litellm,
        }
        try:
            answer = self.session.request(job)
        except BaselineUnavailable as exc:
            # the driver died or hung: every turn of this dialogue failed, then a fresh driver for the next
            run.turns = [TurnRun(data={}, error=f"driver: {exc}"[:300]) for _ in dialogue.turns]
            self.session.__exit__(None, None, None)
            self.session = DriverSession(BASELINES["original"], timeout=self.session.timeout)
            self.session.__enter__()
            return run
        run.history = answer.get("history") or []
        for turn in answer["turns"]:
            calls = turn.get("calls") or []
            run.turns.append(
                TurnRun(
                    data=turn.get("data") or {},
                    state=turn.get("state"),
                    error=turn.get("error"),
                    seconds=float(turn.get("seconds") or 0.0),
                    calls=len(calls),
                    prompt_tokens=sum(int((c.get("usage") or {}).get("prompt_tokens", 0)) for c in calls),
                    completion_tokens=sum(int((c.get("usage") or {}).get("completion_tokens", 0)) for c in calls),
                )
            )
        return run
