"""``--model scripted:FILE`` behind the API: each conversation replays the file from its start, and one that has
used every reply is answered with a generic 502 (the file's path stays in the server's log)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from llm_fsm.cli._models import make_llm
from llm_fsm.manager import FSMManager
from llm_fsm.stores import open_store

from .conftest import MakeServer, Server

REPLIES = ["Hello! Your name and card, please.", "First answer.", "Second answer."]


@pytest.fixture
def scripted(make_server: MakeServer, tmp_path: Path) -> Server:
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(REPLIES), encoding="utf-8")
    manager = FSMManager(llm_interface=make_llm(f"scripted:{replies}"), store=open_store("memory://"))
    return make_server(manager=manager)


def test_interleaved_conversations_each_get_the_script_from_its_start(scripted: Server) -> None:
    first, second = scripted.start(), scripted.start()
    replies = [(cid, scripted.send(cid, "hello").json()["reply"]) for cid in (first, second, first, second)]
    assert replies == [
        (first, "First answer."),
        (second, "First answer."),
        (first, "Second answer."),
        (second, "Second answer."),
    ]


def opening(server: Server) -> str:
    response = server.client.post("/v1/conversations", json={"definition": "signup"}, headers=server.headers())
    return str(response.json()["opening"])


def test_an_opening_is_the_scripts_first_reply_in_every_conversation(scripted: Server) -> None:
    assert [opening(scripted) for _ in range(3)] == [REPLIES[0]] * 3


def test_a_conversation_that_used_the_whole_script_gets_a_502_without_the_files_path(
    scripted: Server, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cid = scripted.start()
    scripted.send(cid, "one")
    scripted.send(cid, "two")
    with caplog.at_level(logging.WARNING, logger="llm_fsm.server"):
        response = scripted.send(cid, "three")
    assert response.status_code == 502 and response.json()["error"]["code"] == "model_error"
    assert str(tmp_path) not in response.text and "replies.json" not in response.text
    assert "has no reply left for this conversation (3 used)" in caplog.text  # the operator's detail: the log


def test_another_conversation_still_plays_the_script_after_one_ran_out(scripted: Server) -> None:
    spent = scripted.start()
    for message in ("one", "two", "three"):
        scripted.send(spent, message)
    fresh = scripted.start()
    assert scripted.send(fresh, "one").json()["reply"] == "First answer."


def test_a_conversation_that_used_the_whole_script_is_told_so_not_to_try_again(scripted: Server) -> None:
    """Sending again can never help a script that is over: the 502 says what happened and what does help."""
    cid = scripted.start()
    scripted.send(cid, "one")
    scripted.send(cid, "two")
    message = scripted.send(cid, "three").json()["error"]["message"]
    assert "try again" not in message
    assert message == "the scripted model has no reply left for this conversation; start a new conversation"
