"""An application registers its retrievers through a documented path, as it does its actions: ``RetrieverRegistry``
from ``llm_fsm`` or ``llm_fsm.retrieval``, loaded on first use."""

from __future__ import annotations

import subprocess
import sys


def test_retriever_registry_is_importable_from_the_package() -> None:
    from llm_fsm import RetrieverRegistry
    from llm_fsm.runtime._retrievers import RetrieverRegistry as Home

    assert RetrieverRegistry is Home


def test_retriever_registry_is_importable_from_llm_fsm_retrieval() -> None:
    from llm_fsm.retrieval import RetrieverRegistry
    from llm_fsm.runtime._retrievers import RetrieverRegistry as Home

    assert RetrieverRegistry is Home


def test_retriever_registry_is_listed_in_both_all() -> None:
    import llm_fsm
    import llm_fsm.retrieval

    assert "RetrieverRegistry" in llm_fsm.__all__ and "RetrieverRegistry" in llm_fsm.retrieval.__all__


def test_importing_the_packages_does_not_load_the_runtime_until_the_registry_is_asked_for() -> None:
    code = (
        "import sys, llm_fsm, llm_fsm.retrieval; print('llm_fsm.runtime._retrievers' in sys.modules); "
        "from llm_fsm.retrieval import RetrieverRegistry; print('llm_fsm.runtime._retrievers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
