"""Writes that survive a crash and a concurrent writer: flush and fsync, a backup kept by hard link, flock per
conversation, OS errors as StoreUnavailableError."""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from llm_fsm.errors import StoreUnavailableError
from llm_fsm.stores.files._paths import _Paths


class _Durable:
    """The file-system half of ``FileStore``; ``fsync=False`` keeps the order of writes but skips the fsyncs."""

    _fsync: bool

    def _write_atomic(self, path: Path, text: str) -> None:
        """Write and flush ``path`` (the caller renames it into place)."""
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
            self._flush(fh)

    def _keep_backup(self, paths: _Paths) -> None:
        """The current record becomes ``.bak`` without the primary ever disappearing."""
        _unlink(paths.backup_temp)
        try:
            os.link(paths.primary, paths.backup_temp)
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            self._write_atomic(paths.backup_temp, paths.primary.read_text(encoding="utf-8"))
        os.replace(paths.backup_temp, paths.backup)

    def _flush(self, fh: Any) -> None:
        fh.flush()
        if self._fsync:
            os.fsync(fh.fileno())

    def _sync_file(self, path: Path) -> None:
        if self._fsync:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def _sync_directory(self, directory: Path) -> None:
        """Make renames durable: the directory entry is what a rename changes."""
        if not self._fsync:
            return
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _ensure_directory(self, directory: Path) -> None:
        if directory.is_dir():
            return
        directory.mkdir(parents=True, exist_ok=True)
        self._sync_directory(directory.parent)
        self._sync_directory(directory.parent.parent)

    @contextmanager
    def _locked(self, paths: _Paths, *, remove: bool = False) -> Iterator[None]:
        """Exclusive flock on the conversation's lock file, across threads and processes.

        A lock file can be removed by ``delete`` while another process waits on
        it; the waiter then holds a lock on an orphaned inode, so after locking
        we check the path still names the file we locked and start over if not.
        """
        while True:
            fd = os.open(paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                mine = os.fstat(fd)
                try:
                    now_there = os.stat(paths.lock)
                except FileNotFoundError:
                    now_there = None
            except BaseException:
                os.close(fd)
                raise
            if now_there is not None and (now_there.st_ino, now_there.st_dev) == (mine.st_ino, mine.st_dev):
                break
            os.close(fd)
        try:
            yield
        finally:
            if remove:
                _unlink(paths.lock)
            os.close(fd)

    @contextmanager
    def _io(self, where: Path) -> Iterator[None]:
        """OS errors (disk full, permissions) become StoreUnavailableError; the record on disk is untouched."""
        try:
            yield
        except OSError as exc:
            raise StoreUnavailableError(f"{where}: {exc}") from exc


def _unlink(path: Path) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)
