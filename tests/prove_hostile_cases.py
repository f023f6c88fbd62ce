"""Hostile runs set against the prover's reachable set (issue 22), for ``tests/test_prove_hostile.py`` and
``benchmarks/prove_hostile.py``.

The prover claims that no model output can bring a conversation to a (flow stack,
state) outside ``prove(definition).reachable``. A hostile model (random targets,
updates, intents, flows, garbage, exceptions) and hostile backends (actions that
return anything or raise) test that claim on the real engine: every configuration
a run visits must be in the set. Two kinds of definitions: those of the
hostile-model property (``hostile_strategies.definitions``: undeclared keys,
arbitrary guards, a sub-flow that calls itself) and small generated forms
(``benchmarks/_prove_defs.py``: declared enums, bounded integers, booleans,
read-backs, actions, a sub-flow), whose hostile model writes values near the
declared domains and whose user says some of them, so grounding lets them in.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hostile_strategies import INJECTIONS, hostile_replies, json_value, model_outputs, model_replies, user_messages
from hypothesis import strategies as st

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition, KeyDeclaration
from llm_fsm.engine._instance import FSMInstance
from llm_fsm.errors import LLMResponseError
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _prove_defs  # noqa: E402 - after the benchmarks folder is on the path

Configuration = tuple[tuple[str, ...], str]
Resolve = Callable[[FlowDeclaration, FSMDefinition], FSMDefinition]
Draw = Callable[[st.SearchStrategy[Any]], Any]

#: what a hostile backend may answer an action with: the fields the generated forms map, wrong ones, no mapping,
#: an exception
ACTION_RESULTS: st.SearchStrategy[Any] = st.sampled_from(
    [
        {"ok": True},
        {"ok": False},
        {"found": True},
        {"found": False},
        {"ok": "maybe"},
        {},
        "not a mapping",
        RuntimeError("backend down"),
    ]
)


#: a model's intents, the ordinary one most often (a run cancelled at its second turn explores little)
INTENTS = ["continue"] * 5 + ["confirm"] * 2 + ["deny", "digression", "cancel", "start_flow", "resume_flow", "???"]
#: intents that move between flows, with the flow named (the hostile-model definitions' sub-flow is "again")
FLOW_MOVES: list[tuple[str, str | None]] = [
    ("start_flow", "again"),
    ("resume_flow", "gen"),
    ("cancel", None),
    ("confirm", None),
]
OPENING = {"transition": {"target_state": None, "context_update": {}}, "message": "Hello."}


@dataclass
class Case:
    """One definition to prove and to run, with how the prover and the manager find its sub-flows."""

    definition: FSMDefinition
    resolve: Resolve
    loader: Callable[[str], FSMDefinition]
    #: the model's outputs in a turn that starts in the given state (of any flow)
    outputs: Callable[[str], st.SearchStrategy[Any]]
    messages: st.SearchStrategy[str]
    initial_context: dict[str, Any] = field(default_factory=dict)
    subflows: tuple[FSMDefinition, ...] = ()


@dataclass
class Step:
    """What one turn (or the opening, ``user`` None) was given, and the configuration it ended in."""

    user: str | None
    model: list[Any]
    actions: list[Any]
    configuration: Configuration


def configuration(instance: FSMInstance) -> Configuration:
    return tuple(instance.stack), instance.current_state


def hostile_case(definition: FSMDefinition) -> Case:
    """A definition of the hostile-model property: its sub-flow is itself."""
    replies = model_replies(list(definition.states))
    outputs = mostly(replies | with_moves(replies, FLOW_MOVES), model_outputs(list(definition.states)))
    return Case(
        definition=definition,
        resolve=lambda declaration, parent: definition,
        loader=lambda _: definition,
        outputs=lambda state: outputs,
        messages=user_messages(),
        initial_context={"account": "acc-1"},
    )


def _values(declaration: KeyDeclaration | None) -> st.SearchStrategy[Any]:
    """Values near a key's declared domain (inside, at the bounds, just outside, other spellings) or anything."""
    if declaration is None:
        return json_value
    if declaration.enum:
        spelled = [str(v) for v in declaration.enum]
        return st.sampled_from(spelled + [v.upper() for v in spelled] + ["other"]) | json_value
    if declaration.type == "integer":
        low = int(declaration.minimum if declaration.minimum is not None else 0)
        high = int(declaration.maximum if declaration.maximum is not None else 100)
        return st.integers(low - 2, high + 2) | st.integers(low, high).map(str) | json_value
    if declaration.type == "boolean":
        return st.booleans() | st.sampled_from(["yes", "no", "true"]) | json_value
    return st.sampled_from(["REF-12", "REF-x", "12"]) | json_value


def _said(definition: FSMDefinition) -> list[str]:
    """Words a user may say in a form: its enum values, numbers, yes and no, a reference."""
    words = ["yes", "no", "REF-12", "two", "cancel", "start again"]
    for declaration in (definition.context_keys or {}).values():
        words += [str(v) for v in declaration.enum or ()]
        if declaration.type == "integer":
            low = int(declaration.minimum or 0)
            high = int(declaration.maximum if declaration.maximum is not None else 100)
            words += [str(low), str(high), str((low + high) // 2), str(high + 1)]
    return words


def form_outputs(
    definition: FSMDefinition, sub: FSMDefinition, flows: Sequence[str]
) -> Callable[[str], st.SearchStrategy[Any]]:
    """Outputs for a turn in a state: mostly aimed at the state (its targets, the keys it asks for), else anything.

    Strategies are built once per key and state: hypothesis validates each new one, which costs more than a turn.
    """
    declared = {**(sub.context_keys or {}), **(definition.context_keys or {})}
    entries = {k: st.tuples(st.just(k), _values(declared.get(k))) for k in [*declared, "x", "_secret"]}
    states = {**sub.states, **definition.states}

    def reply(targets: list[str], keys: list[str]) -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries(
            {
                "transition": st.fixed_dictionaries(
                    {
                        "target_state": st.sampled_from(targets) | st.none(),
                        "context_update": st.lists(st.one_of([entries[k] for k in keys]), max_size=4).map(dict),
                    }
                ),
                "message": st.sampled_from(["ok", ""]) | st.sampled_from(INJECTIONS),
                "intent": st.sampled_from(INTENTS),
                "flow": st.sampled_from([*flows, "nope", definition.name]) | st.none(),
            }
        )

    anything = reply(list(states) + ["nowhere", ""], list(entries))
    moves: list[tuple[str, str | None]] = [(intent, flow) for flow in flows for intent in ("start_flow", "start_flow")]
    moves += [("resume_flow", definition.name), ("cancel", None), ("confirm", None)]
    flow_moves = with_moves(anything, moves)
    garbage = st.sampled_from(INJECTIONS) | st.just(RuntimeError("provider down"))
    by_state: dict[str, st.SearchStrategy[Any]] = {}
    for state_id, state in states.items():
        asked = list(state.required_context_keys or ()) + [
            out for action in state.actions or () for out in (action.outputs or {})
        ]
        if state.transitions:
            aimed = reply([t.target_state for t in state.transitions], asked or list(entries))
            by_state[state_id] = mostly(st.one_of(aimed, aimed, aimed, anything, flow_moves), garbage)
    fallback = mostly(anything | flow_moves, garbage)
    return lambda state_id: by_state.get(state_id, fallback)


def with_moves(
    replies: st.SearchStrategy[dict[str, Any]], moves: Sequence[tuple[str, str | None]]
) -> st.SearchStrategy[dict[str, Any]]:
    """Replies whose intent and flow are one of ``moves``: flows started, resumed, cancelled far more often."""
    return st.tuples(replies, st.sampled_from(moves)).map(lambda r: {**r[0], "intent": r[1][0], "flow": r[1][1]})


def mostly(usual: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` four times in five: a run that fails most turns explores little."""
    return st.one_of(usual, usual, usual, usual, rare)


@st.composite
def form_cases(draw: st.DrawFn, max_states: int = 14) -> Case:
    """A small generated form (6 to ``max_states`` states, any seed, with or without the sub-flow) and its hostile
    model."""
    subflow = draw(st.booleans())
    states = draw(st.integers(_prove_defs.MIN_STATES, max_states))
    definition = _prove_defs.definition(states, seed=draw(st.integers(0, 10_000)), subflow=subflow)
    sub = FSMDefinition.model_validate(_prove_defs.subflow_document())
    said = _said(definition) + _said(sub)
    messages = st.lists(st.sampled_from(said), max_size=3).map(" ".join) | st.text(max_size=20)
    return Case(
        definition=definition,
        resolve=_prove_defs.resolver(),
        loader=lambda fsm_id: sub if fsm_id.startswith(_prove_defs.SUBFLOW) else definition,
        outputs=form_outputs(definition, sub, [_prove_defs.SUBFLOW] if subflow else []),
        messages=messages,
        subflows=(sub,) if subflow else (),
    )


def run(case: Case, draw: Draw, turns: int) -> list[Step]:
    """One hostile conversation: the opening and up to ``turns`` turns, each step with the configuration after it."""
    model: list[Any] = []
    results: list[Any] = [draw(ACTION_RESULTS) for _ in range(turns * 2 + 2)]
    answered: list[Any] = []
    current = [case.definition.initial_state]
    hostile = hostile_replies(draw, lambda: case.outputs(current[0]), model)
    opening = [True]  # the opening cannot move (only its message is used): a failed one would only waste the run
    manager = FSMManager(
        fsm_loader=case.loader,
        llm_interface=FunctionLLM(lambda request: OPENING if opening[0] else hostile(request)),
    )

    def backend(**inputs: Any) -> Any:
        out = results.pop() if results else {}
        answered.append(out)
        if isinstance(out, BaseException):
            raise out
        return out

    for definition in (case.definition, *case.subflows):
        for state in definition.states.values():
            for action in state.actions or ():
                manager.actions.register(action.call, backend)
    steps: list[Step] = []

    def step(user: str | None, instance: FSMInstance) -> None:
        steps.append(Step(user, model[:], answered[:], configuration(instance)))
        model.clear()
        answered.clear()

    cid, _ = manager.start_conversation(case.definition, case.initial_context)
    opening[0] = False
    step(None, manager.get_instance(cid))
    for _ in range(turns):
        instance = manager.get_instance(cid)
        if instance.ended:
            break
        current[0] = instance.current_state
        message = draw(case.messages)
        with contextlib.suppress(LLMResponseError):  # a failed turn changes nothing; the next one goes on
            manager.process_message(cid, message)
        step(message, manager.get_instance(cid))
    return steps


def unreachable(reachable: frozenset[Configuration], steps: Sequence[Step]) -> list[Step]:
    """The steps that ended in a configuration the prover called unreachable."""
    return [s for s in steps if s.configuration not in reachable]


def found_yaml(case: Case, steps: Sequence[Step], bad: Step) -> str:
    """The definition as a YAML file, headed by comments giving the run that reached ``bad``."""
    lines = [
        "# The prover called this configuration unreachable; a hostile run reached it:",
        f"#   flow stack {list(bad.configuration[0])}, state {bad.configuration[1]!r}",
        f"# initial context: {case.initial_context}",
    ]
    for s in steps[: steps.index(bad) + 1]:
        lines.append(f"# - user: {s.user!r}")
        lines += [f"#   model: {out!r}" for out in s.model]
        lines += [f"#   action: {out!r}" for out in s.actions]
        lines.append(f"#   -> {list(s.configuration[0])} {s.configuration[1]}")
    if case.subflows:
        lines.append(f"# its sub-flow {_prove_defs.SUBFLOW}: benchmarks/_prove_defs.py subflow_document()")
    elif case.definition.flows:
        lines.append("# its sub-flow 'again' runs this same definition")
    document = case.definition.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return "\n".join(lines) + "\n" + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
