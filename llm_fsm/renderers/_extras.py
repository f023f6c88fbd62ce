"""What a diagram shows beyond states and transitions: declared sub-flows, confirmation steps, actions and,
when asked, the prover's statuses.

The neutral ``definition.Graph`` holds states and transitions only; this reads
the rest from the same raw document, just as tolerantly (a malformed flow or
confirmation is left out, never an error), so ``llm-fsm graph`` still draws a
file that does not validate. Every renderer takes an optional ``Extras``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FlowLink:
    """A declared sub-flow: its name, file, mode, and the states that may start it (none: any state)."""

    index: int
    name: str
    definition: str
    mode: str  # "call" returns to the state that started it; "link" hands the conversation over
    description: str = ""
    sources: tuple[str, ...] = ()

    @property
    def from_any_state(self) -> bool:
        return not self.sources

    def label(self) -> str:
        return f"flow {self.name} ({self.mode}) {self.definition}"


@dataclass(frozen=True)
class ConfirmationMark:
    """A confirmation step: where yes goes, and what a plain no does."""

    state: str
    on_yes: str | None
    on_no: str | None

    def summary(self) -> str:
        yes = self.on_yes or "?"
        if self.on_no is None:
            no = "asks what to change"
        elif self.on_no == "cancel":
            no = "cancels"
        else:
            no = f"→ {self.on_no}"
        return f"confirmation: yes → {yes}, no {no}"


@dataclass(frozen=True)
class ActionMark:
    """A backend call a state declares: its name, when it runs, and where a failure goes."""

    call: str
    when: str
    on_error: str

    def summary(self) -> str:
        failure = "" if self.on_error == "fail" else f", on error → {self.on_error}"
        return f"⚙ {self.call} ({self.when}{failure})"


_SYMBOLS = {"failed": "✗", "unknown": "?", "proved": "✓"}


@dataclass(frozen=True)
class ProofMark:
    """One state's statuses under the prover's properties (``llm_fsm.lint.prove``): property → ``proved``,
    ``failed`` or ``unknown``. A diagram shows what failed and what could not be decided; "proved" only when
    every property was."""

    statuses: Mapping[str, str]

    def named(self, status: str) -> tuple[str, ...]:
        return tuple(name for name, value in self.statuses.items() if value == status)

    @property
    def status(self) -> str:
        """The worst of the state's statuses: ``failed``, else ``unknown``, else ``proved``."""
        return next((s for s in ("failed", "unknown") if s in self.statuses.values()), "proved")

    def summary(self) -> str:
        """``✓ proved``, or what failed and what is unknown: ``✗ failed: progress; unknown: flows_return``."""
        parts = [f"{status}: {', '.join(self.named(status))}" for status in ("failed", "unknown") if self.named(status)]
        return f"{_SYMBOLS[self.status]} {'; '.join(parts) or 'proved'}"


@dataclass(frozen=True)
class Proof:
    """What ``llm-fsm graph --prove`` adds: each property's status, and each state's (``ProofReport.state_status``)."""

    properties: Mapping[str, str]
    states: Mapping[str, ProofMark]

    @classmethod
    def of(cls, properties: Mapping[str, str], state_status: Mapping[str, Mapping[str, str]]) -> Proof:
        return cls(dict(properties), {state: ProofMark(dict(s)) for state, s in state_status.items()})

    @classmethod
    def of_report(cls, report: Any) -> Proof:
        """From a ``ProofReport``: its properties' statuses and ``state_status`` (failed where a finding is)."""
        return cls.of({name: result.status for name, result in report.properties.items()}, report.state_status)

    def summary(self) -> str:
        return "proof: " + ", ".join(f"{name} {status}" for name, status in self.properties.items())


@dataclass(frozen=True)
class Extras:
    flows: tuple[FlowLink, ...] = ()
    confirmations: Mapping[str, ConfirmationMark] = field(default_factory=dict)
    actions: Mapping[str, tuple[ActionMark, ...]] = field(default_factory=dict)
    proof: Proof | None = None
    """The prover's statuses (``--prove``); None: nothing about them is drawn."""

    def flows_from(self, state: str) -> list[FlowLink]:
        return [flow for flow in self.flows if state in flow.sources]


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _declarations(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping) and isinstance(item.get("name"), str)]


def _key(declaration: Mapping[str, Any]) -> tuple[str, str, str]:
    mode = declaration.get("mode")
    definition = _text(declaration.get("definition")) or "?"
    return declaration["name"], definition, mode if mode in ("call", "link") else "call"


def extras_from_document(data: Any) -> Extras:
    """Sub-flows (state-level and definition-wide), confirmation steps and actions of a raw document."""
    data = data if isinstance(data, Mapping) else {}
    states = data.get("states")
    states = states if isinstance(states, Mapping) else {}
    flows: dict[tuple[str, str, str], list[str]] = {}  # a state-level flow → the states declaring it
    descriptions: dict[tuple[str, str, str], str] = {}
    confirmations: dict[str, ConfirmationMark] = {}
    actions: dict[str, tuple[ActionMark, ...]] = {}

    def describe(declaration: Mapping[str, Any]) -> tuple[str, str, str]:
        key = _key(declaration)
        descriptions.setdefault(key, " ".join((_text(declaration.get("description")) or "").split()))
        return key

    for state_id, state in states.items():
        if not isinstance(state, Mapping):
            continue
        for declaration in _declarations(state.get("flows")):
            sources = flows.setdefault(describe(declaration), [])
            if str(state_id) not in sources:
                sources.append(str(state_id))
        declared_actions = state.get("actions")
        marks = tuple(
            ActionMark(
                action["call"], _text(action.get("when")) or "collected", _text(action.get("on_error")) or "fail"
            )
            for action in (declared_actions if isinstance(declared_actions, list) else [])
            if isinstance(action, Mapping) and isinstance(action.get("call"), str)
        )
        if marks:
            actions[str(state_id)] = marks
        confirmation = state.get("confirmation")
        if isinstance(confirmation, Mapping):
            confirmations[str(state_id)] = ConfirmationMark(
                str(state_id), _text(confirmation.get("on_yes")), _text(confirmation.get("on_no"))
            )
    declared = [(key, tuple(sources)) for key, sources in flows.items()]
    declared += [(describe(declaration), ()) for declaration in _declarations(data.get("flows"))]
    links = tuple(
        FlowLink(index, name, definition, mode, descriptions[(name, definition, mode)], sources)
        for index, ((name, definition, mode), sources) in enumerate(declared)
    )
    return Extras(flows=links, confirmations=confirmations, actions=actions)


def extras_from_definition(definition: Any) -> Extras:
    """The extras of a loaded ``FSMDefinition``."""
    return extras_from_document(definition.model_dump(mode="json", by_alias=True))


NO_EXTRAS = Extras()

__all__ = [
    "NO_EXTRAS",
    "ActionMark",
    "ConfirmationMark",
    "Extras",
    "FlowLink",
    "Proof",
    "ProofMark",
    "extras_from_definition",
    "extras_from_document",
]
