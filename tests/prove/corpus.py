"""The corpus machinery (tests/prove): a mutant, where its files go, and the edits mutants are made of.

A mutant keeps loading (the bug is semantic, not a schema error), names the property the prover must fail and
where, and records whether today's ``fsm-lint`` flags it, so the corpus measures what only exploration finds.
Sub-flow mutants use ``definitions/flows/check_booking.yaml`` (and the small flows in ``tests/prove/flows/``),
mutated in place where the bug lives in the sub-flow.
"""

from __future__ import annotations

import copy
import functools
import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.loading import load_fsm_definition, resolve_definition_path, resolve_flow_reference

Data = dict[str, Any]
Edit = Callable[[Data], None]

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS = ROOT / "definitions"
CORPUS_FLOWS = Path(__file__).resolve().parent / "flows"

PROPERTIES = ("no_trap", "progress", "no_model_gate", "flows_return")


@dataclass(frozen=True)
class Mutant:
    """One seeded bug: ``mutate`` edits a deep copy of ``source`` (under definitions/); ``flows`` edits copies of
    sub-flow files (by name in the flows folder). The prover must report ``property`` at one of ``where`` (state
    ids, or the sub-flow's name for a call that cannot return)."""

    name: str
    source: str
    kind: str
    property: str
    where: tuple[str, ...]
    mutate: Edit
    lint_flags: bool
    flows: Mapping[str, Edit] = field(default_factory=dict)
    corpus_flows: tuple[str, ...] = ()
    undecided: str | None = None
    """Why the prover cannot decide this mutant (it says ``unknown``): its test is a strict xfail, and it still
    counts as a miss in the found rate."""

    def data(self) -> Data:
        data = copy.deepcopy(_read(DEFINITIONS / self.source))
        self.mutate(data)
        return data

    def materialize(self, directory: Path) -> Path:
        """Write the mutant and its sub-flows into ``directory``; returns the root definition's path."""
        directory.mkdir(parents=True, exist_ok=True)
        root = directory / self.source
        _write(root, self.data())
        flows = directory / "flows"
        flows.mkdir(exist_ok=True)
        for path in sorted((DEFINITIONS / "flows").glob("*.yaml")):
            data = copy.deepcopy(_read(path))
            if path.name in self.flows:
                self.flows[path.name](data)
            _write(flows / path.name, data)
        for name in self.corpus_flows:
            shutil.copy(CORPUS_FLOWS / name, flows / name)
        return root

    def files(self, directory: Path) -> list[Path]:
        """Every definition file of a materialized mutant: the root, then its sub-flows."""
        return [directory / self.source, *sorted((directory / "flows").glob("*.yaml"))]


@functools.cache
def _read(path: Path) -> Data:
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def _write(path: Path, data: Data) -> None:
    if path.suffix == ".json":
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def load(path: Path) -> FSMDefinition:
    return load_fsm_definition(path, cache=None)


def resolve(declaration: FlowDeclaration, parent: FSMDefinition) -> FSMDefinition:
    """The sub-flow resolver the prover and lint are given: where the engine looks, read afresh."""
    return load(resolve_definition_path(resolve_flow_reference(declaration.definition, parent.source)))


# --- edits ------------------------------------------------------------------------------------------------------


def var(key: str, default: Any = None) -> Data:
    return {"var": key if default is None else [key, default]}


def state(data: Data, state_id: str) -> Data:
    found = data["states"][state_id]
    assert isinstance(found, dict)
    return found


def exit_to(data: Data, state_id: str, target: str) -> Data:
    return next(t for t in state(data, state_id)["transitions"] if t["target_state"] == target)


def guard(data: Data, state_id: str, target: str, logic: Any, requires: list[str] | None = None) -> None:
    """Replace the conditions of ``state_id``'s transition to ``target``."""
    condition: Data = {"description": "seeded condition", "logic": logic}
    if requires:
        condition["requires_context_keys"] = requires
    exit_to(data, state_id, target)["conditions"] = [condition]


def also(data: Data, state_id: str, target: str, logic: Any) -> None:
    """Add a clause to the first condition of ``state_id``'s transition to ``target`` (an ``and``)."""
    condition = exit_to(data, state_id, target)["conditions"][0]
    old = condition.get("logic")
    condition["logic"] = {"and": [old, logic]} if old is not None else logic


def drop_exit(data: Data, state_id: str, target: str) -> None:
    transitions = state(data, state_id)["transitions"]
    transitions.remove(exit_to(data, state_id, target))


def add_exit(data: Data, state_id: str, target: str, logic: Any = None, priority: int = 0) -> None:
    transition: Data = {"target_state": target, "description": "seeded transition", "priority": priority}
    if logic is not None:
        transition["conditions"] = [{"description": "seeded condition", "logic": logic}]
    state(data, state_id)["transitions"].insert(0, transition)


def declare(data: Data, key: str, declaration: Data, *, application: bool = False) -> None:
    """Declare a key; ``application``: also list it in application_context_keys (the application sets it)."""
    data.setdefault("context_keys", {})[key] = declaration
    if application:
        data.setdefault("application_context_keys", []).append(key)


def uncollect(data: Data, state_id: str, key: str) -> None:
    state(data, state_id)["required_context_keys"].remove(key)


def relax(data: Data, key: str) -> None:
    """Let the model write a key only the application could: the default ``writable_by`` and not protected."""
    data["context_keys"][key].pop("writable_by", None)
    protected = data.get("protected_context_keys") or []
    if key in protected:
        protected.remove(key)


def call_from(data: Data, state_id: str) -> None:
    """Move the definition-wide sub-flow declarations to one state, so the call has one place to be reported."""
    state(data, state_id)["flows"] = data.pop("flows")


def chain(*edits: Edit) -> Edit:
    def run(data: Data) -> None:
        for edit in edits:
            edit(data)

    return run


def never(*clauses: Any) -> Data:
    return {"and": list(clauses)}


ASK_REF = "ask_reference"
