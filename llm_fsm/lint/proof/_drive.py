"""Running the engine's own turn on a chosen model reply: the checker's performer.

The prover does not model the engine; it runs it. ``run_opening`` and ``run_turn`` are generators that yield their
effects, so the checker answers them itself: the model's turn call with the reply being explored, a regenerated
reply with a fixed sentence, hooks with nothing (hooks are opaque: documented in docs/prove.md), an action with
the result being explored, a sub-flow with its definition. Whatever the engine decides is the transition the
checker records, so a proof is about the code that runs conversations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.definition._retrieval import ON_ERROR_CONTINUE
from llm_fsm.engine._actions import ActionResult, CallAction
from llm_fsm.engine._context import apply_update
from llm_fsm.engine._effects import AwaitMessage, CallHook, CallLLM, Decided, LoadDefinition, LoadFlow
from llm_fsm.engine._instance import Conversation, FSMContext, FSMInstance
from llm_fsm.engine._prompts import PromptBuilder
from llm_fsm.engine._records import LLMResponse, LLMResult, StateTransition
from llm_fsm.engine._retrieval import CallRetriever, RetrievalResult
from llm_fsm.engine._turn import EngineConfig, TurnGenerator, TurnOutcome, run_opening, run_turn
from llm_fsm.engine._values import KeyPolicy
from llm_fsm.errors import FSMError
from llm_fsm.lint.proof._cells import Abstraction

#: what the checker's model says when the engine asks it to write the reply again (only its words change)
REPLY = "ok"
#: what a user says in a turn that grounds nothing (a neutral answer)
NEUTRAL = "ok"

Resolve = Callable[[FlowDeclaration, FSMDefinition], FSMDefinition]


@dataclass(frozen=True, slots=True)
class Move:
    """One reply the explored model gives to one user message, and the answers the explored backend gives."""

    user: str = NEUTRAL
    intent: str = "continue"
    target: str = ""
    flow: str | None = None
    update: tuple[tuple[str, Any], ...] = ()
    actions: tuple[tuple[str, int], ...] = ()
    """Action name → which of its explored results it gives this turn (0 when not named)."""
    application: bool = False
    """Not a turn: the application writes ``update`` between turns (``update_context``), as it may at any time."""

    def script(self) -> dict[str, Any]:
        """The model's answer in a conversation script's form (docs/testing.md, "The model's answers")."""
        answer: dict[str, Any] = {}
        if self.target:
            answer["target_state"] = self.target
        if self.update:
            answer["context_update"] = dict(self.update)
        if self.intent != "continue":
            answer["intent"] = self.intent
        if self.flow:
            answer["flow"] = self.flow
        answer["message"] = REPLY
        return answer


@dataclass
class Outcome:
    """What the engine made of a move: the instance after it, or the error that failed the turn (nothing kept)."""

    instance: FSMInstance
    verdict: str = ""
    moved_to: tuple[str, ...] = ()
    """The states the turn's move and chained steps entered, in order."""
    error: str | None = None
    stubs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each action called, with the result it was given (a script's stub)."""
    options: dict[str, int] = field(default_factory=dict)
    """How many results each called action could have given (the explorer branches on them)."""


class _Unworded(PromptBuilder):
    """The engine's prompt builder less the prompt text: the checker's model reads no prompt, and building one is
    a tenth of a turn's cost. Everything the decision reads (intents, flows, reply schema) is the builder's own."""

    def build_system_prompt(self, instance: FSMInstance, state: Any, **kwargs: Any) -> str:
        return ""


class Driver:
    """Answers the engine's effects for one definition tree (the root and the sub-flows it calls)."""

    def __init__(self, root: FSMDefinition, resolve: Resolve | None, config: EngineConfig) -> None:
        self.root = root
        self.resolve = resolve
        self.config = config
        self.builder: PromptBuilder = _Unworded()
        self.flows: dict[str, FSMDefinition] = {"root": root}
        self.abstractions: dict[str, Abstraction] = {"root": Abstraction(root)}
        self.unresolved: list[str] = []
        self._application: dict[str, tuple[str, ...]] = {}

    def definition(self, fsm_id: str) -> FSMDefinition:
        return self.flows.get(fsm_id, self.root)

    def abstraction(self, fsm_id: str) -> Abstraction:
        found = self.abstractions.get(fsm_id)
        if found is None:
            found = self.abstractions[fsm_id] = Abstraction(self.definition(fsm_id))
        return found

    # --- running -------------------------------------------------------------------------------------------

    def open(self) -> Outcome:
        root = self.root
        instance = FSMInstance(
            fsm_id="root",
            current_state=root.initial_state,
            context=FSMContext(conversation=Conversation()),
            persona=root.persona,
            flow_name=root.name,
            definition_hash=root.content_hash,
        )
        generator = run_opening(root, instance, self.builder, self.config)
        return self._run(generator, instance, Move(), {})

    def step(self, before: FSMInstance, move: Move) -> Outcome:
        instance = before.copy_for_turn()
        definition = self.definition(instance.fsm_id)
        generator = run_turn(definition, instance, move.user, self.builder, self.config)
        return self._run(generator, instance, move, dict(move.actions))

    def write(self, before: FSMInstance, move: Move) -> Outcome:
        """The application's write between turns, as ``FSMManager.update_context`` makes it: checked against the
        declarations, no turn, no model."""
        instance = before.copy_for_turn()
        definition = self.definition(instance.fsm_id)
        policy = KeyPolicy(definition) if definition.context_keys else None
        changes = apply_update(instance.context.data, dict(move.update), source="application", policy=policy)
        refused = [c for c in changes if not c.applied]
        if refused:
            return Outcome(instance, error=f"the application's write was refused: {refused[0].reason}")
        return Outcome(instance, verdict="application")

    def application_keys(self, fsm_id: str) -> tuple[str, ...]:
        """Keys the application provides (declared as its own, or writable only by it and written by no action):
        they may arrive at any time."""
        found = self._application.get(fsm_id)
        if found is None:
            definition = self.definition(fsm_id)
            abstraction = self.abstraction(fsm_id)
            outputs = {path for s in definition.states.values() for a in s.actions or () for path in a.output_paths}
            keys = set(definition.provided_context_keys)
            for key in abstraction.keys:
                declaration = abstraction.declaration(key)
                if declaration is not None and declaration.writable_by == "application" and key not in outputs:
                    keys.add(key)
            found = self._application[fsm_id] = tuple(k for k in abstraction.keys if k in keys)
        return found

    def _run(self, generator: TurnGenerator, instance: FSMInstance, move: Move, chosen: dict[str, int]) -> Outcome:
        outcome = Outcome(instance)
        try:
            answer: Any = None
            while True:
                effect = generator.send(answer)
                answer = self._answer(effect, move, chosen, outcome)
        except StopIteration as stop:
            result: TurnOutcome = stop.value
            record = result.record
            outcome.verdict = record.verdict.kind if record is not None else "opened"
            if record is not None:
                steps = [record.verdict, *record.chained]
                outcome.moved_to = tuple(v.target_state for v in steps if v.moved)
        except FSMError as error:
            outcome.error = f"{type(error).__name__}: {error}"
        return outcome

    def _answer(self, effect: Any, move: Move, chosen: Mapping[str, int], outcome: Outcome) -> Any:
        if isinstance(effect, CallLLM):
            request = effect.request
            if request.purpose == "turn":
                response = LLMResponse(
                    transition=StateTransition(target_state=move.target, context_update=dict(move.update)),
                    message=REPLY,
                    intent=move.intent,  # type: ignore[arg-type]
                    flow=move.flow,
                )
            else:
                response = LLMResponse(transition=StateTransition(target_state=""), message=REPLY)
            return LLMResult(response=response, response_format="prover")
        if isinstance(effect, CallAction):
            return self._action(effect, chosen, outcome)
        if isinstance(effect, CallRetriever):
            return self._retrieval(effect, chosen, outcome)
        if isinstance(effect, LoadFlow):
            return self._flow(effect.declaration, effect.parent)
        if isinstance(effect, LoadDefinition):
            return self.definition(effect.fsm_id)
        if isinstance(effect, (CallHook, Decided, AwaitMessage)):
            return None
        raise TypeError(f"the prover cannot answer {type(effect).__name__}")  # pragma: no cover - a new effect

    def _flow(self, declaration: FlowDeclaration, parent: FSMDefinition) -> tuple[str, FSMDefinition]:
        fsm_id = f"flow:{declaration.name}"
        if fsm_id not in self.flows:
            if self.resolve is None:
                self.unresolved.append(declaration.name)
                raise _NoFlow(f"sub-flow {declaration.name!r} cannot be loaded without a resolver")
            try:
                child = self.resolve(declaration, parent)
            except Exception as error:  # a resolver failure is lint's FSM019/FSM020; here the flow is unknown
                self.unresolved.append(declaration.name)
                raise _NoFlow(f"sub-flow {declaration.name!r} does not load: {error}") from error
            self.flows[fsm_id] = child
            outputs = tuple((declaration.outputs or {}).values())
            self.abstractions[fsm_id] = Abstraction(child, outputs)
        return fsm_id, self.flows[fsm_id]

    # --- actions -------------------------------------------------------------------------------------------

    def action_results(self, fsm_id: str, name: str) -> list[dict[str, Any] | None]:
        """What an action may answer: each declared output with each of its key's representatives (zipped, so
        every cell of every output is given once), then a failure when ``on_error`` routes somewhere."""
        definition = self.definition(fsm_id)
        abstraction = self.abstraction(fsm_id)
        declarations = [a for s in definition.states.values() for a in s.actions or () if a.call == name]
        results: list[dict[str, Any] | None] = []
        routes = False
        for declaration in declarations:
            outputs = declaration.outputs or {}
            choices = {path: [v.value for v in abstraction.values.get(path, ())] for path in outputs}
            width = max((len(v) for v in choices.values()), default=1) or 1
            for index in range(width):
                result = {
                    field: values[index % len(values)] for path, field in outputs.items() if (values := choices[path])
                }
                if result not in results:
                    results.append(result)
            routes = routes or declaration.on_error != "fail"
        if not results:
            results.append({})
        if routes:
            results.append(None)
        return results

    def _action(self, effect: CallAction, chosen: Mapping[str, int], outcome: Outcome) -> ActionResult:
        name = effect.call.name
        results = self.action_results(outcome.instance.fsm_id, name)
        outcome.options[name] = len(results)
        result = results[min(chosen.get(name, 0), len(results) - 1)]
        if result is None:
            outcome.stubs[name] = {"raise": "the prover's failure"}
            return ActionResult(error="the prover's failure")
        outcome.stubs[name] = result
        return ActionResult(value=dict(result))

    def _retrieval(self, effect: CallRetriever, chosen: Mapping[str, int], outcome: Outcome) -> RetrievalResult:
        """Snippets never decide a turn (the model reads them), so the prover answers none; a failure is a second
        answer when ``on_error`` names a state, as that moves the conversation."""
        definition = self.definition(outcome.instance.fsm_id)
        declared = definition.retrieve_for(effect.state)
        if declared is None or declared.on_error == ON_ERROR_CONTINUE:
            return RetrievalResult()
        key = f"retrieve:{effect.name}"
        outcome.options[key] = 2
        return RetrievalResult(error="the prover's failure") if chosen.get(key, 0) else RetrievalResult()


class _NoFlow(FSMError):
    """A sub-flow the checker cannot load: the move that starts it is not explored (its property is unknown)."""


__all__ = ["NEUTRAL", "REPLY", "Driver", "Move", "Outcome", "Resolve"]
