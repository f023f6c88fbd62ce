"""Where every stored value came from (``FSMInstance.provenance``, ``FSMManager.provenance``).

Each value of a conversation's context keeps the origin of its current value: the model (and the words of the
user's that ground it, as a message id and a span), the engine's extractors, the application, an action, an
operator, a flow handing it over, or a migration. The reader quotes the words, so a person sees what was said.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.definition._migrations import Migrations
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.definition._spoken import dates_in, numbers_in, times_in
from llm_fsm.engine._effects import EngineConfig
from llm_fsm.engine._migrate import migrate
from llm_fsm.engine._provenance import Origin
from llm_fsm.engine._records import LLMRequest
from llm_fsm.llm.fakes import FunctionLLM, ScriptedLLM
from llm_fsm.loading import load_fsm_definition
from llm_fsm.manager import FSMManager

ROOT = Path(__file__).resolve().parents[1]
TODAY = dt.datetime(2019, 3, 1, 12, 0, tzinfo=dt.UTC)


def definition(keys: dict[str, Any], required: list[str], **extra: Any) -> FSMDefinition:
    return FSMDefinition.model_validate(
        {
            "name": "form",
            "description": "d",
            "initial_state": "ask",
            "context_keys": keys,
            "states": {
                "ask": {
                    "id": "ask",
                    "description": "ask",
                    "purpose": "collect",
                    "required_context_keys": required,
                    "transitions": [{"target_state": "ask", "description": "again"}],
                    **extra,
                }
            },
        }
    )


FORM = definition(
    {
        "date": {"format": "date", "extract": "off"},
        "time": {"format": "time", "extract": "off"},
        "name": {"description": "the guest's name"},
        "income": {"type": "integer", "sensitive": True, "extract": "off"},
        "tier": {"writable_by": "application"},
    },
    ["date", "time", "name", "income"],
)


class Chat:
    """A conversation whose model writes, each turn, the update the test gives it (and replies ``reply``)."""

    def __init__(self, form: FSMDefinition = FORM, opening: str = "Hello, what can I book for you?", **kw: Any):
        self.update: dict[str, Any] = {}
        self.reply = "ok"
        self.intent = "continue"
        initial = kw.pop("initial", None)

        def model(request: LLMRequest) -> dict[str, Any]:
            written = self.update if request.purpose == "turn" else {}
            message = opening if request.purpose == "opening" else self.reply
            reply = {"transition": {"target_state": "", "context_update": written}, "message": message}
            return {**reply, "intent": self.intent if request.purpose == "turn" else "continue"}

        self.manager = FSMManager(
            fsm_loader=lambda _id: form,
            llm_interface=FunctionLLM(model),
            config=EngineConfig(clock=lambda: TODAY),
            **kw,
        )
        self.cid, _ = self.manager.start_conversation("form", initial)

    def say(self, message: str, update: dict[str, Any] | None = None, **kw: Any) -> None:
        self.update = update or {}
        self.manager.process_message(self.cid, message, **kw)

    def origin(self, key: str) -> Origin:
        return self.manager.get_instance(self.cid).provenance[key]

    def words(self, key: str) -> str:
        """The text of the message the origin names, cut to its span."""
        origin = self.origin(key)
        texts = {str(m["id"]): str(m["text"]) for m in self.manager.get_conversation_history(self.cid)}
        assert origin.start is not None and origin.end is not None and origin.message is not None
        return texts[origin.message][origin.start : origin.end]

    def message_ids(self, role: str) -> list[str]:
        return [m["id"] for m in self.manager.get_conversation_history(self.cid) if m["role"] == role]


# --- the model -----------------------------------------------------------------------------------------


def test_a_date_the_model_stored_points_at_the_users_words_that_say_it() -> None:
    chat = Chat()
    chat.say("A table on March 12th, please", {"date": "2019-03-12"})
    origin = chat.origin("date")
    assert (origin.by, origin.rule, origin.source, origin.turn) == ("model", "date", "user", 1)
    assert origin.message == chat.message_ids("user")[-1]
    assert chat.words("date") == "March 12th"


def test_a_value_grounded_by_words_spans_the_smallest_stretch_holding_them() -> None:
    chat = Chat()
    chat.say("hi, the booking is for Ada, surname Lovelace", {"name": "Ada Lovelace"})
    assert chat.origin("name").rule == "words"
    assert chat.words("name") == "Ada, surname Lovelace"


def test_a_value_said_in_an_earlier_message_points_at_that_message() -> None:
    chat = Chat()
    chat.say("March 12th would be great")
    chat.say("and 7pm", {"date": "2019-03-12", "time": "19:00"})
    first, second = chat.message_ids("user")
    assert chat.origin("date").message == first and chat.origin("date").turn == 2
    assert chat.origin("time").message == second
    assert chat.words("time") == "7pm"


def test_an_offer_the_user_accepted_points_at_the_assistants_message() -> None:
    chat = Chat(opening="We have a table at 19:30, shall I take it?")
    chat.say("yes please", {"time": "19:30"})
    origin = chat.origin("time")
    assert (origin.source, origin.message) == ("assistant", chat.message_ids("assistant")[0])
    assert chat.words("time") == "19:30"


def test_the_message_id_the_caller_gave_names_the_message() -> None:
    chat = Chat()
    chat.say("March 12th", {"date": "2019-03-12"}, message_id="web-42")
    assert chat.origin("date").message == "web-42"


def test_a_value_the_extractors_filled_is_the_extractors() -> None:
    form = definition({"date": {"format": "date"}}, ["date"])
    chat = Chat(form)
    chat.say("March 12th")
    origin = chat.origin("date")
    assert (origin.by, origin.rule) == ("extractor", "fill")
    assert chat.words("date") == "March 12th"


def test_a_model_value_read_from_words_is_a_repair_with_their_span() -> None:
    chat = Chat()
    chat.say("next Friday works", {"date": "next Friday"})
    origin = chat.origin("date")
    assert (origin.by, origin.rule) == ("model", "repair")
    assert chat.words("date") == "next Friday"


# --- the application, actions, operators -------------------------------------------------------------


def test_the_initial_context_is_the_applications_at_the_opening() -> None:
    chat = Chat(initial={"tier": "gold"})
    origin = chat.origin("tier")
    assert (origin.by, origin.hook, origin.turn) == ("application", "initial_context", 0)


def test_a_hooks_value_is_the_applications_with_the_hook_and_the_turn() -> None:
    chat = Chat(hooks={"before_llm": lambda event: {"tier": "gold"}})
    chat.say("hello")
    origin = chat.origin("tier")
    assert (origin.by, origin.hook, origin.turn) == ("application", "before_llm", 1)


def test_update_context_is_the_applications_between_turns() -> None:
    chat = Chat()
    chat.manager.update_context(chat.cid, {"tier": "gold"})
    origin = chat.origin("tier")
    assert (origin.by, origin.hook, origin.turn) == ("application", "update_context", None)
    assert origin.at is not None


def test_an_actions_output_is_the_actions_with_its_call_and_turn() -> None:
    form = definition(
        {"name": {}, "tier": {"writable_by": "application"}},
        ["name"],
        actions=[{"call": "lookup", "when": "collected", "inputs": {"name": "name"}, "outputs": {"tier": "tier"}}],
    )
    chat = Chat(form, actions={"lookup": lambda name: {"tier": "gold"}})
    chat.say("I am Ada", {"name": "Ada"})
    origin = chat.origin("tier")
    assert (origin.by, origin.call, origin.turn) == ("action", "lookup", 1)


def test_an_operators_value_names_the_operator() -> None:
    chat = Chat()
    chat.manager.set_context(chat.cid, {"name": "Ada"}, actor="alice")
    origin = chat.origin("name")
    assert (origin.by, origin.actor) == ("operator", "alice")


def test_a_removed_key_loses_its_origin() -> None:
    chat = Chat()
    chat.say("I am Ada", {"name": "Ada"})
    chat.manager.update_context(chat.cid, {"name": None})
    assert "name" not in chat.manager.get_instance(chat.cid).provenance


def test_a_restart_clears_the_origins_of_what_it_cleared_and_keeps_the_applications() -> None:
    keys = {"name": {}, "tier": {"writable_by": "application"}}
    restarting = FSMDefinition.model_validate({**definition(keys, ["name"]).model_dump(), "on_cancel": "restart"})
    chat = Chat(restarting, initial={"tier": "gold"})
    chat.say("I am Ada", {"name": "Ada"})
    chat.intent = "cancel"
    chat.say("cancel that")
    assert set(chat.manager.get_instance(chat.cid).provenance) == {"tier"}


def test_a_sensitive_value_keeps_its_origin_and_the_origin_holds_no_value() -> None:
    chat = Chat()
    chat.say("my income is 52000 a year", {"income": 52000})
    origin = chat.origin("income")
    assert chat.words("income") == "52000"
    assert "52000" not in origin.model_dump_json()


# --- flows and migrations ---------------------------------------------------------------------------------


def say(message: str, target: str = "", intent: str = "continue", flow: str | None = None, **update: Any) -> Any:
    reply: dict[str, Any] = {"intent": intent, "transition": {"target_state": target, "context_update": update}}
    return {**reply, "message": message, **({"flow": flow} if flow else {})}


def flights(*replies: Any) -> tuple[FSMManager, str]:
    manager = FSMManager(llm_interface=ScriptedLLM([say("Where do you fly from?"), *replies]))
    cid, _ = manager.start_conversation(str(ROOT / "definitions" / "flight_booking.yaml"))
    return manager, cid


def test_a_sub_flows_output_is_the_flows_and_the_parents_values_keep_theirs() -> None:
    manager, cid = flights(
        say("Where to?", "collect_destination", origin="Oslo"),
        say("ok", intent="start_flow", flow="check_booking"),
        say("Reference?"),
        say("BK-1 is confirmed.", "reported", booking_ref="BK-1"),
        say("Where do you fly to?"),
    )
    for message in ("Oslo", "check my booking", "BK-1"):
        manager.process_message(cid, message)
    provenance = manager.get_instance(cid).provenance
    assert (provenance["last_checked_booking"].by, provenance["last_checked_booking"].flow) == ("flow", "check_booking")
    assert (provenance["origin"].by, provenance["origin"].turn) == ("model", 1)
    assert set(provenance) == {"origin", "last_checked_booking"}


def test_a_sub_flows_output_an_operator_handed_back_is_the_flows_between_turns() -> None:
    manager, cid = flights(say("ok", intent="start_flow", flow="check_booking"), say("Reference?"))
    manager.process_message(cid, "check my booking")
    manager.pop_flow(cid, {"booking_ref": "BK-9"}, actor="alice")
    origin = manager.get_instance(cid).provenance["last_checked_booking"]
    assert (origin.by, origin.flow, origin.turn) == ("flow", "check_booking", None)
    assert origin.at is not None


def test_a_migration_moves_an_origin_with_its_renamed_key_and_its_defaults_are_the_migrations() -> None:
    chat = Chat()
    chat.say("I am Ada", {"name": "Ada"})
    instance = chat.manager.get_instance(chat.cid)
    new = definition({"guest": {}, "tier": {}}, ["guest"])
    migrated = migrate(instance, new, Migrations(keys={"name": "guest"}, defaults={"tier": "basic"})).instance
    assert migrated.provenance["guest"] == instance.provenance["name"]
    assert "name" not in migrated.provenance
    assert migrated.provenance["tier"].by == "migration"


# --- the reader -------------------------------------------------------------------------------------------


def test_the_reader_quotes_the_words_around_the_span() -> None:
    chat = Chat()
    chat.say("A table on March 12th, please", {"date": "2019-03-12"})
    found = chat.manager.provenance(chat.cid, "date")["date"]
    assert found.value == "2019-03-12"
    assert found.quote is not None
    assert (found.quote.before, found.quote.inside, found.quote.after) == ("A table on ", "March 12th", ", please")


def test_the_reader_masks_a_sensitive_value_and_its_words() -> None:
    chat = Chat()
    chat.say("my income is 52000 a year", {"income": 52000})
    found = chat.manager.provenance(chat.cid)["income"]
    assert found.value == "***" and found.quote is not None
    assert "52000" not in found.model_dump_json()
    assert (found.quote.before, found.quote.after) == ("my income is ", " a year")


# --- the property -----------------------------------------------------------------------------------------

RESTAURANT = load_fsm_definition(str(ROOT / "definitions" / "restaurant_booking.yaml"))


def backend() -> Any:
    """The shipped definitions' example backend (definitions/actions.py): the restaurant's calendar."""
    spec = importlib.util.spec_from_file_location("provenance_backend", ROOT / "definitions" / "actions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.registry


BACKEND = backend()
DATES = ["March 12th", "on the 14th of March", "next Friday", "tomorrow", "2019-03-20"]
TIMES = ["7pm", "at 19:30", "half past eight in the evening", "20:15", "6 pm"]
SIZES = ["4", "we are three", "two of us", "a table for 6", "8 people"]


def readings(declaration: KeyDeclaration, text: str) -> list[Any]:
    """What the words may mean, read as grounding reads them (the conversation's date is TODAY's): "March 12th"
    is this year's and next year's, and grounding takes either."""
    if declaration.format == "date":
        found = dates_in(text, TODAY.date(), declaration.date_order, declaration.window)
    elif declaration.format == "time":
        found = times_in(text)
    else:
        found = numbers_in(text)
    return [f.value for f in found if (f.start, f.end) == (0, len(text))]


def meant(declaration: KeyDeclaration, text: str) -> Any:
    """The value the model writes for what the user said: the engine's own reading of it."""
    if declaration.format == "date":
        found = dates_in(text, TODAY.date(), declaration.date_order, declaration.window)
    elif declaration.format == "time":
        found = times_in(text)
    else:
        found = numbers_in(text)
    return found[-1].value if found else None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["party_size", "booking_date", "booking_time"]), st.sampled_from(range(5))),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_provenance_spans_round_trip(turns: list[tuple[str, int]], in_words: bool) -> None:
    """Whatever the model wrote, every origin with a span reads, through the key's own reading, as the value."""
    keys = RESTAURANT.context_keys or {}
    phrases = {"party_size": SIZES, "booking_date": DATES, "booking_time": TIMES}
    state: dict[str, dict[str, Any]] = {"update": {}}

    def model(request: LLMRequest) -> dict[str, Any]:
        written = state["update"] if request.purpose == "turn" else {}
        return {"transition": {"target_state": "", "context_update": written}, "message": "Go on."}

    manager = FSMManager(
        fsm_loader=lambda _id: RESTAURANT,
        llm_interface=FunctionLLM(model),
        config=EngineConfig(clock=lambda: TODAY),
        actions=BACKEND,
    )
    cid, _ = manager.start_conversation("restaurant")
    for key, choice in turns:
        text = phrases[key][choice]
        value = meant(keys[key], text)
        state["update"] = {key: text if in_words and key != "party_size" else value}
        manager.process_message(cid, f"well, {text} I think")
    instance = manager.get_instance(cid)
    texts = {m["id"]: m["text"] for m in manager.get_conversation_history(cid)}
    for key, origin in instance.provenance.items():
        if origin.by in ("model", "extractor") and origin.source != "assistant" and key in keys:
            assert origin.has_span, (key, origin)
        if origin.has_span:
            assert origin.message is not None and origin.start is not None
            said = texts[origin.message][origin.start : origin.end]
            assert instance.context.data[key] in readings(keys[key], said), (key, said, origin)
