"""What a retriever gives the engine: snippets of the team's documents, each with an id the reply may cite.

The engine decides when to retrieve (a state's ``retrieve:``); a retriever only answers a query. Retrievers are
the application's (registered by name, like actions) or built in (``llm_fsm.retrieval``'s full-text index). The
types live in the engine, which puts snippets in the prompt and may import nothing at the edge; ``llm_fsm.retrieval``
re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Snippet:
    """One retrieved passage: ``id`` is stable for the same passage (the reply cites it), ``source`` names the
    document (a path and heading, a URL), ``score`` orders snippets (higher is better; comparable within a query)."""

    id: str
    text: str
    source: str
    score: float = 0.0


@runtime_checkable
class Retriever(Protocol):
    """Answers a query with at most ``k`` snippets, best first."""

    def retrieve(self, query: str, *, k: int) -> list[Snippet]: ...


@runtime_checkable
class AsyncRetriever(Protocol):
    """The same, awaited (a retriever may offer both; the async driver prefers this one)."""

    async def aretrieve(self, query: str, *, k: int) -> list[Snippet]: ...


__all__ = ["AsyncRetriever", "Retriever", "Snippet"]
