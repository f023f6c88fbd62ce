"""What a store costs per turn on the engine's real record, and how big that record gets.

The engine drives a real conversation of the personal-information form
(``definitions/personal_information_collection.json``) through ``FSMManager``
with a zero-latency fake model (``llm_fsm.testing.FunctionLLM`` answering with
the canned replies of ``benchmarks/baseline/scenario.py``: ten form turns, then
"read it back" turns that stay in ``confirmation``) for ``--turns`` user turns.

Printed:

- **the record**: bytes of the hot record at turns 1, 10, 100 and the last
  turn (the compact JSON ``stores.codec.encode`` produces, which the SQLite and
  Redis stores read and write on every turn; the file store writes it
  indented), and the share of it that is turn records, trace, transcript (and
  how much of the transcript the prompt's history window reads), message ids
  and context data; beside it, the bytes of the turn log the stores append to
  (turn records, message ids and replies; 0 for a library before the split,
  whose record holds them); the same with a ``message_id`` on every turn,
  which fills the idempotency map;
- **load + save per turn**: the time ``FSMManager`` spends in ``store.load`` and
  ``store.save`` on each turn, on memory, SQLite, files, Redis and PostgreSQL, with its
  ratio to the memory store. Every store runs its own conversation of the same
  script; the stores take turns one turn at a time, in ABBA order (forward on
  one turn, backward on the next), so a machine that gets busier slows all of
  them alike. Per turn, the median over ``--runs`` runs; then the turn-1 figure,
  the mean of turns 91-100 and the mean of the last 100 turns;
- **turns per second** with 1 and 4 worker processes, each driving its own
  conversations (already past turn 60, where the record has settled) on Redis,
  PostgreSQL and SQLite (skip with ``--no-throughput``);
- **a summary line** with the two figures the "hot record" change is judged
  by: the record at the last turn (target ≤ 8 KB) and SQLite load + save per
  turn (target ≤ 1/3 of before). "Before" is measured in the same run with
  ``--against REV`` (the library at git revision REV, extracted with ``git
  archive`` into a temp dir; each side in its own worker process, the two
  alternating ten turns at a time in ABBA order; SQLite with
  synchronous=NORMAL is measured there too); without it the script compares
  with the figure recorded below (``BEFORE``), which was taken on another day
  and is only indicative. The line ends with the median time of one
  ``fdatasync`` in the scratch directory, at the start and the end of the
  run: synchronous=FULL pays one per commit whatever the record's size, so on
  a disk where it is slow it is the floor of the FULL figure.

A local ``redis-server`` is started on a free loopback port in a temp dir
(no persistence) unless ``--redis-url`` names one; without the binary the
Redis rows are skipped with a note. Likewise a throwaway PostgreSQL cluster
(``initdb`` + ``postgres`` in a temp dir on a free loopback port, as the
``postgres`` user when run as root, fsync off, like the tests' one) unless
``--postgres-url`` names a database; without the server binaries or psycopg the
PostgreSQL rows are skipped with a note. ``--against`` is unchanged: its
stores (and Redis) only, since a revision before the PostgreSQL store has none.

Run from the repository root::

    python benchmarks/stores.py                      # 1,000 turns, 3 runs, throughput (a few minutes)
    python benchmarks/stores.py --quick               # 200 turns, 1 run, short throughput windows
    python benchmarks/stores.py --turns 200 --runs 1 --no-throughput
    python benchmarks/stores.py --against 15a0e12    # the same-run before/after for the summary line
    python benchmarks/stores.py --json
    python benchmarks/stores.py --listing            # a page of 50 among 100 / 100,000 conversations
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(HERE / "baseline"))

from scenario import DEFINITION, FORM_TURNS, OPENING, STAY_TURN  # noqa: E402

RECORD_POINTS = (1, 10, 100, 1000)
HOT_RECORD_TARGET_BYTES = 8_000
"""The issue's "hot record <= 8 KB at turn 1,000" (KB = 1,000 bytes, as its "57 KB" for 57,1xx bytes)."""
SQLITE_TARGET_FRACTION = 1 / 3
"""The issue's "SQLite load + save per turn <= 1/3 of today"."""
SQLITE = "sqlite (synchronous=FULL, default)"
SQLITE_NORMAL = "sqlite (synchronous=NORMAL)"
BEFORE = {
    "revision": "9d19d27",
    "date": "2026-11-23",
    "machine": "2 shared AMD EPYC cores, other agents' jobs running",
    "turns": 1000,
    "hot_record_bytes": 57_098,
    "sqlite_ms_per_turn": 2.095,
    "sqlite_x_memory": 27.9,
}
"""Today's figures (the "before" of the hot-record change), recorded from ``python benchmarks/stores.py``.

Only indicative on another day or machine; ``--against REV`` measures the
before side in the same run.
"""


def _use_library(directory: Path) -> None:
    """Import ``llm_fsm`` from ``directory``, ahead of any installed copy; fail if another one wins."""
    sys.path.insert(0, str(directory))
    import llm_fsm

    found = Path(llm_fsm.__file__ or next(iter(llm_fsm.__path__))).resolve()
    if not str(found).startswith(str(directory.resolve()) + os.sep):
        raise SystemExit(f"llm_fsm was imported from {found}, not from {directory}")


# --- the conversation -----------------------------------------------------------------


def script_turn(turn: int) -> tuple[str, dict[str, Any]]:
    """User message and canned model reply of user turn ``turn`` (1-based)."""
    return FORM_TURNS[turn - 1] if turn <= len(FORM_TURNS) else STAY_TURN


class Conversation:
    """One conversation of the form on one store, advanced a turn at a time."""

    def __init__(self, store: Any, *, message_ids: bool = False) -> None:
        from llm_fsm import FSMManager
        from llm_fsm.testing import FunctionLLM

        self.reply: dict[str, Any] = OPENING
        self.manager = FSMManager(llm_interface=FunctionLLM(lambda request: self.reply), store=store)
        self.message_ids = message_ids
        self.conversation_id, _ = self.manager.start_conversation(str(DEFINITION))
        self.turn = 0

    def step(self) -> None:
        self.turn += 1
        user, self.reply = script_turn(self.turn)
        message_id = f"m{self.turn}" if self.message_ids else None
        self.manager.process_message(self.conversation_id, user, message_id)

    def instance(self) -> Any:
        return self.manager.store.load(self.conversation_id)


class TimedStore:
    """A store that adds up the time spent in ``load`` and ``save``; everything else is passed through.

    ``timed`` wraps a store with a turn log in ``TimedTurnLogStore``, which times ``load_for_turn`` too.
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self.seconds = 0.0

    def load(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> Any:
        started = time.perf_counter()
        try:
            return self.store.load(conversation_id, user_id=user_id, room_id=room_id)
        finally:
            self.seconds += time.perf_counter() - started

    def save(self, instance: Any, *, expected_version: int | None, **retention: Any) -> int:
        started = time.perf_counter()
        try:
            return int(self.store.save(instance, expected_version=expected_version, **retention))
        finally:
            self.seconds += time.perf_counter() - started

    def delete(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> bool:
        return bool(self.store.delete(conversation_id, user_id=user_id, room_id=room_id))

    def list(self, *, user_id: str | None = None, room_id: str | None = None) -> Any:
        return self.store.list(user_id=user_id, room_id=room_id)

    def expire(self, *, older_than: float) -> int:
        return int(self.store.expire(older_than=older_than))

    def transcript(self, conversation_id: str, *, user_id: str | None = None, room_id: str | None = None) -> Any:
        return self.store.transcript(conversation_id, user_id=user_id, room_id=room_id)

    def close(self) -> None:
        self.store.close()


class TimedTurnLogStore(TimedStore):
    """``TimedStore`` of a store that keeps its turn log apart: what a turn loads is the hot record."""

    def load_for_turn(
        self,
        conversation_id: str,
        *,
        user_id: str | None = None,
        room_id: str | None = None,
        message_id: str | None = None,
    ) -> Any:
        started = time.perf_counter()
        try:
            return self.store.load_for_turn(conversation_id, user_id=user_id, room_id=room_id, message_id=message_id)
        finally:
            self.seconds += time.perf_counter() - started

    async def aload_for_turn(self, conversation_id: str, **kwargs: Any) -> Any:
        return self.load_for_turn(conversation_id, **kwargs)


def timed(store: Any) -> TimedStore:
    """The timing wrapper that shows the manager what the store can do (a library before the split has no
    ``load_for_turn``)."""
    return TimedTurnLogStore(store) if hasattr(store, "load_for_turn") else TimedStore(store)


# --- the record -----------------------------------------------------------------------


def _encoded(instance: Any) -> Any:
    from llm_fsm.stores.codec import SizeLimits, encode

    limits = SizeLimits(max_record_bytes=None, max_context_bytes=None)
    try:
        return encode(instance, expected_version=instance.version, limits=limits, split=True)
    except TypeError:  # a library before the split: the whole instance is the record
        return encode(instance, expected_version=instance.version, limits=limits)


def hot_record(instance: Any) -> str:
    """The text a durable store reads and rewrites for the conversation on every turn (SQLite's ``record`` column,
    Redis's ``record`` field): the hot record, or the whole instance for a library before the split."""
    return str(_encoded(instance).record)


def turn_log_bytes(instance: Any) -> int:
    """Bytes of what the stores keep apart from the hot record: turn records and (message id, reply) pairs."""
    encoded = _encoded(instance)
    turns = sum(len(text.encode("utf-8")) for _, text in getattr(encoded, "turns", []))
    return turns + sum(_size(list(pair)) for pair in getattr(encoded, "replies", []))


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def anatomy(instance: Any) -> dict[str, Any]:
    """Bytes of the (hot) record and of its parts (each part measured as compact JSON on its own), and of the turn
    log kept beside it. ``instance`` is the whole conversation, as ``store.load`` returns it."""
    record = hot_record(instance)
    data = json.loads(record)
    total = len(record.encode("utf-8"))
    conversation = (data.get("context") or {}).get("conversation") or {}
    exchanges = conversation.get("exchanges") or []
    window = 2 * int(conversation.get("max_history_size") or 0)
    parts = {
        "turn records": _size(data.get("turns", [])),
        "trace": _size(data.get("trace", [])),
        "transcript": _size(conversation),
        "message ids": _size(data.get("processed_messages", {})),
        "context data": _size((data.get("context") or {}).get("data", {})),
    }
    parts["everything else"] = max(0, total - sum(parts.values()))
    return {
        "bytes": total,
        "turn_log_bytes": turn_log_bytes(instance),
        "parts": parts,
        "transcript_in_prompt_window": _size(exchanges[-window:] if window else []),
        "turn_records": len(instance.turns),
        "message_ids": len(instance.processed_messages),
        "trace_events": len(data.get("trace", [])),
        "transcript_messages": len(exchanges),
        "indented_bytes": len(json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8")),
    }


def record_growth(turns: int, *, message_ids: bool) -> dict[int, dict[str, Any]]:
    """Anatomy of the record at the RECORD_POINTS (and the last turn), on the memory store."""
    points = sorted({p for p in RECORD_POINTS if p <= turns} | {turns})
    conversation = Conversation("memory://", message_ids=message_ids)
    out: dict[int, dict[str, Any]] = {}
    for turn in range(1, turns + 1):
        conversation.step()
        if turn in points:
            out[turn] = anatomy(conversation.instance())
    return out


# --- load + save per turn -----------------------------------------------------------------


class Lockstep:
    """One conversation per store, all advanced turn by turn in ABBA order (forward on one turn, backward on the next).

    Records, per store and turn, the ms spent in ``load`` + ``save`` and the ms
    of the whole ``process_message``.
    """

    def __init__(self, urls: dict[str, str], run: int = 0) -> None:
        from llm_fsm.stores import open_store

        self.names = list(urls)
        self.run = run
        self.stores = {name: timed(open_store(urls[name].format(run=run))) for name in self.names}
        self.conversations = {name: Conversation(self.stores[name]) for name in self.names}
        self.store_ms: dict[str, list[float]] = {name: [] for name in self.names}
        self.turn_ms: dict[str, list[float]] = {name: [] for name in self.names}
        gc.collect()

    def advance(self, turns: int) -> None:
        for _ in range(turns):
            turn = len(self.store_ms[self.names[0]]) + 1
            for name in self.names if (turn + self.run) % 2 == 0 else self.names[::-1]:
                store = self.stores[name]
                store.seconds = 0.0
                started = time.perf_counter()
                self.conversations[name].step()
                elapsed = time.perf_counter() - started
                self.store_ms[name].append(store.seconds * 1000.0)
                self.turn_ms[name].append(elapsed * 1000.0)

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


def medians(runs: list[dict[str, dict[str, list[float]]]]) -> dict[str, dict[str, list[float]]]:
    """Per store and series, the median over runs of each turn's figure."""
    first = runs[0]
    return {
        name: {
            key: [statistics.median(r[name][key][i] for r in runs) for i in range(len(values))]
            for key, values in series.items()
        }
        for name, series in first.items()
    }


def per_turn(urls: dict[str, str], turns: int, runs: int) -> dict[str, dict[str, list[float]]]:
    """Per store: ms in load + save and ms of the whole ``process_message``, per turn (median over runs)."""
    collected = []
    for run in range(runs):
        lockstep = Lockstep(urls, run)
        try:
            lockstep.advance(turns)
        finally:
            lockstep.close()
        collected.append(
            {name: {"load_save_ms": lockstep.store_ms[name], "turn_ms": lockstep.turn_ms[name]} for name in urls}
        )
    return medians(collected)


def windows(turns: int) -> dict[str, tuple[int, int]]:
    """Named turn ranges (1-based, inclusive) the per-turn figures are averaged over."""
    out = {"turn 1": (1, 1)}
    if turns >= 100:
        out["turns 91-100"] = (91, 100)
    last_from = max(1, turns - 99)
    out[f"turns {last_from}-{turns}" if last_from < turns else f"turn {turns}"] = (last_from, turns)
    return out


def summarise_per_turn(raw: dict[str, dict[str, list[float]]], turns: int) -> dict[str, Any]:
    spans = windows(turns)
    out: dict[str, Any] = {"windows": {k: list(v) for k, v in spans.items()}, "stores": {}}
    for name, series in raw.items():
        entry: dict[str, Any] = {}
        for label, (a, b) in spans.items():
            entry[label] = {
                "load_save_ms": statistics.fmean(series["load_save_ms"][a - 1 : b]),
                "turn_ms": statistics.fmean(series["turn_ms"][a - 1 : b]),
            }
        out["stores"][name] = entry
    memory = out["stores"].get("memory://")
    if memory:
        for entry in out["stores"].values():
            for label in spans:
                entry[label]["x_memory"] = entry[label]["load_save_ms"] / memory[label]["load_save_ms"]
    out["last_window"] = list(spans)[-1]
    return out


# --- throughput -------------------------------------------------------------------------


def _throughput_worker(url: str, seconds: float, ready: Any, go: Any, out: Any) -> None:
    _use_library(REPO_ROOT)
    conversations = [Conversation(url) for _ in range(3)]
    for conversation in conversations:
        for _ in range(60):  # past turn 50, where the record stops growing
            conversation.step()
    ready.put(os.getpid())
    go.wait()
    done = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        conversations[done % len(conversations)].step()
        done += 1
    out.put(done)


def turns_per_second(url: str, workers: int, seconds: float) -> float:
    """Engine turns per second (store included) of ``workers`` processes, each on its own conversations."""
    ctx = mp.get_context("spawn")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_throughput_worker, args=(url, seconds, ready, go, out)) for _ in range(workers)]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            ready.get(timeout=300)
        go.set()
        total = sum(out.get(timeout=300) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    return total / seconds


# --- redis ----------------------------------------------------------------------------------


class RedisServer:
    """A throwaway redis-server: free loopback port, temp dir, no persistence (as tests/stores/redis_server.py)."""

    def __init__(self, binary: str) -> None:
        self.directory = tempfile.mkdtemp(prefix="bench-redis-")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--dir", self.directory, "--daemonize", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


@contextlib.contextmanager
def redis_url(given: str | None, notes: list[str]) -> Iterator[str | None]:
    if given:
        from llm_fsm.errors import ConversationNotFoundError, StoreError
        from llm_fsm.stores import open_store

        try:
            store = open_store(given)
            try:
                store.load("bench-stores-ping")
            finally:
                store.close()
        except ConversationNotFoundError:
            pass
        except StoreError as exc:
            notes.append(f"{given} cannot be used ({exc}): the Redis rows are skipped")
            given = None
        yield given
        return
    binary = shutil.which("redis-server")
    if binary is None:
        notes.append("redis-server is not installed (apt-get install redis-server): the Redis rows are skipped")
        yield None
        return
    try:
        server = RedisServer(binary)
    except RuntimeError as exc:
        notes.append(f"redis-server could not be started ({exc}): the Redis rows are skipped")
        yield None
        return
    try:
        yield server.url
    finally:
        server.stop()


# --- postgres -------------------------------------------------------------------------------

POSTGRES = "postgres (localhost)"


@contextlib.contextmanager
def postgres_url(given: str | None, notes: list[str]) -> Iterator[str | None]:
    """``given`` when it can be used, else a throwaway cluster's URL (stopped and removed afterwards), else None."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        notes.append('psycopg is not installed (pip install -e ".[postgres]"): the PostgreSQL rows are skipped')
        yield None
        return
    if given:
        from llm_fsm.errors import StoreError
        from llm_fsm.stores import open_store

        try:
            store = open_store(given)
            try:
                store.list(user_id="bench-stores-ping")
            finally:
                store.close()
        except StoreError as exc:
            notes.append(f"{given} cannot be used ({exc}): the PostgreSQL rows are skipped")
            given = None
        yield given
        return
    sys.path.insert(0, str(REPO_ROOT / "tests" / "stores"))
    from postgres_server import PostgresServer, why_not

    reason = why_not()
    if reason is not None:
        notes.append(f"{reason}: the PostgreSQL rows are skipped")
        yield None
        return
    try:
        server = PostgresServer().start()
    except RuntimeError as exc:
        notes.append(f"PostgreSQL could not be started ({exc}): the PostgreSQL rows are skipped")
        yield None
        return
    try:
        yield server.url(schema="bench")
    finally:
        server.destroy()


# --- before/after in one run ----------------------------------------------------------------


def extract_revision(revision: str, into: Path) -> Path:
    """``llm_fsm/`` of ``revision`` (``git archive``, read-only on the repository) under ``into``."""
    done = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", revision, "llm_fsm"], capture_output=True
    )
    if done.returncode != 0:
        raise SystemExit(f"git archive {revision} failed: {done.stderr.decode(errors='replace').strip()}")
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as archive:
        archive.extractall(into, filter="data")
    return into


def worker() -> None:
    """``--worker``: a Lockstep of stores driven over stdin/stdout, one JSON line per request.

    Requests: ``{"op": "start", "run": n, "urls": {name: url}}`` (``{tmp}`` in a URL is the worker's
    scratch directory, ``{run}`` the run), ``{"op": "advance", "turns": k}`` (answers with the
    load + save ms of the turns just run and the record's size), ``{"op": "stop"}``.
    """
    tmp = Path(tempfile.mkdtemp(prefix="bench-stores-worker-"))
    lockstep: Lockstep | None = None
    try:
        for line in sys.stdin:
            job = json.loads(line)
            answer: dict[str, Any] = {}
            if job["op"] == "start":
                if lockstep is not None:
                    lockstep.close()
                urls = {name: url.replace("{tmp}", str(tmp)) for name, url in job["urls"].items()}
                lockstep = Lockstep(urls, int(job["run"]))
            elif job["op"] == "advance":
                assert lockstep is not None
                done = len(lockstep.store_ms["memory://"])
                lockstep.advance(int(job["turns"]))
                answer = {name: lockstep.store_ms[name][done:] for name in lockstep.names}
                memory = lockstep.conversations["memory://"]
                answer["hot_record_bytes"] = len(hot_record(memory.instance()).encode("utf-8"))
            elif job["op"] == "stop":
                break
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
    finally:
        if lockstep is not None:
            lockstep.close()
        shutil.rmtree(tmp, ignore_errors=True)


class _Worker:
    """A ``--worker`` subprocess on one library directory."""

    def __init__(self, library: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--library", str(library)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT
        )

    def request(self, job: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the worker on {job} stopped with {self.process.wait()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()  # the worker's loop ends at end of input
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


AGAINST_URLS = {
    "memory://": "memory://",
    SQLITE: "sqlite:///{tmp}/full{run}.db",
    SQLITE_NORMAL: "sqlite:///{tmp}/normal{run}.db?synchronous=NORMAL",
    "files (fsync, default)": "file://{tmp}/files{run}",
}
"""The stores both sides of ``--against`` run (and Redis, when there is one)."""


def against(revision: str, turns: int, runs: int, chunk: int = 10, redis: str | None = None) -> dict[str, Any]:
    """This tree and the library at ``revision``, each in its own worker process, alternating.

    Both workers run the same conversations on the ``AGAINST_URLS`` stores; they take
    turns ``chunk`` user turns at a time in ABBA order, so load on the machine
    hits both alike. ``runs`` fresh conversations a side; per turn, the median over runs.
    """
    urls = dict(AGAINST_URLS)
    if redis:
        urls["redis (localhost)"] = redis
    scratch = Path(tempfile.mkdtemp(prefix="bench-stores-rev-"))
    workers: dict[str, _Worker] = {}
    try:
        workers["before"] = _Worker(extract_revision(revision, scratch))
        workers["after"] = _Worker(REPO_ROOT)
        series: dict[str, list[dict[str, dict[str, list[float]]]]] = {"before": [], "after": []}
        record: dict[str, int] = {}
        step = 0
        for run in range(runs):
            for worker in workers.values():
                worker.request({"op": "start", "run": run, "urls": urls})
            ms: dict[str, dict[str, list[float]]] = {side: {name: [] for name in urls} for side in workers}
            done = 0
            while done < turns:
                k = min(chunk, turns - done)
                for side in ("after", "before") if step % 2 == 0 else ("before", "after"):
                    got = workers[side].request({"op": "advance", "turns": k})
                    for name in ms[side]:
                        ms[side][name].extend(got[name])
                    record[side] = int(got["hot_record_bytes"])
                step += 1
                done += k
            for side in workers:
                series[side].append({name: {"load_save_ms": values} for name, values in ms[side].items()})
    finally:
        try:
            for worker in workers.values():
                worker.close()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    last_from = max(1, turns - 99)
    out: dict[str, Any] = {"revision": revision, "runs_per_side": runs, "chunk": chunk, "window": [last_from, turns]}
    for side, runs_of_side in series.items():
        per = medians(runs_of_side)
        stores = {name: statistics.fmean(per[name]["load_save_ms"][last_from - 1 :]) for name in urls}
        out[side] = {
            "hot_record_bytes": record[side],
            "sqlite_ms_per_turn": stores[SQLITE],
            "sqlite_normal_ms_per_turn": stores[SQLITE_NORMAL],
            "memory_ms_per_turn": stores["memory://"],
            "stores_ms_per_turn": stores,
        }
    return out


# --- report ---------------------------------------------------------------------------------


def summary_line(result: dict[str, Any]) -> dict[str, Any]:
    """The two figures the hot-record change is judged by, with their targets."""
    turns = result["turns"]
    record = result["record"][str(turns)]["bytes"]
    per_turn_result = result.get("per_turn")
    sqlite_ms = None
    if per_turn_result and SQLITE in per_turn_result["stores"]:
        sqlite_ms = per_turn_result["stores"][SQLITE][per_turn_result["last_window"]]["load_save_ms"]
    compared = result.get("against")
    if compared:
        before_ms = compared["before"]["sqlite_ms_per_turn"]
        now_ms = compared["after"]["sqlite_ms_per_turn"]
        basis = (
            f"{compared['revision']} measured in this run, {compared['runs_per_side']} runs a side, "
            f"alternating every {compared['chunk']} turns"
        )
        before_record = compared["before"]["hot_record_bytes"]
    elif turns == BEFORE["turns"]:
        before_ms = BEFORE["sqlite_ms_per_turn"]
        now_ms = sqlite_ms
        basis = f"recorded at {BEFORE['revision']} on {BEFORE['date']}, {BEFORE['machine']}; indicative only"
        before_record = BEFORE["hot_record_bytes"]
    else:  # the recorded figure is for another length of conversation
        before_ms, now_ms, basis, before_record = None, sqlite_ms, "none for this --turns; use --against REV", None
    out: dict[str, Any] = {
        "turns": turns,
        "hot_record_bytes": record,
        "hot_record_target_bytes": HOT_RECORD_TARGET_BYTES,
        "hot_record_met": record <= HOT_RECORD_TARGET_BYTES,
        "hot_record_before_bytes": before_record,
        "sqlite_ms_per_turn": now_ms,
        "sqlite_before_ms_per_turn": before_ms,
        "sqlite_basis": basis,
    }
    if now_ms is not None and before_ms:
        out["sqlite_ratio_to_before"] = now_ms / before_ms
        out["sqlite_met"] = now_ms / before_ms <= SQLITE_TARGET_FRACTION
    if compared:
        out["sqlite_normal_ms_per_turn"] = compared["after"]["sqlite_normal_ms_per_turn"]
        out["sqlite_normal_before_ms_per_turn"] = compared["before"]["sqlite_normal_ms_per_turn"]
        out["sqlite_normal_ratio_to_before"] = (
            out["sqlite_normal_ms_per_turn"] / out["sqlite_normal_before_ms_per_turn"]
        )
    if result.get("fsync_ms"):
        out["fsync_ms"] = statistics.fmean(result["fsync_ms"])
    return out


def fsync_ms(directory: Path, samples: int = 50) -> float:
    """Median ms of one 4 KB write + fdatasync in ``directory``: the floor under every synchronous=FULL commit.

    SQLite in WAL mode with synchronous=FULL syncs the log once per commit, whatever the record's size,
    so where this is large it bounds how much a smaller record can save.
    """
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    times = []
    try:
        for _ in range(samples):
            os.write(fd, b"x" * 4096)
            started = time.perf_counter()
            os.fdatasync(fd)
            times.append((time.perf_counter() - started) * 1000.0)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times)


def filesystem_of(path: Path) -> str:
    """``<path> (<fs type>)`` from /proc/mounts (longest mount point containing the path), for the report."""
    best, kind = "", "unknown filesystem"
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 3:
                mount = fields[1]
                inside = str(path) == mount or str(path).startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, kind = mount, fields[2]
    return f"{path} ({kind})"


def _kb(n: int) -> str:
    return f"{n / 1000:.1f} KB"


def print_report(result: dict[str, Any]) -> None:
    turns = result["turns"]
    print(f"Stores on the engine's real record — {result['definition']}, {turns:,} user turns")
    print("(opening + 10 form turns + 'read it back' turns in confirmation; zero-latency fake model)")
    print()
    for label, key in (("no message ids", "record"), ("a message_id on every turn", "record_with_message_ids")):
        growth = result.get(key)
        if not growth:
            continue
        print(f"Stored record ({label}): compact JSON bytes of the hot record, and the share of each part")
        parts = list(next(iter(growth.values()))["parts"])
        print(
            f"  {'turn':>6}{'record':>10}{'indented':>10}"
            + "".join(f"{p:>16}" for p in parts)
            + f"{'in window':>11}{'turn log':>10}"
        )
        for turn, entry in growth.items():
            total = entry["bytes"]
            shares = "".join(f"{entry['parts'][p] / total:>16.1%}" for p in parts)
            window = entry["transcript_in_prompt_window"] / total
            print(
                f"  {int(turn):>6,}{_kb(total):>10}{_kb(entry['indented_bytes']):>10}{shares}{window:>11.1%}"
                f"{_kb(entry.get('turn_log_bytes', 0)):>10}"
            )
        last = growth[str(turns)]
        kept = (
            f"{last['turn_records']} turn records, {last.get('message_ids', 0)} message ids, "
            f"{last['trace_events']} trace events, {last['transcript_messages']} transcript messages"
        )
        not_read = (last["parts"]["turn records"] + last["parts"]["trace"]) / last["bytes"]
        print(f"  at turn {turns:,}: {kept}; turn records + trace = {not_read:.1%} of the record")
        print()
    print(
        "  'in window' = the transcript messages the prompt's history window shows; the prompt reads none of the\n"
        "  turn records, trace or message ids. 'indented' = the same record as the file store writes it (indent 2).\n"
        "  'turn log' = turn records and (message id, reply) pairs the stores keep apart and append to, not\n"
        "  rewritten per turn (0 for a library that keeps them inside the record).\n"
    )

    per_turn_result = result.get("per_turn")
    if per_turn_result:
        labels = list(per_turn_result["windows"])
        last = per_turn_result["last_window"]
        print(
            f"load + save per turn, ms and x memory (median of {result['runs']} run(s) per turn, mean over the "
            f"turns named; files in {result['scratch_filesystem']})"
        )
        print(f"  {'':<36}" + "".join(f"{label:>18}" for label in labels) + f"{'turn ms':>10}")
        for name, entry in per_turn_result["stores"].items():
            cells = "".join(
                f"{entry[label]['load_save_ms']:>10.3f}{entry[label].get('x_memory', float('nan')):>7.1f}x "
                for label in labels
            )
            print(f"  {name:<36}{cells}{entry[last]['turn_ms']:>10.3f}")
        print(f"  'turn ms': the whole process_message over {last}, store included.")
        print()

    throughput = result.get("turns_per_second")
    if throughput:
        print(
            f"turns per second, engine + store, workers on their own conversations past turn 60 "
            f"({result['throughput_window_s']:g} s window, {os.cpu_count()} CPUs)"
        )
        print(f"  {'store':<38}{'1 worker':>12}{'4 workers':>12}")
        for name, by_workers in throughput.items():
            print(f"  {name:<38}{by_workers['1']:>12.0f}{by_workers['4']:>12.0f}")
        print()

    compared = result.get("against")
    if compared:
        b, a = compared["before"], compared["after"]
        print(
            f"against {compared['revision']} (same run, worker processes alternating every {compared['chunk']} "
            f"turns, ABBA; median of {compared['runs_per_side']} runs per turn, mean of turns "
            f"{compared['window'][0]:,}-{compared['window'][1]:,}):"
        )
        print(f"  {'':<36}{'before':>12}{'this tree':>12}{'ratio':>8}")
        print(
            f"  {'record at turn ' + format(turns, ','):<36}{_kb(b['hot_record_bytes']):>12}"
            f"{_kb(a['hot_record_bytes']):>12}{a['hot_record_bytes'] / b['hot_record_bytes']:>8.2f}"
        )
        print("  load + save ms per turn:")
        for name, before_ms in b["stores_ms_per_turn"].items():
            after_ms = a["stores_ms_per_turn"][name]
            print(f"    {name:<34}{before_ms:>12.3f}{after_ms:>12.3f}{after_ms / before_ms:>8.2f}")
        print()

    s = result["summary"]
    record_verdict = "met" if s["hot_record_met"] else "MISSED"
    line = (
        f"SUMMARY hot record at turn {s['turns']:,}: {_kb(s['hot_record_bytes'])} ({s['hot_record_bytes']:,} bytes; "
        f"target <= {_kb(HOT_RECORD_TARGET_BYTES)}: {record_verdict})"
    )
    if s["hot_record_before_bytes"]:
        line = line[:-1] + f"; before: {_kb(s['hot_record_before_bytes'])})"
    if s["sqlite_ms_per_turn"] is not None:
        line += f" | SQLite load+save per turn: {s['sqlite_ms_per_turn']:.3f} ms"
        if "sqlite_ratio_to_before" not in s:
            line += f" (before: {s['sqlite_basis']})"
        if "sqlite_ratio_to_before" in s:
            verdict = "met" if s["sqlite_met"] else "MISSED"
            line += (
                f" = {s['sqlite_ratio_to_before']:.2f}x before ({s['sqlite_before_ms_per_turn']:.3f} ms, "
                f"{s['sqlite_basis']}; target <= 0.33x: {verdict})"
            )
        if "sqlite_normal_ratio_to_before" in s:
            line += (
                f" | synchronous=NORMAL: {s['sqlite_normal_ms_per_turn']:.3f} ms = "
                f"{s['sqlite_normal_ratio_to_before']:.2f}x before ({s['sqlite_normal_before_ms_per_turn']:.3f} ms)"
            )
        if "fsync_ms" in s:
            line += f" | one fdatasync here: {s['fsync_ms']:.3f} ms (FULL pays one per commit)"
    print(line)
    for note in result["notes"]:
        print(f"note: {note}")


# --- main -----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--listing" in argv:  # what a page of a listing costs as the store fills: benchmarks/stores_listing.py
        sys.path.insert(0, str(REPO_ROOT))
        from stores_listing import main as listing

        return listing([arg for arg in argv if arg != "--listing"])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listing", action="store_true", help="the listing benchmark instead (stores_listing.py)")
    parser.add_argument("--turns", type=int, default=None, help="user turns per conversation (default 1000)")
    parser.add_argument("--runs", type=int, default=None, help="runs of the per-turn measurement (default 3)")
    parser.add_argument(
        "--quick", action="store_true", help="200 turns, 1 run, 1 s throughput window (unless given otherwise)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--redis-url", default=None, help="use this Redis instead of starting one")
    parser.add_argument(
        "--postgres-url", default=None, help="use this PostgreSQL database instead of starting a throwaway cluster"
    )
    parser.add_argument("--no-throughput", action="store_true", help="skip turns per second with worker processes")
    parser.add_argument("--throughput-seconds", type=float, default=None, help="throughput window (default 3 s)")
    parser.add_argument(
        "--against", metavar="REV", default=None, help="measure the library at git revision REV beside this tree"
    )
    parser.add_argument("--against-runs", type=int, default=3, help="runs a side for --against (default 3)")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the SQLite and file stores write (default: the temp dir)"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--library", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    quick = {"turns": 200, "runs": 1, "throughput_seconds": 1.0}
    full = {"turns": 1000, "runs": 3, "throughput_seconds": 3.0}
    for name, value in (quick if args.quick else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.turns < 1 or args.runs < 1:
        parser.error("--turns and --runs must be at least 1")
    _use_library(args.library.resolve())

    if args.worker:
        worker()
        return 0

    notes: list[str] = []
    result: dict[str, Any] = {
        "definition": os.path.relpath(DEFINITION, Path.cwd()),
        "turns": args.turns,
        "runs": args.runs,
        "record": {str(k): v for k, v in record_growth(args.turns, message_ids=False).items()},
        "record_with_message_ids": {str(k): v for k, v in record_growth(args.turns, message_ids=True).items()},
        "notes": notes,
    }
    tmp = Path(tempfile.mkdtemp(prefix="bench-stores-", dir=args.dir))
    result["scratch_filesystem"] = filesystem_of(tmp.parent.resolve())
    result["fsync_ms"] = [fsync_ms(tmp)]
    try:
        with redis_url(args.redis_url, notes) as redis, postgres_url(args.postgres_url, notes) as postgres:
            urls = {
                "memory://": "memory://",
                SQLITE: f"sqlite:///{tmp}/full{{run}}.db",
                SQLITE_NORMAL: f"sqlite:///{tmp}/normal{{run}}.db?synchronous=NORMAL",
                "files (fsync, default)": f"file://{tmp}/files-fsync{{run}}",
                "files (fsync=false)": f"file://{tmp}/files-nofsync{{run}}?fsync=false",
            }
            if redis:
                urls["redis (localhost)"] = redis
            if postgres:
                urls[POSTGRES] = postgres
            result["per_turn"] = summarise_per_turn(per_turn(urls, args.turns, args.runs), args.turns)
            if not args.no_throughput:
                targets = {SQLITE: f"sqlite:///{tmp}/throughput.db"}
                if postgres:
                    targets = {POSTGRES: postgres, **targets}
                if redis:
                    targets = {"redis (localhost)": redis, **targets}
                result["throughput_window_s"] = args.throughput_seconds
                result["turns_per_second"] = {
                    name: {str(n): turns_per_second(url, n, args.throughput_seconds) for n in (1, 4)}
                    for name, url in targets.items()
                }
            if args.against:
                result["against"] = against(args.against, args.turns, max(1, args.against_runs), redis=redis)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    probe = Path(tempfile.mkdtemp(prefix="bench-stores-", dir=args.dir))
    try:
        result["fsync_ms"].append(fsync_ms(probe))  # the disk may be busier (or idler) at the end
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    result["summary"] = summary_line(result)

    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
