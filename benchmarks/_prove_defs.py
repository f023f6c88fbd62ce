"""Generated form-filling definitions of any size, for timing ``llm_fsm.lint.prove`` (``benchmarks/prove.py``).

The prover's cost grows with what a definition lets the model and the user do,
not with its line count, so the generated definitions have the shapes real
forms have rather than a uniform graph: a welcome state, sections of states
that each collect one declared key (an enum, an integer with bounds, a boolean
the user confirms), guarded branches comparing those keys with constants (to a
declined end, to a person, or skipping a step), a way back to the previous
question, a read-back at the end of each section (a ``confirmation`` block, or
a ``confirmed`` boolean the read-back asks for), a few terminal states and a
handoff state; some states call a backend action whose boolean result (written
by the application) gates the way on, with the handoff as its error route.
``subflow=True`` adds a sub-flow the model may start from any state (a
reference lookup whose result comes back as an application-written key).

Deterministic: the same ``states`` and ``seed`` always give the same document.
Every definition loads (``FSMDefinition.model_validate``) and lints without
errors (``tests/test_prove_benchmark.py`` checks both).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition

#: states every generated definition has besides its sections
SPECIAL = ("welcome", "done", "declined", "agent_handoff")
#: the fewest states a generated definition can have: the specials and one section of a question and its read-back
MIN_STATES = len(SPECIAL) + 2
#: what the sub-flow is called, in the parent's declaration and as the resolver's key
SUBFLOW = "lookup_reference"

_ENUMS = (
    ("plan", ["basic", "standard", "premium"]),
    ("contact_channel", ["email", "phone", "post"]),
    ("size", ["small", "medium", "large", "family"]),
    ("delivery", ["standard", "express", "pickup"]),
    ("country", ["norway", "sweden", "denmark", "finland"]),
)
_INTEGERS = (
    ("seats", 1, 12),
    ("age", 0, 120),
    ("nights", 1, 30),
    ("quantity", 1, 50),
    ("years_at_address", 0, 80),
)
_BOOLEANS = ("accepts_terms", "has_account", "wants_newsletter", "is_business", "needs_invoice")


class _Builder:
    """One definition being generated: its keys, its states, and the random draws that shape them."""

    def __init__(self, states: int, seed: int, subflow: bool) -> None:
        self.rng = random.Random(seed)
        self.total = states
        self.subflow = subflow
        self.keys: dict[str, dict[str, Any]] = {}
        self.states: dict[str, dict[str, Any]] = {}
        self.serial = 0

    # --- keys ------------------------------------------------------------------------------------

    def new_key(self) -> tuple[str, str]:
        """A declared key for one question: (name, kind) with kind enum, integer or boolean."""
        self.serial += 1
        kind = self.rng.choices(["enum", "integer", "boolean"], weights=[4, 4, 2])[0]
        if kind == "enum":
            base, values = _ENUMS[self.rng.randrange(len(_ENUMS))]
            name = f"{base}_{self.serial}"
            self.keys[name] = {"type": "string", "enum": list(values), "description": f"The {base} chosen"}
        elif kind == "integer":
            base, low, high = _INTEGERS[self.rng.randrange(len(_INTEGERS))]
            name = f"{base}_{self.serial}"
            self.keys[name] = {
                "type": "integer",
                "minimum": low,
                "maximum": high,
                "description": f"The {base.replace('_', ' ')}, a whole number from {low} to {high}",
            }
        else:
            base = _BOOLEANS[self.rng.randrange(len(_BOOLEANS))]
            name = f"{base}_{self.serial}"
            self.keys[name] = {"type": "boolean", "description": f"true only when the user says yes ({base})"}
        return name, kind

    # --- states ----------------------------------------------------------------------------------

    @staticmethod
    def state(sid: str, purpose: str, transitions: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {"id": sid, "description": purpose, "purpose": purpose, "transitions": transitions, **extra}

    @staticmethod
    def to(target: str, description: str, priority: int, *conditions: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"target_state": target, "description": description, "priority": priority}
        if conditions:
            out["conditions"] = list(conditions)
        return out

    @staticmethod
    def cond(description: str, keys: list[str], logic: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {"description": description, "requires_context_keys": keys}
        if logic is not None:
            out["logic"] = logic
        return out

    def question(self, sid: str, nxt: str, previous: str | None, skip_to: str | None) -> list[str]:
        """A state asking for one key; returns the keys it collects (its action's result included)."""
        key, kind = self.new_key()
        decl = self.keys[key]
        rng = self.rng
        transitions: list[dict[str, Any]] = []
        priority = 1
        extra: dict[str, Any] = {"required_context_keys": [key]}
        collected = [key]
        gate: dict[str, Any] | None = None
        if rng.random() < 0.15:  # a backend check of the answer, the application writing its verdict
            ok = f"{key}_ok"
            self.keys[ok] = {"type": "boolean", "writable_by": "application", "description": f"{key} checked"}
            extra["actions"] = [
                {
                    "call": f"check_{key}",
                    "when": "collected",
                    "inputs": {"value": key},
                    "outputs": {ok: "ok"},
                    "on_error": "agent_handoff",
                    "timeout_s": 5,
                }
            ]
            gate = {"==": [{"var": ok}, True]}
            transitions.append(
                self.to(
                    "agent_handoff",
                    "The check refused the answer",
                    priority,
                    self.cond("the check said no", [ok], {"==": [{"var": ok}, False]}),
                )
            )
            priority += 1
            collected.append(ok)
        if kind == "integer" and rng.random() < 0.5:
            low, high = decl["minimum"], decl["maximum"]
            cut = rng.randint(low + 1, high - 1)
            target = rng.choice(["declined", "agent_handoff"] + ([skip_to] if skip_to else []))
            transitions.append(
                self.to(
                    target,
                    f"{key} above {cut}",
                    priority,
                    self.cond(f"{key} > {cut}", [key], {">": [{"var": key}, cut]}),
                )
            )
            priority += 1
        elif kind == "enum" and rng.random() < 0.5:
            value = rng.choice(decl["enum"])
            target = rng.choice(["agent_handoff"] + ([skip_to] if skip_to else ["declined"]))
            transitions.append(
                self.to(
                    target,
                    f"{key} is {value}",
                    priority,
                    self.cond(f"{key} is {value}", [key], {"==": [{"var": key}, value]}),
                )
            )
            priority += 1
        elif kind == "boolean" and rng.random() < 0.6:
            transitions.append(
                self.to(
                    "declined",
                    f"the user said no to {key}",
                    priority,
                    self.cond(f"{key} is false", [key], {"==": [{"var": key}, False]}),
                )
            )
            priority += 1
            gate = {"and": [gate, {"==": [{"var": key}, True]}]} if gate else {"==": [{"var": key}, True]}
        main = self.cond(f"{key} is given", [key, *collected[1:]], gate)
        transitions.append(self.to(nxt, f"{key} is known", priority, main))
        priority += 1
        if previous is not None and rng.random() < 0.2:
            transitions.append(self.to(previous, "The user wants to change the previous answer", priority))
        self.states[sid] = self.state(sid, f"Ask for {key}", transitions, **extra)
        return collected

    def read_back(self, sid: str, nxt: str, first: str, keys: list[str], section: int) -> None:
        """The section's read-back: a confirmation block, or a ``confirmed`` boolean the state asks for."""
        user_keys = [k for k in keys if self.keys[k].get("writable_by") != "application"]
        if self.rng.random() < 0.6:
            self.states[sid] = self.state(
                sid,
                f"Read section {section} back and ask the user to confirm",
                [
                    self.to(nxt, "The user confirmed", 1, self.cond("every answer is given", user_keys)),
                    self.to(first, "The user wants to change an answer", 2),
                ],
                confirmation={"keys": user_keys, "on_yes": nxt, "on_no": first},
            )
            return
        confirmed = f"confirmed_{section}"
        self.keys[confirmed] = {
            "type": "boolean",
            "description": "true only when the user agrees the answers are right",
        }
        self.states[sid] = self.state(
            sid,
            f"Read section {section} back and ask whether it is right",
            [
                self.to(
                    nxt,
                    "The user agreed",
                    1,
                    self.cond("the user agreed", [confirmed], {"==": [{"var": confirmed}, True]}),
                ),
                self.to(first, "The user wants to change an answer", 2),
            ],
            required_context_keys=[confirmed],
        )

    def build(self) -> dict[str, Any]:
        chain = self.total - len(SPECIAL)
        sections: list[int] = []
        while chain > 0:
            size = min(chain, self.rng.randint(4, 8))
            if chain - size == 1:  # a section is at least a question and its read-back
                size += 1
            sections.append(size)
            chain -= size
        names = [[f"q{si}_{i}" for i in range(size - 1)] + [f"review_{si}"] for si, size in enumerate(sections)]
        flat = [sid for section in names for sid in section]
        self.states["welcome"] = self.state(
            "welcome",
            "Greet the user and ask whether to start the form",
            [
                self.to(flat[0], "The user wants to start", 1),
                self.to("agent_handoff", "The user asks for a person", 2),
                self.to("declined", "The user does not want to fill the form in", 3),
            ],
        )
        position = 0
        for si, section in enumerate(names):
            collected: list[str] = []
            for i, sid in enumerate(section[:-1]):
                nxt = flat[position + 1]
                skip = flat[position + 2] if position + 2 < len(flat) and i + 2 < len(section) else None
                collected += self.question(sid, nxt, section[i - 1] if i else None, skip)
                position += 1
            nxt = flat[position + 1] if position + 1 < len(flat) else "done"
            self.read_back(section[-1], nxt, section[0], collected, si)
            position += 1
        self.states["done"] = self.state("done", "Thank the user: the form is complete", [])
        self.states["declined"] = self.state("declined", "Explain kindly that the request cannot go ahead", [])
        self.states["agent_handoff"] = self.state(
            "agent_handoff", "Tell the user a colleague takes over now", [], handoff=True
        )
        document: dict[str, Any] = {
            "name": f"generated form {self.total}",
            "description": "A generated form-filling definition (benchmarks/_prove_defs.py)",
            "initial_state": "welcome",
            "version": "3.0",
            "context_keys": self.keys,
            "additional_keys": False,
            "states": self.states,
        }
        if self.subflow:
            self.keys["reference"] = {
                "type": "string",
                "pattern": "^REF-[0-9]+$",
                "writable_by": "application",
                "description": "The reference the lookup sub-flow found",
            }
            document["flows"] = [
                {
                    "name": SUBFLOW,
                    "definition": f"{SUBFLOW}.yaml",
                    "mode": "call",
                    "description": "The user wants to look up an earlier request's reference",
                    "outputs": {"reference": "reference"},
                }
            ]
        return document


def generate(states: int, *, seed: int = 0, subflow: bool = False) -> dict[str, Any]:
    """The document of a form of exactly ``states`` states (at least ``MIN_STATES``)."""
    if states < MIN_STATES:
        raise ValueError(f"a generated form has at least {MIN_STATES} states")
    document = _Builder(states, seed, subflow).build()
    assert len(document["states"]) == states
    return document


def subflow_document() -> dict[str, Any]:
    """The sub-flow ``subflow=True`` declares: ask for a reference, found or not found."""
    return {
        "name": SUBFLOW,
        "description": "Looks up the reference of an earlier request",
        "initial_state": "ask_reference",
        "version": "3.0",
        "context_keys": {
            "reference": {
                "type": "string",
                "pattern": "^REF-[0-9]+$",
                "description": "The reference, REF- and digits, as the user said it",
            },
            "found": {"type": "boolean", "writable_by": "application", "description": "Whether the lookup found it"},
        },
        "additional_keys": False,
        "states": {
            "ask_reference": {
                "id": "ask_reference",
                "description": "Asking for the reference",
                "purpose": "Ask for the reference of the earlier request",
                "required_context_keys": ["reference"],
                "actions": [
                    {
                        "call": "find_reference",
                        "when": "collected",
                        "inputs": {"reference": "reference"},
                        "outputs": {"found": "found"},
                        "on_error": "not_found",
                    }
                ],
                "transitions": [
                    {
                        "target_state": "found",
                        "description": "The reference was found",
                        "priority": 1,
                        "conditions": [
                            {
                                "description": "the lookup found it",
                                "requires_context_keys": ["reference", "found"],
                                "logic": {"==": [{"var": "found"}, True]},
                            }
                        ],
                    },
                    {"target_state": "not_found", "description": "The user gives up", "priority": 2},
                ],
            },
            "found": {
                "id": "found",
                "description": "Found",
                "purpose": "Say the reference was found",
                "transitions": [],
            },
            "not_found": {
                "id": "not_found",
                "description": "Not found",
                "purpose": "Say the reference could not be found",
                "transitions": [],
            },
        },
    }


def definition(states: int, *, seed: int = 0, subflow: bool = False) -> FSMDefinition:
    """``generate(...)`` loaded as the engine loads a definition."""
    return FSMDefinition.model_validate(generate(states, seed=seed, subflow=subflow))


def resolver() -> Callable[[FlowDeclaration, FSMDefinition], FSMDefinition]:
    """The sub-flow resolver for generated definitions: the lookup sub-flow, loaded once."""
    sub = FSMDefinition.model_validate(subflow_document())

    def resolve(declaration: FlowDeclaration, parent: FSMDefinition) -> FSMDefinition:
        if declaration.name != SUBFLOW:
            raise LookupError(f"no generated sub-flow {declaration.name!r}")
        return sub

    return resolve
