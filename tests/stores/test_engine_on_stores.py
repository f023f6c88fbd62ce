"""The engine on durable stores: many processes, restarts, edited definitions, a Redis that goes away."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llm_fsm.errors import (
    ConversationNotFoundError,
    DefinitionChangedError,
    StoreUnavailableError,
)
from llm_fsm.llm.fakes import FunctionLLM, ScriptedLLM
from llm_fsm.manager import FSMManager
from llm_fsm.stores import open_store

REPO = Path(__file__).resolve().parents[2]
GREETING = REPO / "definitions" / "simple_greeting.yaml"
WORKER = Path(__file__).with_name("engine_worker.py")


def echo(request):
    return {"transition": {"target_state": "", "context_update": {}}, "message": f"re: {request.user_message}"}


def reply(target, message, **update):
    return {"transition": {"target_state": target, "context_update": update}, "message": message}


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind in ("redis", "postgres"):
        return str(request.getfixturevalue(f"{kind}_url"))
    return f"sqlite:///{tmp_path}/conversations.db"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
def test_four_processes_one_hundred_turns_each_every_turn_exactly_once_in_order(kind, tmp_path, request):
    url = _url(kind, tmp_path, request)
    starter = FSMManager(llm_interface=FunctionLLM(echo), store=url)
    cids = [starter.start_conversation(str(GREETING))[0] for _ in range(25)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, str(w), "100", str(GREETING), *cids],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for w in range(4)
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, out
        reports.append(json.loads(out.strip().splitlines()[-1]))

    for cid in cids:
        history = starter.get_conversation_history(cid)[1:]  # after the opening
        assert {m["role"] for m in history[0::2]} == {"user"} and {m["role"] for m in history[1::2]} == {"assistant"}
        users = [m["text"] for m in history[0::2]]
        replies = [m["text"] for m in history[1::2]]
        assert replies == [f"re: {u}" for u in users], "each reply right after its own message"
        expected = sorted(m for report in reports for m in report[cid])
        assert sorted(users) == expected, "every turn exactly once"
        for report in reports:  # each worker's turns in the order it sent them
            mine = [u for u in users if u in set(report[cid])]
            assert mine == report[cid]
        assert starter.get_instance(cid).turn_count == len(expected)


def test_a_conversation_continues_in_a_new_process_exactly_where_it_was(tmp_path):
    url = f"sqlite:///{tmp_path}/c.db"
    first = FSMManager(llm_interface=ScriptedLLM([reply("greeting", "Hi! Name?")]), store=url)
    cid, _ = first.start_conversation(str(GREETING))
    script = (
        "import sys, json;"
        "from llm_fsm.fsm import FSMManager;"
        "from llm_fsm.testing import ScriptedLLM;"
        "m = FSMManager(llm_interface=ScriptedLLM([{'transition': {'target_state': 'farewell', 'context_update': {'name': 'Ann'}}, 'message': 'Bye Ann'}]), store=sys.argv[1]);"
        "print(json.dumps([m.process_message(sys.argv[2], 'Ann'), m.get_current_state(sys.argv[2]), m.get_conversation_data(sys.argv[2])]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, url, cid],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert json.loads(out.stdout) == ["Bye Ann", "farewell", {"name": "Ann"}]
    again = FSMManager(store=url)
    assert again.is_conversation_ended(cid)
    assert [m["role"] for m in again.get_conversation_history(cid)] == ["assistant", "user", "assistant"]


def _copy_definition(tmp_path: Path) -> Path:
    target = tmp_path / "greeting.yaml"
    shutil.copy(GREETING, target)
    return target


def test_an_edited_definition_is_reported_with_the_error_policy(tmp_path):
    definition = _copy_definition(tmp_path)
    url = f"sqlite:///{tmp_path}/c.db"
    cid, _ = FSMManager(llm_interface=ScriptedLLM([reply("greeting", "Hi")]), store=url).start_conversation(
        str(definition)
    )
    definition.write_text(definition.read_text().replace("Saying hello", "Saying hello warmly"))
    strict = FSMManager(
        llm_interface=ScriptedLLM([]), store=url, on_definition_change="error", definition_recheck_seconds=0
    )
    with pytest.raises(DefinitionChangedError):
        strict.process_message(cid, "hi")


def test_an_edited_definition_continues_by_default(tmp_path):
    definition = _copy_definition(tmp_path)
    url = f"sqlite:///{tmp_path}/c.db"
    cid, _ = FSMManager(llm_interface=ScriptedLLM([reply("greeting", "Hi")]), store=url).start_conversation(
        str(definition)
    )
    definition.write_text(definition.read_text().replace("Saying hello", "Saying hello warmly"))
    lenient = FSMManager(llm_interface=ScriptedLLM([reply("farewell", "Bye", name="Ann")]), store=url)
    assert lenient.process_message(cid, "Ann") == "Bye"


@pytest.mark.parametrize("policy", ["continue", "error"])
def test_a_definition_that_no_longer_has_the_current_state_is_an_error_unless_pinned(tmp_path, policy):
    definition = _copy_definition(tmp_path)
    url = f"sqlite:///{tmp_path}/c.db"
    cid, _ = FSMManager(llm_interface=ScriptedLLM([reply("greeting", "Hi")]), store=url).start_conversation(
        str(definition)
    )
    definition.write_text(definition.read_text().replace("greeting", "hello"))
    with pytest.raises(DefinitionChangedError):
        FSMManager(llm_interface=ScriptedLLM([]), store=url, on_definition_change=policy).process_message(cid, "Ann")


def test_a_pinned_conversation_runs_on_its_own_version_when_the_file_loses_its_state(tmp_path):
    # on_definition_change="pin", the default: the store kept the version the conversation started on
    definition = _copy_definition(tmp_path)
    url = f"sqlite:///{tmp_path}/c.db"
    cid, _ = FSMManager(llm_interface=ScriptedLLM([reply("greeting", "Hi")]), store=url).start_conversation(
        str(definition)
    )
    definition.write_text(definition.read_text().replace("greeting", "hello"))
    later = FSMManager(llm_interface=ScriptedLLM([reply("farewell", "Bye", name="Ann")]), store=url)
    assert later.process_message(cid, "Ann") == "Bye"
    assert later.get_current_state(cid) == "farewell"


def test_one_user_can_never_load_another_users_conversation(tmp_path):
    url = f"sqlite:///{tmp_path}/c.db"
    fsm = FSMManager(llm_interface=ScriptedLLM([reply("greeting", "Hi")]), store=url)
    cid, _ = fsm.start_conversation(str(GREETING), user_id="alice", room_id="r1")
    for user, room in [("bob", "r1"), ("alice", "r2"), (None, None)]:
        with pytest.raises(ConversationNotFoundError):
            fsm.process_message(cid, "hi", user_id=user, room_id=room)


def test_a_retried_message_id_is_answered_once_across_processes(tmp_path):
    url = f"sqlite:///{tmp_path}/c.db"
    first = FSMManager(llm_interface=ScriptedLLM([reply("greeting", "Hi"), reply("greeting", "Name?")]), store=url)
    cid, _ = first.start_conversation(str(GREETING))
    assert first.process_message(cid, "hello", message_id="webhook-1") == "Name?"
    second = FSMManager(llm_interface=ScriptedLLM([]), store=url)  # would fail if it called the model
    assert second.process_message(cid, "hello", message_id="webhook-1") == "Name?"
    assert second.get_instance(cid).turn_count == 1


@pytest.mark.slow
def test_redis_stopped_mid_run_gives_a_typed_error_writes_nothing_and_work_continues_after_restart(own_redis):
    fsm = FSMManager(
        llm_interface=FunctionLLM(echo), store=open_store(own_redis.url, socket_timeout=1, connect_timeout=1)
    )
    cid, _ = fsm.start_conversation(str(GREETING))
    fsm.process_message(cid, "one")
    own_redis.shutdown_saving()  # a clean stop that keeps the data for the restart
    with pytest.raises(StoreUnavailableError):
        fsm.process_message(cid, "two")
    own_redis.start()
    instance = fsm.get_instance(cid)
    assert instance.turn_count == 1, "the failed turn left nothing behind"
    assert fsm.process_message(cid, "three") == "re: three"
    users = [m["text"] for m in fsm.get_conversation_history(cid) if m["role"] == "user"]
    assert users == ["one", "three"]


@pytest.mark.slow
def test_redis_going_away_during_the_save_loses_nothing(own_redis, monkeypatch):
    store = open_store(own_redis.url, socket_timeout=1, connect_timeout=1)
    fsm = FSMManager(llm_interface=FunctionLLM(echo), store=store)
    cid, _ = fsm.start_conversation(str(GREETING))
    real_save = store.save

    def save_after_outage(instance, *, expected_version):
        own_redis.shutdown_saving()  # the model was called; Redis disappears before the write
        return real_save(instance, expected_version=expected_version)

    monkeypatch.setattr(store, "save", save_after_outage)
    with pytest.raises(StoreUnavailableError):
        fsm.process_message(cid, "lost in transit")
    monkeypatch.undo()
    own_redis.start()
    assert fsm.get_instance(cid).turn_count == 0
    assert fsm.process_message(cid, "again") == "re: again"
