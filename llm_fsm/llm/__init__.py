"""The LLM edge: the interface the engine's drivers call, the litellm implementation, reply parsing, and fakes for
tests.

``LiteLLMInterface`` is the seed's import path (``from llm_fsm.llm import LiteLLMInterface``); litellm
itself is imported on the first call, not here.

The names below load on first use (PEP 562), so importing one module of this package does not
import all of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm_fsm._lazy import lazy_exports

if TYPE_CHECKING:
    from llm_fsm.engine._records import LLMResult
    from llm_fsm.llm._interface import LLMInterface, ResponseFormatMode
    from llm_fsm.llm._litellm import LiteLLMInterface
    from llm_fsm.llm._parsing import parse_llm_output

_EXPORTS: dict[str, tuple[str, str]] = {
    "LLMInterface": ("llm_fsm.llm._interface", "LLMInterface"),
    "LLMResult": ("llm_fsm.engine._records", "LLMResult"),
    "LiteLLMInterface": ("llm_fsm.llm._litellm", "LiteLLMInterface"),
    "ResponseFormatMode": ("llm_fsm.llm._interface", "ResponseFormatMode"),
    "parse_llm_output": ("llm_fsm.llm._parsing", "parse_llm_output"),
}

__all__ = [
    "LLMInterface",
    "LLMResult",
    "LiteLLMInterface",
    "ResponseFormatMode",
    "parse_llm_output",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
