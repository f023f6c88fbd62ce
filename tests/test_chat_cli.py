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
    explained = run("explain", conversation_id, "--store", store, "--format", "json")
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


# --- users and rooms ------------------------------------------------------------------------------


def _started(output: str) -> str:
    return output.split("conversation ")[1].split()[0]


def test_a_conversation_started_with_a_user_and_room_is_reached_with_them(scripted, store):
    scripted(reply("greeting", "Hi! Your name?"), reply("greeting", "Sorry, your name?"))
    first = run(
        "chat", GREETING, "--model", "x", "--store", store, "--user", "alice", "--room", "support", input="hm\n"
    )
    conversation_id = _started(first.output)
    assert f"--resume {conversation_id} --user alice --room support" in first.output
    assert "Sorry, your name?" in first.output

    listed = run("conversations", "--store", store)
    (row,) = [line for line in listed.output.splitlines() if line.startswith(conversation_id)]
    assert row.split()[3:5] == ["alice", "support"]
    assert listed.output.splitlines()[0].split()[:5] == ["conversation", "status", "state", "user", "room"]

    explained = run(
        "explain", conversation_id, "--store", store, "--user", "alice", "--room", "support", "--format", "json"
    )
    assert explained.exit_code == 0, explained.output
    assert json.loads(explained.output)["state_after"] == "greeting"
    traced = run("trace", conversation_id, "--store", store, "--user", "alice", "--room", "support")
    assert traced.exit_code == 0 and "start" in traced.output

    scripted(reply("farewell", "Bye Ann!", name="Ann"))
    resumed = run(
        "chat", GREETING, "--model", "x", "--store", store, "--resume", conversation_id,
        "--user", "alice", "--room", "support", input="Ann\n",
    )  # fmt: skip
    assert resumed.exit_code == 0, resumed.output
    assert "Bye Ann!" in resumed.output


def test_not_found_says_which_user_and_room_were_used(scripted, store):
    scripted(reply("greeting", "Hi! Your name?"))
    conversation_id = _started(run("chat", GREETING, "--model", "x", "--store", store, "--user", "alice").output)
    for command in (["explain", conversation_id], ["trace", conversation_id]):
        result = CliRunner().invoke(main, [*command, "--store", store])
        assert result.exit_code == 2
        assert "no user and no room" in result.output and "--user" in result.output
    wrong = CliRunner().invoke(main, ["trace", conversation_id, "--store", store, "--user", "bob", "--room", "x"])
    assert "user 'bob' and room 'x'" in wrong.output
    resumed = CliRunner().invoke(
        main, ["chat", GREETING, "--model", "x", "--store", store, "--resume", conversation_id], input=""
    )
    assert resumed.exit_code == 2 and "no user and no room" in resumed.output


def test_conversations_filters_by_user_or_room_alone(scripted, store):
    ids = {}
    for user, room in (("alice", "a"), ("alice", "b"), ("bob", "a")):
        scripted(reply("greeting", "Hi!"))
        args = ["chat", GREETING, "--model", "x", "--store", store, "--user", user, "--room", room]
        ids[user, room] = _started(run(*args, input="").output)

    def listed(*args: str) -> set[str]:
        lines = run("conversations", "--store", store, *args).output.splitlines()[1:]
        return {line.split()[0] for line in lines}

    assert listed("--user", "alice") == {ids["alice", "a"], ids["alice", "b"]}
    assert listed("--room", "a") == {ids["alice", "a"], ids["bob", "a"]}
    assert listed("--user", "alice", "--room", "b") == {ids["alice", "b"]}
    assert listed() == set(ids.values())


def test_run_starts_the_conversation_for_the_user_and_room_given(scripted, store, tmp_path):
    scripted(reply("greeting", "Hi! Your name?"), reply("farewell", "Bye Ann!", name="Ann"))
    messages = tmp_path / "m.txt"
    messages.write_text("I'm Ann\n")
    result = run("run", GREETING, "--model", "x", "--store", store, "--input", str(messages), "--user", "ann")
    assert result.exit_code == 0, result.output
    assert "Bye Ann!" in result.output
    assert run("conversations", "--store", store, "--user", "ann").output.count("\n") == 2


# --- resuming from another folder ---------------------------------------------------------------------


@pytest.fixture
def two_folders(tmp_path, monkeypatch):
    """A definition in ./project, and another working directory to resume from."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "greeting.yaml").write_text(Path(GREETING).read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.chdir(project)
    return project, elsewhere


def test_a_conversation_stores_a_definition_path_that_resolves_from_anywhere(scripted, store, two_folders, monkeypatch):
    project, elsewhere = two_folders
    scripted(reply("greeting", "Hi! Your name?"))
    conversation_id = _started(run("chat", "greeting.yaml", "--model", "x", "--store", store, input="").output)
    assert str(project / "greeting.yaml") in run("conversations", "--store", store).output

    monkeypatch.chdir(elsewhere)
    scripted(reply("farewell", "Bye Ann!", name="Ann"))
    definition = str(project / "greeting.yaml")
    result = run("chat", definition, "--model", "x", "--store", store, "--resume", conversation_id, input="Ann\n")
    assert result.exit_code == 0, result.output
    assert "Bye Ann!" in result.output and "conversation ended in state farewell" in result.output


def test_resuming_a_conversation_stored_with_a_relative_path_uses_the_file_given(
    scripted, store, two_folders, monkeypatch
):
    from llm_fsm.manager import FSMManager

    project, elsewhere = two_folders
    manager = FSMManager(llm_interface=ScriptedLLM([reply("greeting", "Hi!")]), store=store)
    conversation_id, _ = manager.start_conversation("greeting.yaml")  # as typed, like earlier versions stored it

    monkeypatch.chdir(elsewhere)
    (elsewhere / "copy.yaml").write_text((project / "greeting.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    scripted(reply("farewell", "Bye Ann!", name="Ann"))
    result = run("chat", "copy.yaml", "--model", "x", "--store", store, "--resume", conversation_id, input="Ann\n")
    assert result.exit_code == 0, result.output
    assert f"using {elsewhere / 'copy.yaml'} for greeting.yaml (same content)" in result.output
    assert "Bye Ann!" in result.output


def test_resuming_with_a_different_definition_is_refused_before_resuming(scripted, store, two_folders, monkeypatch):
    project, elsewhere = two_folders
    scripted(reply("greeting", "Hi! Your name?"))
    conversation_id = _started(run("chat", "greeting.yaml", "--model", "x", "--store", store, input="").output)
    other = elsewhere / "other.yaml"
    other.write_text(Path(GREETING).read_text(encoding="utf-8").replace("Simple Greeting", "Other"), encoding="utf-8")
    result = CliRunner().invoke(
        main, ["chat", str(other), "--model", "x", "--store", store, "--resume", conversation_id], input="Ann\n"
    )
    assert result.exit_code == 2
    assert "is not the definition conversation" in result.output and str(project / "greeting.yaml") in result.output
    assert f"resuming {conversation_id}" not in result.output and "Traceback" not in result.output


def test_resuming_on_the_stored_file_after_an_edit_follows_the_managers_policy(scripted, store, two_folders):
    project, _ = two_folders
    scripted(reply("greeting", "Hi! Your name?"))
    conversation_id = _started(run("chat", "greeting.yaml", "--model", "x", "--store", store, input="").output)
    path = project / "greeting.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("Saying hello", "Saying hi"), encoding="utf-8")
    scripted(reply("farewell", "Bye Ann!", name="Ann"))
    result = run("chat", "greeting.yaml", "--model", "x", "--store", store, "--resume", conversation_id, input="Ann\n")
    assert result.exit_code == 0, result.output  # the default policy continues while the current state exists
    assert "Bye Ann!" in result.output


# --- --model scripted:FILE ------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def test_chat_with_replies_from_a_list_needs_no_key_and_no_model(tmp_path, monkeypatch):
    monkeypatch.delenv("LLM_FSM_MODEL", raising=False)
    replies = tmp_path / "replies.yaml"
    replies.write_text(
        "- Hello! Who are you?\n"  # the opening; a plain string stays
        '- {target_state: farewell, message: "Bye?"}\n'  # refused (no name): the regenerate call repeats it
        '- {context_update: {name: Ann}, message: "Thanks Ann"}\n',
        encoding="utf-8",
    )
    result = run("chat", GREETING, "--model", f"scripted:{replies}", "--store", "memory://", input="bye\nI am Ann\n")
    assert result.exit_code == 0, result.output
    assert "assistant: Hello! Who are you?" in result.output
    assert "[greeting] stay_rejected" in result.output and "assistant: Bye?" in result.output
    assert "[greeting → farewell] guarded_fallback" in result.output
    assert '{"name": "Ann"}' in result.output


def test_chat_with_replies_from_a_conversation_script(monkeypatch):
    script = ROOT / "definitions" / "conversations" / "simple_greeting.conv.yaml"
    result = run("chat", GREETING, "--model", f"scripted:{script}", "--store", "memory://", input="Hi! I'm Priya.\n")
    assert result.exit_code == 0, result.output
    assert "Hi there! I'm glad you stopped by." in result.output
    assert "[greeting → farewell] proposal_accepted" in result.output and '{"name": "Priya"}' in result.output


def test_running_out_of_scripted_replies_says_so_and_exits_1(tmp_path):
    replies = tmp_path / "replies.json"
    replies.write_text('["Hi! Your name?"]', encoding="utf-8")
    result = CliRunner().invoke(
        main, ["chat", GREETING, "--model", f"scripted:{replies}", "--store", "memory://"], input="Ann\n"
    )
    assert result.exit_code == 1
    assert f"the script {replies} has no reply left for this conversation (1 used)" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("greeting: hi\n", "non-empty list"),
        ('- "Hi"\n- {mesage: "typo"}\n', "replies.yaml:2 $[1].mesage: unknown key 'mesage'"),
        ("- [unclosed\n", "replies.yaml"),
    ],
)
def test_a_reply_file_that_is_not_a_list_of_replies_is_unreadable_input(tmp_path, text, message):
    replies = tmp_path / "replies.yaml"
    replies.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(
        main, ["chat", GREETING, "--model", f"scripted:{replies}", "--store", "memory://"], input=""
    )
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_a_missing_reply_file_is_unreadable_input(tmp_path):
    result = CliRunner().invoke(
        main, ["chat", GREETING, "--model", f"scripted:{tmp_path / 'nope.yaml'}", "--store", "memory://"], input=""
    )
    assert result.exit_code == 2 and "nope.yaml" in result.output


def test_chat_help_names_the_scripted_model():
    assert "scripted:FILE" in run("chat", "--help").output


def test_conversations_shows_who_has_each_conversation_in_a_mode_column(scripted, store):
    from llm_fsm.manager import FSMManager

    scripted(reply("greeting", "Hi!"))
    bot = _started(run("chat", GREETING, "--model", "x", "--store", store, input="").output)
    scripted(reply("greeting", "Hi!"))
    person = _started(run("chat", GREETING, "--model", "x", "--store", store, input="").output)
    FSMManager(store=store).hand_off(person, "asked for a person", actor="desk")
    lines = run("conversations", "--store", store).output.splitlines()
    assert lines[0].split()[-2:] == ["mode", "definition"]
    modes = {line.split()[0]: line.split()[-2] for line in lines[1:]}
    assert modes == {bot: "bot", person: "human"}


def test_chat_says_when_a_person_has_the_conversation(scripted, store):
    from llm_fsm.manager import FSMManager

    scripted(reply("greeting", "Hi! Your name?"))
    cid = _started(run("chat", GREETING, "--model", "x", "--store", store, input="").output)
    FSMManager(store=store).hand_off(cid, "asked for a person", actor="desk")
    resumed = run("chat", GREETING, "--model", "x", "--store", store, "--resume", cid, input="hello?\n")
    assert resumed.exit_code == 0, resumed.output
    assert resumed.output.count("a person has this conversation") == 2  # on resuming, and after the message
    assert "[greeting] human_mode" in resumed.output


COFFEE = str(Path(__file__).resolve().parents[1] / "definitions" / "coffee_order.yaml")
SHIPPED_ACTIONS = str(Path(__file__).resolve().parents[1] / "definitions" / "actions.py") + ":registry"


def test_chat_resume_without_actions_is_refused_before_any_message_as_a_new_chat_is(scripted, store):
    scripted(reply("take_order", "Hi! What can I get you?"))
    first = run("chat", COFFEE, "--model", "x", "--store", store, "--actions", SHIPPED_ACTIONS, input="")
    conversation_id = first.output.split("conversation ")[1].split()[0]
    llm = scripted(reply("take_order", "One medium cappuccino!", drink="cappuccino", size="medium"))
    resumed = run("chat", COFFEE, "--model", "x", "--store", store, "--resume", conversation_id, input="cappuccino\n")
    assert resumed.exit_code == 2
    assert "price_order" in resumed.output and "--actions" in resumed.output
    assert llm.requests == []  # refused before the user typed anything, not in the middle of a turn


def test_the_verdict_line_names_a_value_refused_by_its_declaration_not_just_a_missing_key(scripted, store):
    scripted(
        reply("take_order", "Hi! What can I get you?"),
        reply("choose_milk", "A huge latte!", drink="latte", size="huge"),
        reply("take_order", "We have small, medium and large. Which size?"),  # the re-ask of the refused size
    )
    result = run("chat", COFFEE, "--model", "x", "--store", store, "--actions", SHIPPED_ACTIONS, input="a huge latte\n")
    assert result.exit_code == 0, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("[take_order] stay_rejected")]
    assert line.startswith(
        "[take_order] stay_rejected: refused size (enum): 'huge' is not one of the allowed values (small, medium, large);"
    ), line


# --- explain as text -------------------------------------------------------------------------------


def _refused_size(scripted, store):
    scripted(
        reply("take_order", "Hi! What can I get you?"),
        reply("choose_milk", "A huge latte!", drink="latte", size="huge"),
        reply("take_order", "We have small, medium and large. Which size?"),
    )
    result = run("chat", COFFEE, "--model", "x", "--store", store, "--actions", SHIPPED_ACTIONS, input="a huge latte\n")
    return _started(result.output)


def test_explain_prints_the_turn_as_text_for_people_by_default_as_trace_does(scripted, store):
    cid = _refused_size(scripted, store)
    result = run("explain", cid, "--store", store)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"turn 1 of conversation {cid}")
    assert "user: a huge latte" in lines
    assert "model: proposed choose_milk (intent continue)" in lines
    assert '  drink = "latte": set' in lines
    assert "  size = \"huge\": refused (enum): 'huge' is not one of the allowed values (small, medium, large)" in lines
    assert "  → choose_milk (priority 1, guarded): not eligible" in lines
    assert "      ✗ Drink and size are known and the drink contains milk: missing size" in lines
    assert any(line.startswith("verdict: [take_order] stay_rejected: refused size (enum)") for line in lines)
    assert "reply: We have small, medium and large. Which size?" in lines
    assert not result.output.lstrip().startswith("{")


def test_explain_format_json_prints_the_whole_record(scripted, store):
    cid = _refused_size(scripted, store)
    record = json.loads(run("explain", cid, "--store", store, "--format", "json").output)
    assert record["context_changes"][1]["rule"] == "enum"


def test_explaining_a_turn_the_conversation_never_had_says_how_many_it_has(scripted, store):
    cid = _refused_size(scripted, store)
    result = run("explain", cid, "--store", store, "--turn", "9")
    assert result.exit_code == 2
    assert f"conversation {cid} has only 1 turn: there is no turn 9" in result.output
    assert "not kept" not in result.output


def _named_ann(scripted, store):
    scripted(reply("greeting", "Hi! Your name?"), reply("farewell", "Bye!", name="Ann"))
    first = run("chat", GREETING, "--model", "x", "--store", store, input="My name is Ann, hi\n")
    return first.output.split("conversation ")[1].split()[0]


def test_explain_provenance_says_where_each_value_came_from_and_quotes_the_words(scripted, store):
    cid = _named_ann(scripted, store)
    result = run("explain", cid, "--store", store, "--provenance")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == 'name = "Ann"  ← the model, read as words, turn 1'
    assert lines[1] == "    m2 (user): My name is «Ann», hi"


def test_explain_provenance_as_json_gives_the_origin_and_the_quote_of_the_key_asked(scripted, store):
    cid = _named_ann(scripted, store)
    shown = json.loads(
        run("explain", cid, "--store", store, "--provenance", "--key", "name", "--format", "json").output
    )
    assert shown["name"]["origin"] == {
        "by": "model",
        "message": "m2",
        "start": 11,
        "end": 14,
        "rule": "words",
        "turn": 1,
    }
    assert shown["name"]["quote"]["inside"] == "Ann"
