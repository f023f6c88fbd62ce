"""Snippet and the retriever protocols, where the retrievers live; defined in the engine, which puts snippets in
the prompt and may import nothing at the edge (``llm_fsm.engine._snippets``)."""

from llm_fsm.engine._snippets import AsyncRetriever, Retriever, Snippet

__all__ = ["AsyncRetriever", "Retriever", "Snippet"]
