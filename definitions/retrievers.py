"""The retrievers the definitions in this folder name: the application side of their ``retrieve:``.

``shop_help.yaml`` answers from the shop's help centre, a folder of Markdown pages in ``docs/shop_help/``. This
module indexes that folder with the built-in full-text index (SQLite FTS5, BM25; no service, no network) and
registers the retriever under the name the definition uses, ``help_docs``::

    llm-fsm chat definitions/shop_help.yaml --retrievers definitions/retrievers.py:registry --model local
    llm-fsm test definitions/ --retrievers definitions/retrievers.py:registry

The index is brought up to date each time this module is imported (``build_index`` reads only the pages whose
size or modification time changed, and a page whose text did not change keeps its snippet ids, so a script's
citations still hold after a fresh checkout). It lives in a cache file, never in the repository: the path in
``$SHOP_HELP_INDEX``, else ``shop_help.db`` under ``$LLM_FSM_HOME``, ``$XDG_CACHE_HOME/llm_fsm`` or
``~/.cache/llm_fsm``, in ``indexes/``. ``llm-fsm index definitions/docs/shop_help/ --out index.db`` builds the same
index by hand; an application registers ``FTSRetriever("index.db")`` the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

from llm_fsm.retrieval import FTSRetriever, build_index

DOCS = Path(__file__).resolve().parent / "docs" / "shop_help"


def index_path() -> Path:
    """Where the help centre's index is kept (a cache: deleting it only costs a rebuild)."""
    explicit = os.environ.get("SHOP_HELP_INDEX")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("LLM_FSM_HOME")
    if home:
        cache = Path(home).expanduser()
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "llm_fsm"
    return cache / "indexes" / "shop_help.db"


def help_centre() -> FTSRetriever:
    """The help centre's retriever, over an index brought up to date with ``docs/shop_help/`` first."""
    index = index_path()
    index.parent.mkdir(parents=True, exist_ok=True)
    build_index(DOCS, index)
    return FTSRetriever(index)


registry: dict[str, FTSRetriever] = {"help_docs": help_centre()}
"""Name → retriever, as ``--retrievers`` and ``FSMManager(retrievers=...)`` take them."""
