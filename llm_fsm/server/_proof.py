"""``GET /v1/definitions/{id}/prove``: what the prover (``llm_fsm.lint.prove``) finds in a served definition.

A separate endpoint, not a flag on ``/lint``: lint answers at once, a proof can take seconds, so the
inspector shows the findings first and the proof when it comes. The proof is computed on the library's
thread pool (never on the event loop) and kept per served definition until the definition, or a sub-flow
it loaded, changes: its content hash decides, so many readers of one page prove it once, and two asking at
once wait for the same proof.

(No ``from __future__ import annotations``: FastAPI reads the route signatures' types at run time.)
"""

import asyncio
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from llm_fsm._threads import executor, run_blocking
from llm_fsm.definition._model import FlowDeclaration, FSMDefinition
from llm_fsm.server._definitions import ServedDefinition
from llm_fsm.server._deps import Reader, Registry
from llm_fsm.server._models import DEFINITION_NOT_FOUND

Status = Literal["proved", "failed", "unknown"]


class PropertyOut(BaseModel):
    name: str = Field(description="no_trap, progress, no_model_gate or flows_return (docs/prove.md).")
    status: Status
    reason: str | None = Field(default=None, description="Why it is unknown (the bound hit, what is undecidable).")


class ProofFindingOut(BaseModel):
    code: str = Field(description="FSM042 no_trap, FSM043 progress, FSM044 no_model_gate, FSM045 flows_return.")
    property: str
    state: str = Field(description="The state where the violation shows.")
    flow: str | None = Field(default=None, description="The sub-flow it is in; null for the definition itself.")
    message: str
    path_length: int = Field(description="Turns from the start into the violation (the counterexample's length).")
    transition: str | None = Field(default=None, description="The gated transition's target (no_model_gate).")
    line: int | None = Field(default=None, description="Line in the file of the definition or flow named.")


class ProofOut(BaseModel):
    definition: str
    hash: str = Field(description="Content hash of the definition proved: the proof is kept while it is the same.")
    failed: bool = Field(description="Whether any property failed.")
    complete: bool = Field(description="False when the exploration hit its bound: then nothing is called proved.")
    explored: int = Field(description="Abstract configurations explored.")
    bound: int
    properties: list[PropertyOut]
    findings: list[ProofFindingOut]
    states: dict[str, dict[str, Status]] = Field(
        description="Each state of the definition → property → its status there (failed where a finding is)."
    )


@dataclass
class _Entry:
    hash: str
    proof: "Future[tuple[ProofOut, dict[str, str]]]"
    """A thread's future, not the loop's: any request, on any loop, may wait for it."""


@dataclass
class ProofCache:
    """Proofs by served definition id, with the hashes they were made from (the root's and each sub-flow's)."""

    entries: dict[str, _Entry] = field(default_factory=dict)

    async def get(self, served: ServedDefinition) -> ProofOut:
        definition = await served.load()
        entry = self.entries.get(served.id)
        if entry is not None and entry.hash == definition.content_hash:
            try:
                out, flows = await _waiting(entry.proof)
            except Exception:
                flows = None  # a failed proof is not kept: asked again, it runs again
            else:
                if await run_blocking(_unchanged, flows):
                    return out
        entry = _Entry(definition.content_hash, executor().submit(_prove, served.id, definition))
        self.entries[served.id] = entry
        try:
            out, _ = await _waiting(entry.proof)
        except Exception:
            if self.entries.get(served.id) is entry:
                del self.entries[served.id]
            raise
        return out


async def _waiting(proof: "Future[tuple[ProofOut, dict[str, str]]]") -> tuple[ProofOut, dict[str, str]]:
    """The proof's result; a request that goes away stops waiting, and the proof goes on for the next one."""
    return await asyncio.shield(asyncio.wrap_future(proof))


def _flow_loader(loaded: dict[str, str]) -> Any:
    """Sub-flows loaded where the engine finds them (``flow_resolver``), each file's hash remembered to tell when
    it changed."""
    from llm_fsm.loading import flow_resolver

    resolve = flow_resolver()

    def remembering(declaration: FlowDeclaration, parent: FSMDefinition) -> FSMDefinition:
        definition = resolve(declaration, parent)
        if definition.source is not None:
            loaded[definition.source] = definition.content_hash
        return definition

    return remembering


def _unchanged(flows: Mapping[str, str]) -> bool:
    from llm_fsm.loading import load_fsm_definition

    try:
        return all(load_fsm_definition(reference).content_hash == digest for reference, digest in flows.items())
    except Exception:  # a sub-flow gone or broken: prove again, and say so there
        return False


def _prove(definition_id: str, definition: FSMDefinition) -> tuple[ProofOut, dict[str, str]]:
    from llm_fsm.lint import prove

    flows: dict[str, str] = {}
    report = prove(definition, resolve=_flow_loader(flows))
    states: Any = report.state_status  # pydantic checks each status
    out = ProofOut(
        definition=definition_id,
        hash=definition.content_hash,
        failed=report.failed,
        complete=report.complete,
        explored=report.explored,
        bound=report.bound,
        properties=[
            PropertyOut(name=result.name, status=result.status, reason=result.reason)
            for result in report.properties.values()
        ],
        # a finding's file is a path on the server's disk: clients know the definition by its id
        findings=[
            ProofFindingOut(
                code=finding.code,
                property=finding.property,
                state=finding.state,
                flow=finding.flow,
                message=finding.message,
                path_length=len(finding.path),
                transition=finding.transition,
                line=finding.line,
            )
            for finding in report.findings
        ],
        states=states,
    )
    return out, flows


async def _proofs(request: Request) -> ProofCache:
    cache: ProofCache = request.app.state.proofs
    return cache


Proofs = Annotated[ProofCache, Depends(_proofs)]

router = APIRouter()


@router.get(
    "/v1/definitions/{definition_id}/prove",
    response_model=ProofOut,
    tags=["definitions"],
    responses=DEFINITION_NOT_FOUND,
)
async def prove_definition(definition_id: str, caller: Reader, registry: Registry, proofs: Proofs) -> ProofOut:
    """What no model output can make the definition do, proved (`fsm-lint --prove`): each property's status,
    the findings with the length of the path into each, and each state's statuses. Computed once per version
    of the definition and its sub-flows; the first request may take seconds."""
    return await proofs.get(registry.get(definition_id))


__all__ = ["ProofCache", "ProofFindingOut", "ProofOut", "PropertyOut", "router"]
