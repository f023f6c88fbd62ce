"""The checks every store applies to a definition version before it touches its backend (see
``base.DefinitionVersionStore``), so a version id or document refused by one store is refused by all."""

from __future__ import annotations

import re

from llm_fsm.errors import DefinitionVersionNotFoundError, RecordTooLargeError
from llm_fsm.stores.codec import SizeLimits

VERSION_ID = re.compile(r"[0-9a-f]{8,64}")
"""A definition version: ``FSMDefinition.content_hash`` (16 digits today), in the range a longer or shorter hash
could take. The id becomes a file name, a key segment and a column value, so nothing else gets through."""


def checked_version(version: str) -> str:
    """``version`` when it is a version id; ValueError otherwise (before any I/O: the id names a file)."""
    if not isinstance(version, str) or not VERSION_ID.fullmatch(version):
        raise ValueError(f"a definition version is 8 to 64 lowercase hex digits (a content hash), not {version!r}")
    return version


def checked_document(version: str, document: str, limits: SizeLimits) -> str:
    """``document`` when it fits the store's record cap (RecordTooLargeError otherwise) and ``version`` is an id."""
    checked_version(version)
    if not isinstance(document, str):
        raise TypeError(f"definition version {version}: the document is text, not {type(document).__name__}")
    if limits.max_record_bytes is not None:
        size = len(document.encode("utf-8"))
        if size > limits.max_record_bytes:
            raise RecordTooLargeError(
                f"definition version {version}: document is {size} bytes, "
                f"over the store's cap of {limits.max_record_bytes} bytes"
            )
    return document


def version_not_found(version: str) -> DefinitionVersionNotFoundError:
    return DefinitionVersionNotFoundError(f"no definition version {version} is kept in this store")


__all__ = ["VERSION_ID", "checked_document", "checked_version", "version_not_found"]
