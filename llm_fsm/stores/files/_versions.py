"""Definition versions as files: ``<root>/versions.d/<version>.json`` holds the version's canonical JSON.

The folder's name has a dot, which no user's folder has (``segment`` escapes dots), so a user named ``versions``
keeps a folder of their own and listings never take the versions for a user. A version is written to a temp file of
its own, flushed, and hard-linked to its name: the link fails when the name exists, so a version is written once
and never rewritten, even by two processes at once, and a reader sees a whole file or none.
"""

from __future__ import annotations

import builtins
import errno
import os
import uuid
from pathlib import Path

from llm_fsm.stores._versions import VERSION_ID, checked_document, checked_version, version_not_found
from llm_fsm.stores.codec import SizeLimits
from llm_fsm.stores.files._durable import _Durable, _unlink

VERSIONS_FOLDER = "versions.d"


class _DefinitionVersions(_Durable):
    """``DefinitionVersionStore`` for ``FileStore``."""

    root: Path
    _limits: SizeLimits

    def save_definition_version(self, version: str, document: str) -> None:
        checked_document(version, document, self._limits)
        folder = self.root / VERSIONS_FOLDER
        final = folder / f"{version}.json"
        with self._io(final):
            if final.exists():
                return
            self._ensure_directory(folder)
            temp = folder / f"{version}.{uuid.uuid4().hex}.tmp"  # a writer's own: two never write one temp file
            try:
                self._write_atomic(temp, document)
                try:
                    os.link(temp, final)
                except FileExistsError:
                    return  # another writer stored it first: the same text, since the version names it
                except OSError as exc:
                    if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                        raise
                    os.replace(temp, final)  # no hard links here: the same text replaces the same text at worst
            finally:
                _unlink(temp)
            self._sync_directory(folder)

    def load_definition_version(self, version: str) -> str:
        path = self.root / VERSIONS_FOLDER / f"{checked_version(version)}.json"
        with self._io(path):
            try:
                return path.read_text(encoding="utf-8")
            except FileNotFoundError:  # caught here, before _io makes it a StoreUnavailableError
                raise version_not_found(version) from None

    def definition_versions(self) -> builtins.list[str]:
        folder = self.root / VERSIONS_FOLDER
        with self._io(folder):
            try:
                names = os.listdir(folder)
            except FileNotFoundError:
                return []
        stems = (name[: -len(".json")] for name in names if name.endswith(".json"))
        return sorted(stem for stem in stems if VERSION_ID.fullmatch(stem))
