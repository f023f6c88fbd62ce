"""The definition language: what an FSM file is.

These pydantic models are the single source of truth for the format. The JSON
Schema in ``schemas/fsm_definition.schema.json`` is generated from them (and a
test keeps the two equal), so every ``description=`` below is what an editor
shows while an author types.

Unknown fields are kept, not rejected: files written for the original LLM-FSM
carry fields it ignored (``function_handlers``), and ``fsm-lint`` reports them
as warnings rather than refusing the file.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    field_validator,
    model_validator,
)

from llm_fsm.definition._actions import ActionDeclaration
from llm_fsm.definition._global import GlobalTransitions
from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.definition._languages import TAG_PATTERN, LanguageTag, Text, is_tag
from llm_fsm.definition._migrations import Migrations
from llm_fsm.definition._retrieval import RetrieveDeclaration
from llm_fsm.definition._timers import TimerEntry
from llm_fsm.definition._wording import Say
from llm_fsm.errors import StateNotFoundError
from llm_fsm.logic._guards import Guard, compile_guard

SUPPORTED_VERSIONS = ("3.0",)

_HASHED_WHEN_SET = (
    "migrations",
    "responses",
    "languages",
    "default_language",
    "language_key",
    "global_transitions",
    "state_groups",
    "retrieve",
)
"""Top-level fields added after versions were pinned: left out of ``content_hash`` while unset."""

_MAX_DECLARED_DEPTH = 32
"""Dot-path levels searched for a declared parent (values cannot nest deeper: engine MAX_VALUE_DEPTH)."""
DEFAULT_PRIORITY = 100

#: JSON Schema dialect and id of the generated schema
SCHEMA_ID = "https://llm-fsm.dev/schemas/fsm_definition.schema.json"


def _json_integer(value: Any) -> Any:
    # Lax int would take "5" and true; JSON Schema's integer does not, and the two must agree.
    if isinstance(value, (bool, str)):
        raise ValueError("must be an integer")
    if isinstance(value, float) and value.is_integer():
        return int(value)  # JSON Schema's integer is any whole number; pydantic's float path stops at 64 bits
    return value


#: an integer as JSON Schema means it: 5 and 5.0, never "5" or true
JsonInt = Annotated[int, BeforeValidator(_json_integer)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, validate_default=False)

    @property
    def unknown_fields(self) -> dict[str, Any]:
        """Fields the format does not define (kept so old files load; lint warns)."""
        return dict(self.__pydantic_extra__ or {})


class TransitionCondition(_Model):
    """One condition of a transition; all conditions of a transition must hold."""

    description: str = Field(description="What this condition means, for people and for the model.")
    requires_context_keys: list[str] | None = Field(
        default=None,
        description=(
            "Context keys (dot paths allowed) that must be present and neither null nor empty "
            "for the condition to hold."
        ),
    )
    logic: Any = Field(
        default=None,
        description=(
            "A JsonLogic rule evaluated against the context; the condition holds when it is truthy. "
            "Each and/or clause that reads a context key missing without a default is false."
        ),
    )

    @model_validator(mode="after")
    def _compile(self) -> TransitionCondition:
        # Checked at load time: unknown operators fail here, not at run time (clauses compile when first judged).
        if self.logic is not None:
            self.__dict__["compiled"] = compile_guard(self.logic)
        return self

    @functools.cached_property
    def compiled(self) -> Guard | None:
        """The rule, checked at load time, as a guard (see ``llm_fsm.logic``), or None without logic.

        A cached property, not a private attribute: pydantic's private-attribute
        lookup costs microseconds, and guards are read on every turn.
        """
        return compile_guard(self.logic) if self.logic is not None else None


class Transition(_Model):
    """A declared way out of a state. Only declared transitions can ever happen."""

    target_state: str = Field(description="Id of the state this transition leads to.")
    description: str = Field(description="When this transition should be taken; shown to the model.")
    conditions: list[TransitionCondition] | None = Field(
        default=None,
        description=(
            "Conditions that must all hold. A transition with conditions is guarded: it fires on its "
            "own when they hold. Without conditions it is a judgment transition only the model can choose."
        ),
    )
    priority: JsonInt = Field(
        default=DEFAULT_PRIORITY,
        description="Lower numbers win when several transitions are eligible (default 100).",
    )
    say: Text | Say | None = Field(
        default=None,
        description=(
            "Approved wording said when the turn arrives by this transition (the last step, after chaining); it "
            "wins over the target state's say. Same forms as a state's say."
        ),
    )
    refusal: Text | Say | None = Field(
        default=None,
        description=(
            "Approved wording said when the engine refuses the model's proposed move along this transition "
            "(its conditions do not hold, or a confirmation step has no yes) and the conversation stays."
        ),
    )

    @property
    def is_guarded(self) -> bool:
        return bool(self.conditions)


def _unset_wording(state: State) -> dict[str, Any]:
    """The approved-wording (and retrieval) fields of a state and of its transitions that are unset, as a
    ``model_dump`` exclusion: a definition that does not use them hashes as it did before they existed."""
    unset: dict[str, Any] = {"say": True} if state.say is None else {}
    if state.retrieve is None:  # retrieval, like wording, came after versions were pinned
        unset["retrieve"] = True
    transitions = {
        index: fields
        for index, transition in enumerate(state.transitions or ())
        if (fields := {name: True for name in ("say", "refusal") if getattr(transition, name) is None})
    }
    if transitions:
        unset["transitions"] = transitions
    return unset


class FlowDeclaration(_Model):
    """A sub-flow this state (or, at the top level, every state) may start.

    ``call`` pauses the current flow and resumes it where it was when the
    sub-flow reaches a terminal state; ``link`` hands the conversation over and
    never returns. The model asks for it by name; the engine decides, as for
    transitions.
    """

    name: str = Field(description="Name the model uses to ask for this sub-flow.")
    definition: str = Field(
        description="Definition id or path of the sub-flow; a relative path is resolved from this file's folder."
    )
    mode: Literal["call", "link"] = Field(default="call", description="call: returns here when done; link: hands over.")
    description: str = Field(description="When this sub-flow should be started; shown to the model.")
    inputs: dict[str, str] | None = Field(
        default=None, description="Sub-flow key ← this flow's key: context the sub-flow starts with."
    )
    outputs: dict[str, str] | None = Field(
        default=None, description="This flow's key ← sub-flow key: results copied back when the sub-flow completes."
    )
    conditions: list[TransitionCondition] | None = Field(
        default=None, description="Conditions that must hold for the sub-flow to start (as for transitions)."
    )


class Confirmation(_Model):
    """Marks a state as a confirmation step: the user says yes, no, or changes a value."""

    keys: list[str] | None = Field(
        default=None, description="Keys read back to the user for confirmation (default: every collected key)."
    )
    on_yes: str = Field(description="State to move to when the user confirms; must be a declared transition.")
    on_no: str | None = Field(
        default=None,
        description=(
            'What a plain "no" does: "cancel" cancels the flow, a state id takes that declared transition, '
            "null stays and asks what to change."
        ),
    )
    changeable_keys: list[str] | None = Field(
        default=None,
        description=(
            "Keys the user may change at this step (dot paths cover what is inside them); a plain no asks what "
            "to change, naming them, and values written to other keys here are refused (rule not_changeable). "
            "null: any key may change."
        ),
    )


class State(_Model):
    """A step of the conversation: what it is for, what to collect, where it may go."""

    id: str = Field(description="Unique state id; must equal the key of this state in `states`.")
    description: str = Field(description="What this state is.")
    purpose: str = Field(description="What the assistant should achieve in this state.")
    transitions: list[Transition] = Field(
        default_factory=list,
        description="Declared transitions out of this state. None means the state is terminal.",
        json_schema_extra={"type": ["array", "null"]},  # null is read as [] (see _null_transitions)
    )
    required_context_keys: list[str] | None = Field(
        default=None,
        description="Keys the assistant should collect from the user in this state.",
    )
    instructions: str | None = Field(default=None, description="Extra instructions for the model in this state.")
    example_dialogue: list[dict[str, str]] | None = Field(
        default=None,
        description='Example exchanges, e.g. [{"user": "hi"}, {"assistant": "Hello! What is your name?"}].',
    )
    knowledge: str | None = Field(
        default=None, description="Facts the assistant may use to answer side questions in this state."
    )
    flows: list[FlowDeclaration] | None = Field(
        default=None, description="Sub-flows the model may start from this state."
    )
    confirmation: Confirmation | None = Field(
        default=None, description="Makes this state a confirmation step (yes / no / change a value)."
    )
    retrieve: RetrieveDeclaration | None = Field(
        default=None,
        description=(
            "Snippets of the team's documents the engine looks up before the model answers in this state (replaces "
            "the definition's retrieve here): put into the prompt as data, with ids the reply may cite."
        ),
    )
    actions: list[ActionDeclaration] | None = Field(
        default=None,
        description=(
            "Backend calls the engine makes in this state (registered by the application): when, with which "
            "context values, where the results go, and what a failure does. The model never calls them."
        ),
    )
    auto_advance: StrictBool = Field(
        default=True,
        description=(
            "When a turn reaches this state and one of its guarded transitions already holds, the engine follows "
            "it in the same turn (see EngineConfig.max_chained_transitions). false: always stop here for a turn."
        ),
    )
    handoff: StrictBool = Field(
        default=False,
        description=(
            "Reaching this state hands the conversation to a person: the assistant's reply for it is still given "
            "(e.g. 'I am connecting you with a colleague'), then turns only record the user's messages until "
            "an operator resumes the bot."
        ),
    )

    say: Text | Say | None = Field(
        default=None,
        description=(
            "Approved wording: the text the assistant says in this state, with {key} placeholders from the context "
            "(or {response: id}, mode: strict|guided, reveal: [sensitive keys]). Strict by default: the reply is "
            "exactly the filled text. The text may be one per language: {en: ..., de: ...}."
        ),
    )

    after: list[TimerEntry] | None = Field(
        default=None,
        description=(
            "Timers: what happens when nobody writes for a while. Each entry: in (a duration), since (entered or "
            "last_message), and one of say, instructions (a nudge the model writes), go (a declared transition's "
            "target) or action. Armed while the conversation is in this state; leaving it drops them."
        ),
    )

    @field_validator("transitions", mode="before")
    @classmethod
    def _null_transitions(cls, value: Any) -> Any:
        return [] if value is None else value

    @property
    def is_terminal(self) -> bool:
        """A terminal state has no outgoing transitions (a self-loop is not terminal)."""
        return not self.transitions


class GlobalTransition(Transition):
    """A transition declared once for many states ("talk to a person" from anywhere).

    It is a candidate in every state of its scope that is not terminal and is not its own target, alongside the
    state's own transitions: one list, priority decides, and the state's own transition wins a tie (it comes
    first). A terminal state stays terminal (no own transitions), so a global transition never leaves it.
    """

    from_states: list[str] | None = Field(
        default=None,
        description=(
            "Only these states (with from_groups: the states of both). Neither: every state of this definition."
        ),
    )
    from_groups: list[str] | None = Field(
        default=None, description="Only the states of these groups (names in `state_groups`)."
    )
    except_states: list[str] | None = Field(
        default=None, description="States where this transition does not apply, whatever the scope says."
    )


class StateGroup(_Model):
    """A named set of states, the box a designer draws around them; global transitions may be scoped to it."""

    states: list[str] = Field(description="Ids of the states in this group.")
    description: str | None = Field(default=None, description="What these states have in common.")


class FSMDefinition(GlobalTransitions, _Model):
    """A whole conversation: its states, where it starts, and who the assistant is."""

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        json_schema_extra={"$id": SCHEMA_ID},
    )

    name: str = Field(description="Name of this FSM.")
    description: str = Field(description="What this conversation does.")
    initial_state: str = Field(description="Id of the state every conversation starts in.")
    version: str = Field(default="3.0", description='Format version; "3.0" is supported.')
    persona: str | None = Field(default=None, description="Who the assistant is and how it speaks.")
    states: dict[str, State] = Field(description="All states, keyed by their id.")
    application_context_keys: list[str] | None = Field(
        default=None,
        description=(
            "Context keys the application provides (initial_context or hooks) rather than the user. "
            "Conditions may read them without any state collecting them."
        ),
    )
    protected_context_keys: list[str] | None = Field(
        default=None,
        description=(
            "Context keys only the application may set; the model's updates to them are dropped "
            "and recorded. Also counted as provided by the application."
        ),
    )

    context_keys: dict[str, KeyDeclaration] | None = Field(
        default=None,
        description=(
            "Declared context keys: type, allowed values, format, bounds, who may write them, whether a value "
            "must be grounded in what the user said. Every write is checked against its declaration."
        ),
    )
    additional_keys: StrictBool = Field(
        default=True,
        description="Whether the model may write keys that are not declared in context_keys (default true).",
    )
    knowledge: str | None = Field(
        default=None, description="Facts (an FAQ) the assistant may use to answer side questions in any state."
    )
    flows: list[FlowDeclaration] | None = Field(
        default=None, description="Sub-flows the model may start from any state of this definition."
    )
    retrieve: RetrieveDeclaration | None = Field(
        default=None,
        description=(
            "Snippets of the team's documents the engine looks up before the model answers, in every state that "
            "does not declare its own retrieve."
        ),
    )
    cancellable: StrictBool = Field(
        default=True, description="Whether the user can cancel this flow (a sub-flow pops; the root: see on_cancel)."
    )
    on_cancel: Literal["end", "restart"] = Field(
        default="end",
        description=(
            "What a cancel at the root flow does: end the conversation as cancelled, or restart: go back to the "
            "initial state with the collected data cleared (keys the application provides are kept)."
        ),
    )
    confirm_cancel: StrictBool = Field(
        default=True,
        description=(
            "Ask the user to confirm a cancel that would end the conversation before ending it (the next confirm "
            "or cancel ends it, anything else carries on). false: a cancel at the root ends at once."
        ),
    )
    max_consecutive_digressions: JsonInt = Field(
        default=3, ge=0, description="Side questions answered in a row before the assistant steers back."
    )
    responses: dict[str, Text] | None = Field(
        default=None,
        description=(
            "Reusable approved texts by id, said by a state's `say: {response: id}` (each a string, or one per "
            "language)."
        ),
    )
    migrations: Migrations | None = Field(
        default=None,
        description=(
            "How conversations stored on the previous version move onto this one: states renamed or merged, keys "
            "renamed, defaults for keys they lack, sub-flows renamed (llm-fsm migrate; fsm-lint --previous)."
        ),
    )
    global_transitions: list[GlobalTransition] | None = Field(
        default=None,
        description=(
            "Transitions that apply in many states: every state (or those of from_states / from_groups) except "
            "terminal states, its own target and except_states. Same fields, guards, priorities and judgment rules "
            "as a state's transitions; the state's own transition wins a tie of priority. A sub-flow has its own."
        ),
    )
    state_groups: dict[str, StateGroup] | None = Field(
        default=None, description="Named groups of states, for scoping global transitions (from_groups)."
    )

    languages: list[str] | None = Field(
        default=None,
        min_length=1,
        json_schema_extra={"items": {"type": "string", "pattern": TAG_PATTERN}},
        description=(
            "The languages conversations of this definition are held in (BCP 47 tags: en, de, de-CH). Texts the "
            "user reads may then be written once per language ({en: ..., de: ...}); lint checks none is missing."
        ),
    )
    default_language: LanguageTag | None = Field(
        default=None,
        description=(
            "The language of a conversation started without one, and of a text missing in the conversation's "
            "language (default: the first of `languages`)."
        ),
    )
    language_key: str | None = Field(
        default=None,
        description=(
            "A context key whose value switches the conversation's language: when it holds one of `languages` "
            "(written by the model, the application or an operator), that language is the conversation's."
        ),
    )

    _source: str | None = PrivateAttr(default=None)

    @field_validator("languages")
    @classmethod
    def _language_tags(cls, languages: list[str] | None) -> list[str] | None:
        # one error for the list, whatever its length (lint validates lists of strings item by item for types only)
        wrong = [tag for tag in languages or () if not is_tag(tag)]
        if wrong:
            raise ValueError(f"not language tags (BCP 47, e.g. en, de, de-CH): {wrong[:5]!r}")
        return languages

    def retrieve_for(self, state_id: str) -> RetrieveDeclaration | None:
        """What ``state_id`` retrieves: its own ``retrieve``, else the definition's (None: nothing)."""
        state = self.states.get(state_id)
        return (state.retrieve if state else None) or self.retrieve

    def flows_for(self, state_id: str) -> list[FlowDeclaration]:
        """Sub-flows startable from ``state_id``: the state's own, then the definition-wide ones."""
        state = self.states.get(state_id)
        return [*((state.flows or []) if state else []), *(self.flows or [])]

    @property
    def source(self) -> str | None:
        """The file this definition was loaded from, when it came from a file (for relative sub-flow paths)."""
        return self._source

    def get_state(self, state_id: str) -> State:
        """The state with this id; raises StateNotFoundError when it is not declared."""
        try:
            return self.states[state_id]
        except KeyError:
            raise StateNotFoundError(f"state {state_id!r} is not declared in FSM {self.name!r}") from None

    @functools.cached_property
    def content_hash(self) -> str:
        """A stable hash of the definition, saved with each conversation to detect edits.

        Cached on first use (definitions are not edited in place after loading; a
        changed file is loaded as a new object).
        """
        # fields added since versions were pinned are left out while unset (no migrations block, no global
        # transitions or state groups, no approved wording on states or transitions, no languages): the hash stays
        # what it was before they existed, so conversations pinned to such a version do not all look changed
        exclude: dict[str, Any] = {name: True for name in _HASHED_WHEN_SET if getattr(self, name) is None}
        quiet = {state_id: unset for state_id, state in self.states.items() if (unset := _unset_wording(state))}
        if quiet:
            exclude["states"] = quiet
        for state_id, state in self.states.items():  # timers: left out while a state has none
            if state.after is None:
                exclude.setdefault("states", {}).setdefault(state_id, {})["after"] = True
        global_quiet = {
            index: fields
            for index, transition in enumerate(self.global_transitions or ())
            if (fields := {name: True for name in ("say", "refusal") if getattr(transition, name) is None})
        }
        if global_quiet:  # (unset wording is never hashed, on a global transition as on a state's own)
            exclude["global_transitions"] = global_quiet
        dumped = self.model_dump(mode="json", by_alias=True, exclude=exclude)
        canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    @property
    def language(self) -> str | None:
        """The default language: ``default_language``, else the first declared one (None: no languages declared)."""
        return self.default_language or (self.languages[0] if self.languages else None)

    @property
    def provided_context_keys(self) -> set[str]:
        """Keys the application promises to provide."""
        return set(self.application_context_keys or ()) | self.application_only_keys

    @functools.cached_property
    def application_only_keys(self) -> set[str]:
        """Keys the model may not write: ``protected_context_keys`` and keys declared ``writable_by: application``."""
        declared = {key for key, d in (self.context_keys or {}).items() if d.writable_by == "application"}
        return set(self.protected_context_keys or ()) | declared

    def declaration_for(self, path: str) -> tuple[str, KeyDeclaration] | None:
        """The declaration governing a dot path: its own, or the nearest declared parent's (an object key)."""
        keys = self.context_keys
        if not keys:
            return None
        if path in keys:
            return path, keys[path]
        if "." not in path:
            return None
        parts = path.split(".", _MAX_DECLARED_DEPTH)[:_MAX_DECLARED_DEPTH]  # bounded work on a hostile dotted key
        for end in range(len(parts) - 1, 0, -1):
            parent = ".".join(parts[:end])
            if parent in keys:
                return parent, keys[parent]
        return None

    def is_declared_path(self, path: str) -> bool:
        """Whether ``path`` is a declared key, inside one, or a parent of one (``{"a": {"b": 1}}`` for "a.b")."""
        keys = self.context_keys or {}
        return self.declaration_for(path) is not None or any(k.startswith(path + ".") for k in keys)


__all__ = [
    "ActionDeclaration",
    "Confirmation",
    "KeyDeclaration",
    "DEFAULT_PRIORITY",
    "Migrations",
    "RetrieveDeclaration",
    "FlowDeclaration",
    "FSMDefinition",
    "GlobalTransition",
    "SCHEMA_ID",
    "SUPPORTED_VERSIONS",
    "State",
    "StateGroup",
    "Transition",
    "TransitionCondition",
]
