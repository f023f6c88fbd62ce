"""Retrieval: snippets of the team's own documents for a state's prompt (issue 25; work in progress on branches)."""

from llm_fsm.retrieval._types import AsyncRetriever, Retriever, Snippet

__all__ = ["AsyncRetriever", "Retriever", "Snippet"]
