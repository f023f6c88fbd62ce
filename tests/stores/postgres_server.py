"""A throwaway PostgreSQL cluster for tests: ``initdb`` in a temp dir, ``postgres`` on a free loopback port.

``initdb`` and ``postgres`` refuse to run as root, and CI runs as root: then the cluster belongs to the
``postgres`` system user that Debian's package creates, and the server runs as that user (its temp dir
is made outside pytest's root-only tree and handed to it). The server runs in the foreground, in a session
of its own; ``kill`` is a crash of the whole server (the postmaster and every backend SIGKILLed, as an OOM
kill or a power cut would leave it) and ``start`` after it runs PostgreSQL's crash recovery.

fsync is off for speed: a killed server loses nothing by it (the kernel still has every write); only a
machine crash would.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SUPERUSER = "llm_fsm_test"


def _find_bindir() -> Path | None:
    """Where ``initdb`` and ``postgres`` are: PATH, else Debian's /usr/lib/postgresql/<newest>/bin."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("postgres"):
        return Path(on_path).parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3].split(".")[0])
    )
    return Path(candidates[-1]).parent if candidates else None


BINDIR = _find_bindir()


def why_not() -> str | None:
    """Why no cluster can be started here (None: one can)."""
    if BINDIR is None:
        return (
            "PostgreSQL server binaries (initdb, postgres) not found on PATH nor under /usr/lib/postgresql/*/bin:"
            " install the postgresql package to run the PostgreSQL store tests"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' system user to run the test cluster as"
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return 'psycopg 3 / psycopg_pool not installed: pip install -e ".[postgres]"'
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One cluster: ``start``, ``kill`` (a crash), ``stop`` (fast shutdown), ``start`` again on the same data."""

    def __init__(self, port: int | None = None) -> None:
        if BINDIR is None:
            raise RuntimeError("PostgreSQL is not installed")
        self.port = port or free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="llm_fsm-pg-"))
        self.data = self.directory / "data"
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = "postgres"
            entry = pwd.getpwnam("postgres")
            os.chown(self.directory, entry.pw_uid, entry.pw_gid)
        self.process: subprocess.Popen[bytes] | None = None
        self._run(
            [
                str(BINDIR / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ]
        )

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(argv, user=self._user, cwd=self.directory, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")

    def url(self, schema: str | None = None) -> str:
        query = f"?schema={schema}" if schema else ""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres{query}"

    def start(self) -> PostgresServer:
        log = open(self.directory / "server.log", "ab")  # noqa: SIM115 - the server's, closed with it
        self.process = subprocess.Popen(
            [
                str(BINDIR / "postgres"),
                "-D",
                str(self.data),
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "unix_socket_directories=",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=200",
                "-c",
                "shared_buffers=32MB",
            ],
            user=self._user,
            cwd=self.directory,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited with {self.process.returncode}: {self.log()[-2000:]}")
            if self._answers():
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"postgres did not answer on port {self.port}: {self.log()[-2000:]}")

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (self.directory / "server.log").read_text(errors="replace")
        return ""

    def _answers(self) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.url(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.OperationalError:
            return False

    def kill(self) -> None:
        """A crash: SIGKILL to the postmaster and every backend at once; nothing shut down cleanly.

        Each backend makes itself a process-group leader, so the postmaster's group is not the server:
        the postmaster is stopped (it forks no more), its children are found and killed, then it is.
        """
        if self.process is None or self.process.poll() is not None:
            self._wait()
            return
        postmaster = self.process.pid
        os.kill(postmaster, signal.SIGSTOP)
        children = _children_of(postmaster)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(postmaster, signal.SIGKILL)
        self._wait()
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.01)

    def stop(self) -> None:
        """Fast shutdown (SIGINT): clients are disconnected, data is flushed."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # the postmaster exits after its backends
        self._wait()

    def _wait(self) -> None:
        if self.process is not None:
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def destroy(self) -> None:
        """Stop the server and remove its data."""
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


def _children_of(parent: int) -> list[int]:
    """Pids whose parent is ``parent`` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for its reaper does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
