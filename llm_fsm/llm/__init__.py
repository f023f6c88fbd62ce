"""The LLM edge: the interface the engine's drivers call, the litellm implementation, reply parsing, and fakes for
tests.

``LiteLLMInterface`` is the seed's import path (``from llm_fsm.llm import LiteLLMInterface``); litellm
itself is imported on the first call, not here.
"""

from __future__ import annotations

from llm_fsm.engine._records import LLMResult  # re-exported: its historical home
from llm_fsm.llm._interface import LLMInterface, ResponseFormatMode
from llm_fsm.llm._litellm import LiteLLMInterface
from llm_fsm.llm._parsing import parse_llm_output

__all__ = [
    "LLMInterface",
    "LLMResult",
    "LiteLLMInterface",
    "ResponseFormatMode",
    "parse_llm_output",
]
