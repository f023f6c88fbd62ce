"""What counts as a successful live conversation, decided the same way for both engines.

A script's expectations were written for our engine with a scripted model;
several of them check things only our engine has (verdicts, the sub-flow
stack, the exact reply). A live comparison must judge only the outcome both
engines are built to produce, so a conversation succeeds when:

1. **the final state is right**: after the last user turn the conversation is
   in the last state the script expects (the last turn's ``state``, or, when
   the last turn names none, the latest one an earlier turn names: a user who
   declines at the read-back must not end up ``booked``), and has ended (or
   not) when the last turn says ``ended``. "Ended" means our engine's
   ``ended`` flag, and for the original its ``is_conversation_ended`` (a state
   without transitions);
2. **the collected data is right**: every context key the script expects
   after *any* turn holds the value of its *latest* expectation (a later
   ``size: large`` overrides an earlier ``size: medium``; an early
   ``milk: {absent: true}`` that is never revisited must still hold at the end;
   but an ``absent`` that a later turn's scripted model reply overrides, by
   storing the key, is replaced by that value as the engine stores it: "no
   drink yet" before the user orders tea cannot hold once they have),
   matched exactly as JSON, by regex, or as present/absent, as the script says;
3. **no turn raised**: an exception ends the conversation and fails it.

Verdict, stack and reply expectations are ignored for both engines.

Apart from success, every value left in the context is checked against the
definition's declarations (``stored_value_problems``): a stored value that
breaks its declaration, or a model's value of a grounded key that nothing the
user said supports, is counted. Our engine must store none; the original,
which knows no declarations, is judged by the same rule for comparison.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._context import _MISSING, get_path, has_value
from llm_fsm.engine._values import Grounding, check, normalise
from llm_fsm.loading import load_fsm_definition
from llm_fsm.scripting._runner import match, same_value
from llm_fsm.scripting._scripts import Matcher, ScriptConversation, TurnSpec


@dataclass(frozen=True)
class Goal:
    label: str
    state: str | None
    ended: bool | None
    context: dict[str, Any]
    """Key → exact value or Matcher (the latest expectation of each key)."""
    definition_path: str | None = None
    users: tuple[str, ...] = ()
    """The script's user messages, in order (what grounded values may come from)."""
    initial_context: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "state": self.state,
            "ended": self.ended,
            "context": {k: _show_expectation(v) for k, v in self.context.items()},
        }


def _show_expectation(value: Any) -> Any:
    return value.model_dump(exclude_unset=True) if isinstance(value, Matcher) else value


def goal_for(conversation: ScriptConversation) -> Goal:
    last = conversation.turns[-1].spec.expect
    state = next((t.spec.expect.state for t in reversed(conversation.turns) if t.spec.expect.state is not None), None)
    context: dict[str, Any] = {}
    definition = load_fsm_definition(conversation.script.definition_path)
    for turn in conversation.turns:
        for key, value in _scripted_writes(turn.spec).items():
            if isinstance(context.get(key), Matcher) and context[key].kind == "absent" and context[key].absent:
                context.pop(key)
                context[key] = _stored_form(definition, key, value)
        for key, expected in (turn.spec.expect.context or {}).items():
            context.pop(key, None)  # keep the order of the latest expectation
            context[key] = expected
    return Goal(
        label=f"{conversation.script.stem}: {conversation.name}",
        state=state,
        ended=last.ended,
        context=context,
        definition_path=str(conversation.script.definition_path),
        users=tuple(t.spec.user for t in conversation.turns),
        initial_context=dict(conversation.initial_context or {}),
    )


def _scripted_writes(turn: TurnSpec) -> dict[str, Any]:
    """What the turn's scripted model stores: its context_update less the keys the turn expects refused."""
    reply = turn.model
    if reply is None:
        return {}
    update = (reply.transition.context_update if reply.transition else reply.context_update) or {}
    refused = turn.expect.refused or {}
    return {k: v for k, v in update.items() if k not in refused}


def _stored_form(definition: FSMDefinition, key: str, value: Any) -> Any:
    """A scripted value as the engine stores it (``flat white`` → ``flat_white``), or "present" when unsure."""
    found = definition.declaration_for(key)
    if found is None or found[0] != key:
        return Matcher(present=True)
    stored = normalise(found[1], value)
    return stored if check(found[1], stored) is None else Matcher(present=True)


def _last_write(written_at: Mapping[str, int], key: str) -> int:
    """The last turn that wrote ``key``, a parent object of it or a path inside it (0: none did)."""
    return max(
        (
            turn
            for path, turn in written_at.items()
            if path == key or key.startswith(path + ".") or path.startswith(key + ".")
        ),
        default=0,
    )


def stored_value_problems(
    definition: FSMDefinition,
    data: Mapping[str, Any],
    users: Sequence[str],
    replies: Sequence[str] = (),
    written_at: Mapping[str, int] | None = None,
    initial_context: Mapping[str, Any] | None = None,
) -> list[str]:
    """Every declared key whose stored value breaks its declaration or is not grounded, in words.

    The declaration check is the engine's own (``_values.check``) on the value as stored. Grounding is
    the engine's rule too: a value of a grounded key the model wrote at turn ``i`` (``written_at``,
    1-based) must be supported by the user's messages up to turn ``i`` and the reply they answered
    (``replies[i - 1]``, the opening being ``replies[0]``). Without ``written_at`` (the original records
    no writes) every user message and reply of the conversation counts, which can only find fewer.
    A value the application gave (``initial_context``, unchanged) needs no witness.
    """
    problems: list[str] = []
    initial = initial_context or {}
    for key, declaration in (definition.context_keys or {}).items():
        value = get_path(data, key)
        if value is _MISSING:
            continue
        shown = json.dumps(value, ensure_ascii=False, default=str)[:60]
        refusal = check(declaration, value)
        if refusal is not None:
            problems.append(f"{key}: {refusal.rule}: {shown}")
            continue
        if not declaration.is_grounded or (key in initial and same_value(initial[key], value)):
            continue
        if written_at is None:
            grounding = Grounding(users, offers=replies)
        elif turn := _last_write(written_at, key):
            grounding = Grounding(users[:turn], offers=replies[turn - 1 : turn])
        else:
            continue  # never written by the model in a turn: the application's (or the opening's hook) value
        if not grounding.supports(value, declaration):
            problems.append(f"{key}: ungrounded: {shown}")
    return problems


def data_problems(goal: Goal, data: Mapping[str, Any]) -> list[str]:
    """Every expected context key that does not hold, in words."""
    problems: list[str] = []
    for key, expected in goal.context.items():
        value = get_path(data, key)
        if isinstance(expected, Matcher):
            problem = match(expected, value, collected=has_value(data, key))
        else:
            problem = (
                None if value is not _MISSING and same_value(value, expected) else f"expected {json.dumps(expected)}"
            )
        if problem:
            shown = "(missing)" if value is _MISSING else json.dumps(value, ensure_ascii=False, default=str)[:80]
            problems.append(f"{key}: {problem}, got {shown}")
    return problems


def state_problems(goal: Goal, final_state: str | None, ended: bool | None) -> list[str]:
    problems: list[str] = []
    if goal.state is not None and final_state != goal.state:
        problems.append(f"state: expected {goal.state}, got {final_state}")
    if goal.ended is not None and ended != goal.ended:
        problems.append(f"ended: expected {str(goal.ended).lower()}, got {ended}")
    return problems


def _shortened(value: Any, limit: int = 300) -> Any:
    """Context values for the report; the original stores whole tracebacks in its context."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + "…"
    if isinstance(value, Mapping):
        return {k: _shortened(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_shortened(v, limit) for v in value]
    return value


@dataclass
class ConversationOutcome:
    """One conversation played by one engine: what happened and what it cost."""

    engine: str
    label: str
    final_state: str | None = None
    ended: bool | None = None
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    user_turns: int = 0
    """The script's user turns (the most this conversation could play)."""
    turns_played: int = 0
    turn_seconds: list[float] = field(default_factory=list)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_source: str = "llama-server usage"
    state_problems: list[str] = field(default_factory=list)
    data_problems: list[str] = field(default_factory=list)
    states: list[str | None] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    """The start of each model output, in call order (what the model actually said)."""

    checks: int = 0
    """How many context keys the script expects (see ``data_problems``)."""
    turns_failed: int = 0
    replies: list[str] = field(default_factory=list)
    """What the user read: the opening, then one reply per turn played."""
    written_at: dict[str, int] | None = None
    """Declared key → the turn (1-based) whose model reply last stored it; None when the engine records no writes."""
    value_problems: list[str] = field(default_factory=list)
    """Stored values that break their declaration or are ungrounded (see ``stored_value_problems``)."""

    def judge(self, goal: Goal) -> ConversationOutcome:
        self.state_problems = state_problems(goal, self.final_state, self.ended)
        self.data_problems = data_problems(goal, self.data)
        self.checks = len(goal.context)
        if goal.definition_path is not None:
            self.value_problems = stored_value_problems(
                load_fsm_definition(goal.definition_path),
                self.data,
                goal.users[: max(self.turns_played, 1)] if self.written_at is None else goal.users,
                self.replies,
                self.written_at,
                goal.initial_context,
            )
        return self

    @property
    def checks_right(self) -> int:
        """Expected context keys that hold at the end, counted even when a turn failed (partial credit)."""
        return self.checks - len(self.data_problems)

    @property
    def state_ok(self) -> bool:
        return not self.error and not self.state_problems

    @property
    def data_ok(self) -> bool:
        return not self.error and not self.data_problems

    @property
    def success(self) -> bool:
        return self.state_ok and self.data_ok

    @property
    def failure_kind(self) -> str:
        if self.error:
            return "error"
        if self.state_problems and self.data_problems:
            return "state and data wrong"
        if self.state_problems:
            return "state wrong"
        return "data wrong"

    @property
    def reason(self) -> str:
        return "; ".join(self.state_problems + self.data_problems)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["data"] = {k: _shortened(v) for k, v in self.data.items() if not str(k).startswith("_")}
        out["success"] = self.success
        return out
