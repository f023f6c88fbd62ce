"""Retrieval: snippets of the team's own documents for a state's prompt (issue 25; work in progress on branches)."""

from llm_fsm.retrieval._fts import FTSRetriever
from llm_fsm.retrieval._index import IndexReport, Problem, build_index
from llm_fsm.retrieval._types import AsyncRetriever, Retriever, Snippet

__all__ = ["AsyncRetriever", "FTSRetriever", "IndexReport", "Problem", "Retriever", "Snippet", "build_index"]
