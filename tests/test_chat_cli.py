"""``llm-fsm chat`` / ``run`` / ``explain`` / ``trace`` / ``conversations`` through click, with a scripted model."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fsm.cli import chat as chat
from llm_fsm.cli._app import main
from llm_fsm.llm.fakes import ScriptedLLM

GREETING = str(Path(__file__).resolve().parents[1] / "definitions" / "simple_greeting.yaml")


def reply(target, message, **update):
    return {"transition": {"target_state": target, "context_update": update}, "message": message}


@pytest.fixture
def scripted(monkeypatch):
    def install(*replies):
        llm = ScriptedLLM(list(replies))
        monkeypatch.setattr(chat, "make_llm", lambda model, **kw: llm)
        return llm

    return install


@pytest.fixture
def store(tmp_path):
    return f"sqlite:///{tmp_path / 'c.db'}"


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def test_run_plays_messages_and_shows_each_transition_and_why(scripted, store, tmp_path):
    scripted(reply("greeting", "Hi! Your name?"), reply("farewell", "Bye Ann!", name="Ann"))
    messages = tmp_path / "m.txt"
    messages.write_text("I'm Ann\n")
    result = run("run", GREETING, "--model", "x", "--store", store, "--input", str(messages))
    assert result.exit_code == 0, result.output
    assert "assistant: Bye Ann!" in result.output
    assert "[greeting → farewell] proposal_accepted" in result.output
    assert "conversation ended in state farewell" in result.output
    assert '{"name": "Ann"}' in result.output


def test_chat_reads_from_the_terminal_and_can_show_the_prompt(scripted, store):
    scripted(reply("greeting", "Hi! Your name?"), reply("farewell", "Bye Ann!", name="Ann"))
    result = run("chat", GREETING, "--model", "x", "--store", store, "--show-prompt", input="I'm Ann\n")
    assert result.exit_code == 0, result.output
    assert "<current_state>greeting</current_state>" in result.output
    assert "Bye Ann!" in result.output


def test_the_prompt_shown_is_the_one_sent_to_a_model_that_takes_the_schema(monkeypatch, store):
    class SchemaModel(ScriptedLLM):
        sends_reply_schema = True

    llm = SchemaModel([reply("greeting", "Hi! Your name?"), reply("farewell", "Bye Ann!", name="Ann")])
    monkeypatch.setattr(chat, "make_llm", lambda model, **kw: llm)
    result = run("chat", GREETING, "--model", "x", "--store", store, "--show-prompt", input="I'm Ann\n")
    assert result.exit_code == 0, result.output
    assert "following the response schema" in result.output and "<response_format>" not in result.output
    assert all("<response_format>" not in request.system_prompt for request in llm.requests)


def test_chat_resume_continues_a_stored_conversation(scripted, store):
    scripted(reply("greeting", "Hi! Your name?"))
    first = run("chat", GREETING, "--model", "x", "--store", store, input="")
    conversation_id = first.output.split("conversation ")[1].split()[0]
    scripted(reply("farewell", "Bye Ann!", name="Ann"))
    result = run("chat", GREETING, "--model", "x", "--store", store, "--resume", conversation_id, input="Ann\n")
    assert result.exit_code == 0, result.output
    assert f"resuming {conversation_id} in state greeting" in result.output
    assert "Bye Ann!" in result.output


def test_explain_and_trace_read_a_stored_conversation(scripted, store):
    scripted(reply("greeting", "Hi! Your name?"), reply("farewell", "Bye!", name="Ann"))
    first = run("chat", GREETING, "--model", "x", "--store", store, input="Ann\n")
    conversation_id = first.output.split("conversation ")[1].split()[0]
    explained = run("explain", conversation_id, "--store", store)
    assert json.loads(explained.output)["verdict"]["kind"] == "proposal_accepted"
    traced = run("trace", conversation_id, "--store", store)
    assert "transition" in traced.output and "end" in traced.output
    listed = run("conversations", "--store", store)
    assert conversation_id in listed.output


def test_no_model_configured_is_a_clear_error_not_a_traceback(store, monkeypatch):
    monkeypatch.delenv("LLM_FSM_MODEL", raising=False)
    result = CliRunner().invoke(main, ["chat", GREETING, "--store", store], input="")
    assert result.exit_code == 2
    assert "no model configured" in result.output
    assert "Traceback" not in result.output


def test_an_unknown_conversation_id_is_a_clear_error(store):
    result = CliRunner().invoke(main, ["trace", "no-such-id", "--store", store])
    assert result.exit_code == 2  # unknown input, as for an unknown file
    assert "error:" in result.output and "Traceback" not in result.output
