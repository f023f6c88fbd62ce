"""``GET /v1/definitions/{id}/replay?against=ALIAS``: shadow replay (``llm_fsm.audit``) of the server's recorded
conversations of a definition against an alias's version, for the inspector's Replay view.

Every recorded turn is decided again with the alias's definition from the answers it was given (no model is
called): the report lists the turns whose decision would change and the in-flight conversations the alias's
version cannot hold, as ``llm-fsm replay`` does. The caller sees its own tenant's conversations only, as
everywhere else. A replay reads every conversation it covers, so it runs on the library's thread pool, never on
the event loop, and ``limit`` bounds the conversations it reads.

(No ``from __future__ import annotations``: FastAPI reads the route signatures' types at run time.)
"""

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from llm_fsm._threads import run_blocking
from llm_fsm.audit._replay import DEFAULT_MAX_DETAILS, Replayer
from llm_fsm.audit._versions import Versions
from llm_fsm.audit._walk import PAGE, conversations
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.server._deps import Manager, Reader, Registry, alias_for, served
from llm_fsm.server._errors import ApiError
from llm_fsm.server._models import DEFINITION_NOT_FOUND, ErrorOut

MAX_CONVERSATIONS = 100_000
"""The most conversations one request may replay (``limit``); a larger audit is ``llm-fsm replay``'s."""


class ReplaySummaryOut(BaseModel):
    definition: str = Field(description="The candidate's name.")
    version: str = Field(description="The candidate's version (the alias's content hash).")
    conversations: int
    in_flight: int
    turns: int = Field(description="Recorded turns decided again.")
    unchanged: int
    changed: int
    changed_ratio: float
    not_recorded: int = Field(description="Turns recorded without what re-deciding them needs.")
    not_recomputable: int
    stranded: int = Field(description="In-flight conversations the candidate cannot hold.")


class ChangedTurnOut(BaseModel):
    conversation_id: str
    turn: int
    differences: list[str] = Field(description="What the candidate decides differently, in words.")
    recorded: dict[str, Any]
    candidate: dict[str, Any] | None
    unrecorded: list[str] = Field(description="Answers the candidate's decision needs that production never gave.")


class ProblemOut(BaseModel):
    kind: str = Field(description="state, flow, key or default.")
    where: str
    name: str
    message: str


class StrandedOut(BaseModel):
    conversation_id: str
    state: str
    stack: list[str]
    problems: list[ProblemOut]


class ReplayOut(BaseModel):
    summary: ReplaySummaryOut
    changed: list[ChangedTurnOut] = Field(description=f"The first {DEFAULT_MAX_DETAILS:,} changed turns.")
    stranded: list[StrandedOut]
    listed: dict[str, int] = Field(description="How many of each list are shown (the summary counts them all).")


class _Tenant:
    """The store as seen by one tenant: ``conversations`` pages through its conversations only."""

    def __init__(self, store: Any, tenant: str) -> None:
        self.store = store
        self.tenant = tenant

    def list_page(self, *, limit: int = PAGE, cursor: str | None = None) -> Any:
        return self.store.list_page(user_id=self.tenant, all_rooms=True, limit=limit, cursor=cursor)

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> Any:
        return self.store.load(conversation_id, user_id=user_id, room_id=room_id)


def _flows(candidate: FSMDefinition) -> dict[str, FSMDefinition]:
    """The candidate's sub-flows by name, loaded where a conversation would find them; one not found is left out
    (the replay then says the turns needing it are not recomputable)."""
    from llm_fsm.loading import sub_flows

    return sub_flows(candidate)[0]


def _replay(
    manager: Any, candidate: FSMDefinition, name: str, tenant: str, since: float | None, limit: int
) -> dict[str, Any]:
    versions = Versions(getattr(manager.store, "load_definition_version", None))  # each version read once
    replayer = Replayer(candidate, versions=versions, flows=_flows(candidate), since=since)
    walk = conversations(_Tenant(manager.store, tenant), name=name, unreadable=replayer.unreadable)
    for count, (_, instance) in enumerate(walk, start=1):
        manager.versions_for(instance, versions)  # and the definitions its flows have now
        replayer.add(instance)
        if count >= limit:
            break
    report: dict[str, Any] = replayer.report.as_dict()
    return report


router = APIRouter()


@router.get(
    "/v1/definitions/{definition_id}/replay",
    response_model=ReplayOut,
    tags=["definitions"],
    responses={
        **DEFINITION_NOT_FOUND,
        501: {"model": ErrorOut, "description": "The manager keeps no store to replay (`replay_unavailable`)"},
    },
)
async def replay_definition(
    definition_id: str,
    caller: Reader,
    registry: Registry,
    manager: Manager,
    against: Annotated[
        str, Query(min_length=1, max_length=200, description="The alias whose version decides again (404 if none).")
    ],
    since: Annotated[float | None, Query(ge=0, description="Only turns started at or after (epoch seconds).")] = None,
    limit: Annotated[
        int, Query(ge=1, le=MAX_CONVERSATIONS, description="At most this many conversations, newest first.")
    ] = 1000,
) -> dict[str, Any]:
    """The caller's recorded turns of this definition decided again by the alias `against`'s version: a summary,
    the turns whose decision changes (and how), and the in-flight conversations that version would strand.
    No model is called; a replay of many conversations takes a while."""
    offered = served(registry, definition_id)
    alias = alias_for(registry, offered.id, against)
    if not hasattr(manager, "store") or not hasattr(manager, "versions_for"):
        raise ApiError(501, "replay_unavailable", "this server's manager has no store of conversations to replay")
    name = (await offered.load()).name
    return await run_blocking(_replay, manager, alias.definition, name, caller.tenant, since, limit)


__all__ = ["MAX_CONVERSATIONS", "ReplayOut", "router"]
