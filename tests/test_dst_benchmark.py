"""The SGD state-tracking benchmark (``benchmarks/dst.py``): its converter, its scorer, its oracle, its command line.

Offline and fast: a tiny hand-made dataset in SGD's format, plus the first
dialogues of ``../shared/sgd`` when that folder is there (``LLM_FSM_SGD_DIR``
overrides where it is looked for). No model runs: the oracle answers with the
gold values, and the original's half uses litellm's ``mock_response``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "baseline"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from llm_fsm.definition import FSMDefinition  # noqa: E402 - after the benchmarks folder is on the path
from llm_fsm.engine._messages import entry_role, entry_text  # noqa: E402
from llm_fsm.lint import lint_data  # noqa: E402
from llm_fsm.manager import FSMManager  # noqa: E402

convert = importlib.import_module("dst_convert")
score = importlib.import_module("dst_score")
dst_engines = importlib.import_module("dst_engines")
dst = importlib.import_module("dst")
original_env = importlib.import_module("original_env")

REAL_DATA = Path(os.environ.get("LLM_FSM_SGD_DIR", ROOT.parent / "shared" / "sgd"))

SCHEMA = [
    {
        "service_name": "Cafes_1",
        "description": "Find a cafe and order a drink",
        "slots": [
            {"name": "city", "description": "City of the cafe", "is_categorical": False, "possible_values": []},
            {"name": "cafe_name", "description": "Name of the cafe", "is_categorical": False, "possible_values": []},
            {"name": "drink", "description": "Drink to order", "is_categorical": True, "possible_values": ["tea", "coffee"]},
            {"name": "cups", "description": "Cups to order", "is_categorical": True, "possible_values": ["1", "2", "3"]},
            {"name": "has_wifi", "description": "Whether it has wifi", "is_categorical": True, "possible_values": ["True", "False"]},
            {"name": "address", "description": "Address of the cafe", "is_categorical": False, "possible_values": []},
        ],
        "intents": [
            {"name": "FindCafe", "description": "Find a cafe in a city", "is_transactional": False,
             "required_slots": ["city"], "optional_slots": {"has_wifi": "dontcare"}, "result_slots": ["address"]},
            {"name": "OrderDrink", "description": "Order a drink at a cafe", "is_transactional": True,
             "required_slots": ["cafe_name", "drink"], "optional_slots": {"cups": "1"}, "result_slots": []},
        ],
    }
]  # fmt: skip


def _user(text: str, intent: str, values: dict[str, list[str]]) -> dict[str, Any]:
    state = {"active_intent": intent, "requested_slots": [], "slot_values": values}
    return {"speaker": "USER", "utterance": text, "frames": [{"service": "Cafes_1", "actions": [], "state": state}]}


def _system(text: str) -> dict[str, Any]:
    return {"speaker": "SYSTEM", "utterance": text, "frames": [{"service": "Cafes_1", "actions": []}]}


DIALOGUES = [
    {
        "dialogue_id": "1_00001",
        "services": ["Cafes_1"],
        "turns": [
            _user("Find me a cafe with wifi in San Jose.", "FindCafe", {"city": ["San Jose"], "has_wifi": ["True"]}),
            _system("Blue Bottle is a nice cafe in San Jose."),
            _user("Great, order two teas there.", "OrderDrink",
                  {"city": ["San Jose"], "has_wifi": ["True"], "cafe_name": ["Blue Bottle"], "drink": ["tea"],
                   "cups": ["2"]}),
            _system("Done. Anything else?"),
            _user("No, thanks.", "NONE",
                  {"city": ["San Jose"], "has_wifi": ["True"], "cafe_name": ["Blue Bottle"], "drink": ["tea"],
                   "cups": ["2"]}),
        ],
    },
    {
        "dialogue_id": "1_00002",
        "services": ["Cafes_1"],
        "turns": [
            _user("A coffee at Philz in SF please.", "OrderDrink",
                  {"cafe_name": ["Philz"], "drink": ["coffee"], "city": ["SF", "San Francisco"]}),
            _system("One coffee at Philz, right?"),
        ],
    },
]  # fmt: skip


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    (tmp_path / "dialogues.json").write_text(json.dumps(DIALOGUES), encoding="utf-8")
    return tmp_path


@pytest.fixture
def service(dataset: Path) -> Any:
    return convert.load_services(dataset)["Cafes_1"]


# --- the converter ------------------------------------------------------------------------------


def test_a_categorical_slot_becomes_an_enum_of_its_possible_values_plus_dontcare(service: Any) -> None:
    declared = convert.convert(service, declarations=True)["context_keys"]["drink"]
    assert declared["type"] == "string"
    assert declared["enum"] == ["tea", "coffee", "dontcare"]
    assert declared["synonyms"]["any"] == "dontcare"


def test_digit_and_boolean_enums_get_the_words_a_user_says_as_synonyms(service: Any) -> None:
    keys = convert.convert(service, declarations=True)["context_keys"]
    assert keys["cups"]["synonyms"]["two"] == "2"
    assert keys["has_wifi"]["synonyms"]["yes"] == "True"
    assert keys["has_wifi"]["synonyms"]["no"] == "False"


def test_a_free_text_slot_is_declared_as_a_string_with_its_description_and_no_enum(service: Any) -> None:
    declared = convert.convert(service, declarations=True, aliases=False)["context_keys"]["city"]
    assert declared == {"type": "string", "display_name": "city", "description": "City of the cafe"}


def test_a_city_slot_gets_the_city_nicknames_as_free_text_synonyms_unless_aliases_are_off(service: Any) -> None:
    declared = convert.convert(service, declarations=True)["context_keys"]["city"]
    assert declared["synonyms"]["Philly"] == "Philadelphia" and "enum" not in declared
    assert "synonyms" not in convert.declaration(service.slot("city"), aliases=False)


def test_slots_sgd_lets_be_dontcare_declare_it(service: Any) -> None:
    keys = convert.convert(service, declarations=True)["context_keys"]
    assert keys["drink"]["dontcare"] and keys["has_wifi"]["dontcare"]  # categorical
    assert "dontcare" not in keys["city"]  # free text no intent leaves to "dontcare"


def test_only_slots_a_user_can_give_are_keys_and_undeclared_keys_are_refused(service: Any) -> None:
    document = convert.convert(service, declarations=True)
    assert set(document["context_keys"]) == {"city", "cafe_name", "drink", "cups", "has_wifi"}  # not the result
    assert document["additional_keys"] is False


def test_without_declarations_the_definition_has_key_names_only(service: Any) -> None:
    document = convert.convert(service, declarations=False)
    assert "context_keys" not in document and "additional_keys" not in document
    assert document["states"]["order_drink"]["required_context_keys"] == ["cafe_name", "drink", "cups"]


def test_each_intent_is_a_state_that_can_reach_every_other_intent_and_none_is_terminal(service: Any) -> None:
    definition = FSMDefinition.model_validate(convert.convert(service, declarations=True))
    assert set(definition.states) == {"start", "find_cafe", "order_drink", "over"}
    assert {t.target_state for t in definition.states["start"].transitions} == {"find_cafe", "order_drink", "over"}
    assert {t.target_state for t in definition.states["find_cafe"].transitions} == {"order_drink", "start"}
    assert [s for s, state in definition.states.items() if state.is_terminal] == ["over"]
    assert definition.cancellable is False  # a "cancel" read into a user turn must not end the replay


def test_the_terminal_state_the_original_needs_is_behind_a_condition_that_never_holds(service: Any) -> None:
    into_over = [
        t
        for state in convert.convert(service, declarations=False)["states"].values()
        for t in state["transitions"]
        if t["target_state"] == "over"
    ]
    assert into_over and all(t["conditions"][0]["logic"] == {"==": [1, 2]} for t in into_over)


@pytest.mark.parametrize("declarations", [False, True])
def test_converted_definitions_lint_without_errors(service: Any, declarations: bool) -> None:
    result = lint_data(convert.convert(service, declarations=declarations))
    assert result.errors == ()


def test_the_first_user_turn_can_give_any_slot_of_the_service(service: Any) -> None:
    start = convert.convert(service, declarations=False)["states"]["start"]
    assert start["required_context_keys"] == ["city", "cafe_name", "drink", "cups", "has_wifi"]


def test_intent_names_become_snake_case_state_ids() -> None:
    assert convert.state_id("FindRestaurants") == "find_restaurants"
    assert convert.state_id("GetRide") == "get_ride"


def test_each_user_turn_is_paired_with_the_system_utterance_that_answers_it(dataset: Path, service: Any) -> None:
    dialogues = convert.load_dialogues(dataset, {"Cafes_1": service})
    first = dialogues[0].turns
    assert [t.system_reply for t in first] == ["Blue Bottle is a nice cafe in San Jose.", "Done. Anything else?", ""]
    assert first[1].slot_values["cups"] == ("2",)


def test_a_dialogue_of_a_service_missing_from_the_schema_is_refused(dataset: Path, service: Any) -> None:
    with pytest.raises(convert.DatasetError, match="one service"):
        convert.load_dialogues(dataset, {"Other_1": service})


# --- the scorer ---------------------------------------------------------------------------------


def test_fuzzy_match_ignores_case_punctuation_and_word_order() -> None:
    assert score.fuzzy_score("San Francisco", "san francisco!") == 1.0
    assert score.fuzzy_score("Blue Bottle Coffee", "coffee, blue bottle") == 1.0


def test_fuzzy_match_scores_a_near_form_below_the_right_threshold() -> None:
    assert 0.5 < score.fuzzy_score("7 pm", "7:00 pm") < score.FUZZY_RIGHT
    assert score.fuzzy_score("Philz", "Starbucks") < 0.5


def test_a_categorical_slot_is_right_only_on_an_exact_match_and_a_free_text_one_on_a_fuzzy_match() -> None:
    assert score.slot_score(["True"], "true", categorical=True) == 0.0
    assert score.slot_score(["True"], "True", categorical=True) == 1.0
    assert score.slot_score(["SF", "San Francisco"], "san francisco", categorical=False) == 1.0


def test_stored_values_are_matched_as_text_in_sgds_spelling() -> None:
    assert score.render(True) == "True"
    assert score.render(2) == "2" and score.render(2.0) == "2"
    assert score.render("") is None and score.render(None) is None and score.render([]) is None


def test_turn_scores_count_held_expected_and_right_slots_and_joint_goal(service: Any) -> None:
    gold = {"city": ["San Jose"], "drink": ["tea"]}
    exact = score.score_turn(service, gold, {"city": "san jose", "drink": "tea", "_engine": 1})
    assert (exact.held, exact.expected, exact.right, exact.joint) == (2, 2, 2, True)
    wrong = score.score_turn(service, gold, {"city": "San Jose", "drink": "Tea", "cups": "2"})
    assert (wrong.held, wrong.expected, wrong.right, wrong.joint) == (3, 2, 1, False)
    assert wrong.sgd_joint == 0.0


def test_totals_give_joint_goal_accuracy_precision_recall_and_f1(service: Any) -> None:
    totals = score.Totals()
    totals.add(score.score_turn(service, {"city": ["San Jose"]}, {"city": "San Jose"}))  # right, joint
    totals.add(score.score_turn(service, {"city": ["San Jose"], "drink": ["tea"]}, {"city": "Oslo"}))  # wrong, missed
    figures = totals.to_json()
    assert figures["joint_goal_accuracy"] == 0.5
    assert figures["slot_precision"] == 0.5  # 1 right of 2 held
    assert figures["slot_recall"] == pytest.approx(1 / 3)  # 1 right of 3 expected
    assert figures["slot_f1"] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert figures["stored_wrong_share"] == 0.5


def test_a_near_free_text_match_is_right_and_sgds_joint_goal_counts_it_in_part(service: Any) -> None:
    near = score.score_turn(service, {"city": ["San Jose"]}, {"city": "San Jos"})
    assert near.joint and near.sgd_joint == 0.93
    far = score.score_turn(service, {"city": ["San Jose"]}, {"city": "San"})
    assert not far.joint and far.sgd_joint == 0.55


def test_a_stored_value_outside_its_enum_fails_the_declaration(service: Any) -> None:
    declared = convert.declaration(service.slot("drink"))
    assert score.declaration_problem(declared, "Tea") == "not one of the enum's values"
    assert score.declaration_problem(declared, "dontcare") is None
    assert score.declaration_problem(convert.declaration(service.slot("cups")), 2) == "not a string (int)"


# --- the engines: dataset turns and the oracle ----------------------------------------------------


def _report(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert dst.main([*argv, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_oracle_scores_100_percent_without_declarations(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(["--oracle", "--data", str(dataset)], capsys)
    plain = report["engines"]["plain"]["summary"]
    assert plain["joint_goal_accuracy"] == 1.0 and plain["slot_f1"] == 1.0 and plain["turn_errors"] == 0
    assert plain["slots_expected"] == 2 + 5 + 5 + 3
    assert report["targets"]["oracle_plain_perfect"]["met"] is True


def test_with_declarations_an_offer_accepted_in_the_next_turn_is_grounded_by_the_datasets_system_turn(
    dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(["--oracle", "--data", str(dataset)], capsys)
    declared = report["engines"]["declared"]["summary"]
    assert declared["refused_by_reason"] == {}  # "Blue Bottle" came from the system's offer, "two" -> "2"
    assert declared["slot_f1"] == 1.0


def test_a_refused_value_is_traced_to_where_the_dialogue_said_it(dataset: Path, service: Any) -> None:
    dialogue = convert.load_dialogues(dataset, {"Cafes_1": service})[0]
    assert dst.where_said(dialogue, 1, "san jose") == "user"
    assert dst.where_said(dialogue, 2, "Blue Bottle") == "last system turn"
    assert dst.where_said(dialogue, 3, "Blue Bottle") == "earlier system turn"
    assert dst.where_said(dialogue, 3, "dontcare") == "nowhere"


@pytest.mark.skipif(not (REAL_DATA / "dialogues.json").is_file(), reason="../shared/sgd is not there")
def test_the_oracle_scores_100_percent_on_real_dialogues_of_every_service(capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(["--oracle", "--data", str(REAL_DATA), "--limit", "8"], capsys)
    assert len(report["run"]["services"]) == 4
    assert report["engines"]["plain"]["summary"]["slot_f1"] == 1.0
    assert report["targets"]["oracle_plain_perfect"]["met"] is True


def test_the_engine_keeps_the_datasets_system_turns_in_its_transcript(dataset: Path, service: Any) -> None:
    dialogue = convert.load_dialogues(dataset, {"Cafes_1": service})[0]
    paths = convert.write_definitions({"Cafes_1": service}, dataset / "defs")
    engine = dst_engines.OursDST("plain", dst_engines.OracleLLM(), {"Cafes_1": paths[("Cafes_1", False)]})
    manager_runs = engine.play(dialogue)
    assert [t.state for t in manager_runs.turns] == ["find_cafe", "order_drink", "order_drink"]
    oracle = dst_engines.OracleLLM()
    wrapper = dst_engines.DatasetTurnsLLM(oracle)
    manager = FSMManager(llm_interface=wrapper, store="memory://")
    conversation_id, opening = manager.start_conversation(str(paths[("Cafes_1", False)]))
    wrapper.reply, oracle.turn = dialogue.turns[0].system_reply, dialogue.turns[0]
    assert manager.process_message(conversation_id, dialogue.turns[0].utterance) == dialogue.turns[0].system_reply
    exchanges = manager.get_instance(conversation_id).context.conversation.exchanges
    assert [(entry_role(m), entry_text(m)) for m in exchanges[-2:]] == [
        ("user", dialogue.turns[0].utterance),
        ("assistant", dialogue.turns[0].system_reply),
    ]
    assert opening == dst_engines.GREETING


def test_only_the_turn_call_reaches_the_model(dataset: Path, service: Any) -> None:
    asked: list[str] = []

    class Recording(dst_engines.OracleLLM):
        def send_request(self, request: Any) -> Any:
            asked.append(request.purpose)
            return super().send_request(request)

    dialogue = convert.load_dialogues(dataset, {"Cafes_1": service})[0]
    paths = convert.write_definitions({"Cafes_1": service}, dataset / "defs")
    dst_engines.OursDST("plain", Recording(), {"Cafes_1": paths[("Cafes_1", False)]}).play(dialogue)
    assert asked == ["turn"] * len(dialogue.turns)


def test_with_a_real_interface_each_user_turn_costs_one_counted_model_call(dataset: Path, service: Any) -> None:
    from llm_fsm.llm import LiteLLMInterface

    live_engines = importlib.import_module("live_engines")
    reply = {"transition": {"target_state": "find_cafe", "context_update": {"city": "San Jose"}}, "message": "hi"}
    interface = LiteLLMInterface("openai/mock", mock_response=json.dumps(reply), api_key="not-used")
    dialogue = convert.load_dialogues(dataset, {"Cafes_1": service})[0]
    paths = convert.write_definitions({"Cafes_1": service}, dataset / "defs")
    counter = live_engines.CallCounter()
    counter.install()
    try:
        played = dst_engines.OursDST("plain", interface, {"Cafes_1": paths[("Cafes_1", False)]}, counter).play(dialogue)
    finally:
        counter.uninstall()
    assert [t.calls for t in played.turns] == [1, 1, 1]
    assert [t.error for t in played.turns] == [None, None, None]
    assert played.turns[0].data == {"city": "San Jose"}


# --- canonical values, typed slots, and the canonical and invented oracles --------------------------


def test_a_date_or_time_slot_is_declared_with_its_format_and_grounded_by_meaning() -> None:
    for name, kind in (("leaving_date", "date"), ("date", "date"), ("time", "time"), ("pickup_time", "time")):
        declared = convert.declaration(convert.Slot(name, "When", is_categorical=False))
        assert (declared["format"], declared["grounded"]) == (kind, True)
    assert "format" not in convert.declaration(convert.Slot("city", "Where", is_categorical=False))


def _informing(text: str, slot: str, said: str, canonical: str) -> dict[str, Any]:
    turn = _user(text, "FindCafe", {slot: [said]})
    action = {"act": "INFORM", "slot": slot, "values": [said], "canonical_values": [canonical]}
    turn["frames"][0]["actions"] = [action]
    return turn


def test_sgds_canonical_form_of_a_gold_value_is_scored_right(tmp_path: Path) -> None:
    dialogue = {
        "dialogue_id": "1_00003",
        "services": ["Cafes_1"],
        "turns": [_informing("A cafe in SFO", "city", "SFO", "San Francisco"), _system("Looking.")],
    }
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    (tmp_path / "dialogues.json").write_text(json.dumps([dialogue]), encoding="utf-8")
    services = convert.load_services(tmp_path)
    turn = convert.load_dialogues(tmp_path, services)[0].turns[0]
    assert turn.canonical == {"city": ("San Francisco",)}
    assert turn.references == {"city": ("SFO", "San Francisco")}
    assert score.score_turn(services["Cafes_1"], turn.references, {"city": "San Francisco"}).right == 1


def test_an_oracle_writing_a_value_nobody_said_each_turn_gets_none_of_them_stored_with_declarations(
    dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(["--oracle", "invented", "--data", str(dataset)], capsys)
    declared = report["engines"]["declared"]["summary"]
    # what the declared engine holds is what its extractors read from the user's words ("two teas": cups 2)
    assert declared["invented_held"] == 0 and declared["slots_held"] == declared["extracted"]["fill"] == 1
    assert report["engines"]["plain"]["summary"]["slots_held"] > 0  # without grounding, each one is stored
    assert report["engines"]["plain"]["summary"]["invented_held"] == report["run"]["user_turns"]
    assert report["targets"]["oracle_invented_stored"]["met"] is True


@pytest.mark.skipif(not (REAL_DATA / "dialogues.json").is_file(), reason="../shared/sgd is not there")
def test_sgds_canonical_dates_and_times_are_grounded_in_real_dialogues(capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(["--oracle", "canonical", "--data", str(REAL_DATA), "--limit", "12"], capsys)
    declared = report["engines"]["declared"]["summary"]
    assert declared["slot_f1_by_kind"]["date"] == declared["slot_f1_by_kind"]["time"] == 1.0
    assert declared["slot_f1_by_kind"]["categorical"] == 1.0
    assert report["engines"]["plain"]["summary"]["slot_f1"] == 1.0  # the scorer takes the canonical forms
    # what is left refused is free text nobody in the dialogue said ("San Francisco" for "SFO")
    assert set(declared["refused_by_reason"]) <= {"ungrounded [nowhere]"}


@pytest.mark.skipif(not (REAL_DATA / "dialogues.json").is_file(), reason="../shared/sgd is not there")
def test_no_invented_value_is_stored_in_real_dialogues(capsys: pytest.CaptureFixture[str]) -> None:
    report = _report(["--oracle", "invented", "--data", str(REAL_DATA), "--limit", "8"], capsys)
    declared = report["engines"]["declared"]["summary"]
    assert declared["invented_held"] == 0
    # one a turn: refused as ungrounded, or replaced by the one value of the user's words that fits (repair)
    refused = declared["refused_by_reason"].get("ungrounded [nowhere]", 0)
    assert refused + declared["extracted"]["repair"] == report["run"]["user_turns"]


def test_the_dialogues_clock_is_sgds_today_so_relative_dates_resolve_as_sgd_resolved_them() -> None:
    assert dst_engines.SGD_TODAY.date().isoformat() == "2019-03-01"


# --- the command line ---------------------------------------------------------------------------


def test_the_oracle_takes_a_mode_worded_by_default() -> None:
    assert dst.parse_args(["--oracle"]).oracle == "words"
    assert dst.parse_args(["--oracle", "canonical"]).oracle == "canonical"
    assert dst.parse_args(["--oracle", "invented"]).oracle == "invented"
    with pytest.raises(SystemExit):
        dst.parse_args(["--oracle", "guessed"])


def test_limit_services_and_json_are_parsed() -> None:
    args = dst.parse_args(["--limit", "3", "--services", "Buses_1,Events_1", "--json"])
    assert (args.limit, args.services, args.json, args.model, args.oracle) == (
        3,
        "Buses_1,Events_1",
        True,
        "local",
        False,
    )


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(SystemExit):
        dst.parse_args(["--limit", "0"])


def test_limit_takes_dialogues_round_robin_across_services(service: Any) -> None:
    def dialogue(i: int, name: str) -> Any:
        return convert.Dialogue(f"d{i}", name)

    chosen = dst.select(
        {"A": service, "B": service}, [dialogue(1, "A"), dialogue(2, "A"), dialogue(3, "B")], None, limit=2
    )
    assert [d.dialogue_id for d in chosen] == ["d1", "d3"]
    assert [d.dialogue_id for d in dst.select({"A": service, "B": service}, [dialogue(3, "B")], "B", None)] == ["d3"]


def test_an_unknown_service_is_refused_with_the_known_ones(service: Any) -> None:
    with pytest.raises(SystemExit, match="Nope_1"):
        dst.select({"A": service}, [], "Nope_1", None)


# --- the original, in its venv, on a mocked model --------------------------------------------------


@pytest.mark.skipif(not original_env.is_ready(original_env.BASELINES["original"]), reason="baseline venv not built")
def test_the_original_replays_the_user_turns_with_the_datasets_system_turns(dataset: Path, service: Any) -> None:
    dialogue = convert.load_dialogues(dataset, {"Cafes_1": service})[0]
    paths = convert.write_definitions({"Cafes_1": service}, dataset / "defs")
    reply = {"transition": {"target_state": "find_cafe", "context_update": {"city": "San Jose"}}, "message": "hi"}
    server = importlib.import_module("live_engines").Server("openai/mock", {"model": "openai/mock"}, "mock")
    options = {"mock_response": json.dumps(reply), "api_key": "not-used", "temperature": 0}
    with dst_engines.OriginalDST(server, options, {"Cafes_1": paths[("Cafes_1", False)]}) as original:
        played = original.play(dialogue)
    assert [t.error for t in played.turns] == [None, None, None]
    assert played.turns[0].data["city"] == "San Jose" and played.turns[0].state == "find_cafe"
    assert [t.calls for t in played.turns] == [1, 1, 1]  # the opening asked no model
    assert [m["system"] for m in played.history if "system" in m] == [
        dst_engines.GREETING,
        *(t.system_reply for t in dialogue.turns),
    ]


# --- the engine's extractors alone ----------------------------------------------------------------


def test_the_extractors_engine_runs_without_any_model_and_stores_only_what_the_user_said(
    dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _report(["--engines", "extractors", "--data", str(dataset)], capsys)
    assert report["run"]["model"] == "none"
    summary = report["engines"]["extractors"]["summary"]
    assert summary["llm_calls_per_turn"] == 0 and summary["turn_errors"] == 0
    # "order two teas": cups 2 (a count in words), held for the two turns left; "A coffee at Philz": drink coffee.
    # "teas" is no mention of "tea", and free text has no extractor
    assert summary["slots_held"] == 3 and summary["slot_precision"] == 1.0
    assert set(summary["slot_f1_by_kind"]) == {"categorical", "number", "free text"}
    assert summary["slot_f1_by_kind"]["number"] == 1.0


def test_a_categorical_slot_of_whole_numbers_is_scored_as_a_number_slot(service: Any) -> None:
    assert [dst.slot_kind(service.slot(name)) for name in ("cups", "drink", "has_wifi", "city")] == [
        "number",
        "categorical",
        "categorical",
        "free text",
    ]


def test_a_categorical_slot_gets_the_words_people_name_its_values_with_unless_aliases_are_off() -> None:
    slot = convert.Slot(
        "shared_ride", "Whether the ride is shared", is_categorical=True, possible_values=("True", "False")
    )
    assert convert.declaration(slot)["synonyms"]["shared"] == "True"
    assert "shared" not in convert.declaration(slot, aliases=False)["synonyms"]


def test_no_aliases_declares_the_definitions_without_the_converters_alias_tables(
    dataset: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[bool] = []
    real = dst.write_definitions

    def spy(services: Any, folder: Path, *, aliases: bool = True) -> Any:
        asked.append(aliases)
        return real(services, folder, aliases=aliases)

    monkeypatch.setattr(dst, "write_definitions", spy)
    assert _report(["--oracle", "--data", str(dataset)], capsys)["run"]["aliases"] is True
    assert _report(["--oracle", "--data", str(dataset), "--no-aliases"], capsys)["run"]["aliases"] is False
    assert asked == [True, False]
