"""FSMManager end to end with a scripted model: the seed's API and what the original got wrong."""

import asyncio
import threading
from pathlib import Path

import pytest

from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine import EngineConfig
from llm_fsm.engine._messages import entry_role
from llm_fsm.errors import (
    ConversationEndedError,
    ConversationNotFoundError,
    HookError,
    InvalidTransitionError,
    LLMResponseError,
    MessageTooLargeError,
    TurnNotFoundError,
)
from llm_fsm.llm.fakes import FunctionLLM, ScriptedLLM
from llm_fsm.manager import FSMManager

#: the seed's example verbatim (definitions/ has the router that looks the customer up by an action)
ROUTER = str(Path(__file__).resolve().parent / "data" / "seed" / "customer_support_router.json")

FORM = {
    "name": "form",
    "description": "name then email",
    "initial_state": "ask_name",
    "protected_context_keys": ["account_id"],
    "states": {
        "ask_name": {
            "id": "ask_name",
            "description": "ask name",
            "purpose": "get the name",
            "required_context_keys": ["name"],
            "transitions": [
                {
                    "target_state": "ask_email",
                    "description": "name given",
                    "conditions": [{"description": "name known", "requires_context_keys": ["name"]}],
                }
            ],
        },
        "ask_email": {
            "id": "ask_email",
            "description": "ask email",
            "purpose": "get the email",
            "required_context_keys": ["email"],
            "transitions": [
                {
                    "target_state": "done",
                    "description": "email given",
                    "conditions": [{"description": "email known", "requires_context_keys": ["email"]}],
                }
            ],
        },
        "done": {"id": "done", "description": "done", "purpose": "thank the user", "transitions": []},
    },
}


def reply(target, message="ok", **update):
    return {"transition": {"target_state": target, "context_update": update}, "message": message}


def manager(replies, **kwargs):
    llm = ScriptedLLM(replies)
    return FSMManager(
        fsm_loader=lambda _id: __import__("llm_fsm.definition", fromlist=["x"]).FSMDefinition.model_validate(FORM),
        llm_interface=llm,
        **kwargs,
    ), llm


def test_start_returns_an_id_and_the_opening_message():
    fsm, _ = manager([reply("ask_name", "Hi! Your name?")])
    cid, opening = fsm.start_conversation("form")
    assert opening == "Hi! Your name?"
    assert fsm.get_current_state(cid) == "ask_name"


def test_a_turn_that_satisfies_the_guard_moves_on_with_one_llm_call():
    fsm, llm = manager([reply("ask_name"), reply("ask_email", "Thanks Ann, your email?", name="Ann")])
    cid, _ = fsm.start_conversation("form")
    assert fsm.process_message(cid, "I'm Ann") == "Thanks Ann, your email?"
    assert fsm.get_current_state(cid) == "ask_email"
    assert fsm.get_conversation_data(cid) == {"name": "Ann"}
    assert len(llm.requests) == 2


def test_a_refused_transition_does_not_return_the_models_lie():
    fsm, llm = manager(
        [reply("ask_name"), reply("ask_email", "Great, moving on!"), reply("ask_name", "What is your name?")]
    )
    cid, _ = fsm.start_conversation("form")
    answer = fsm.process_message(cid, "hello")
    assert answer == "What is your name?"
    assert fsm.get_current_state(cid) == "ask_name"
    assert llm.requests[-1].purpose == "regenerate"
    assert "missing name" in llm.requests[-1].system_prompt


def test_guarded_transition_fires_when_the_model_stays_and_the_reply_is_regenerated_for_the_new_state():
    fsm, llm = manager(
        [reply("ask_name"), reply("ask_name", "Your name?", name="Ann"), reply("ask_email", "Your email, Ann?")]
    )
    cid, _ = fsm.start_conversation("form")
    assert fsm.process_message(cid, "Ann") == "Your email, Ann?"
    assert fsm.get_current_state(cid) == "ask_email"
    assert "<current_state>ask_email</current_state>" in llm.requests[-1].system_prompt


def test_corrections_overwrite_collected_values():
    fsm, _ = manager([reply("ask_name"), reply("ask_email", name="Ann"), reply("ask_email", "noted", name="Anna")])
    cid, _ = fsm.start_conversation("form")
    fsm.process_message(cid, "Ann")
    fsm.process_message(cid, "actually it's Anna")
    assert fsm.get_conversation_data(cid)["name"] == "Anna"


def test_null_and_empty_values_do_not_count_as_collected():
    fsm, _ = manager([reply("ask_name"), reply("ask_email", name=""), reply("ask_name", "Your name?")])
    cid, _ = fsm.start_conversation("form")
    fsm.process_message(cid, "...")
    assert fsm.get_current_state(cid) == "ask_name"


def test_the_model_cannot_write_protected_or_engine_keys():
    fsm, _ = manager([reply("ask_name"), reply("ask_name", "hm", account_id="evil", _status="ended")])
    cid, _ = fsm.start_conversation("form", {"account_id": "acc-1"})
    fsm.process_message(cid, "set my account to evil")
    assert fsm.get_conversation_data(cid) == {"account_id": "acc-1"}
    changes = fsm.explain(cid).context_changes
    assert {c.key: c.reason for c in changes} == {"account_id": "protected key", "_status": "protected key"}


def test_reaching_a_terminal_state_ends_the_conversation():
    fsm, _ = manager([reply("ask_name"), reply("ask_email", name="Ann"), reply("done", "Bye", email="a@b.c")])
    cid, _ = fsm.start_conversation("form")
    fsm.process_message(cid, "Ann")
    fsm.process_message(cid, "a@b.c")
    assert fsm.is_conversation_ended(cid)
    with pytest.raises(ConversationEndedError):
        fsm.process_message(cid, "hello?")


def test_malformed_output_raises_llm_response_error_and_leaves_no_dangling_message():
    fsm, _ = manager([reply("ask_name"), {"raw": "this is not json"}])
    cid, _ = fsm.start_conversation("form")
    with pytest.raises(LLMResponseError):
        fsm.process_message(cid, "Ann")
    instance = fsm.get_instance(cid)
    assert [entry_role(e) for e in instance.context.conversation.exchanges] == ["assistant"]
    assert instance.turn_count == 0


def test_two_json_objects_in_one_reply_take_the_first_valid():
    text = 'Sure. {"oops": 1} and {"transition": {"target_state": "ask_email", "context_update": {"name": "Ann"}}, "message": "Email?"}'
    fsm, _ = manager([reply("ask_name"), {"raw": text}])
    cid, _ = fsm.start_conversation("form")
    assert fsm.process_message(cid, "Ann") == "Email?"


def test_unknown_conversation_ids_raise_a_value_error():
    fsm, _ = manager([])
    with pytest.raises(ConversationNotFoundError) as info:
        fsm.process_message("no-such-id", "hi")
    assert isinstance(info.value, ValueError)


def test_oversize_messages_are_refused_before_any_model_call():
    fsm, llm = manager([reply("ask_name")], max_input_chars=100)
    cid, _ = fsm.start_conversation("form")
    with pytest.raises(MessageTooLargeError):
        fsm.process_message(cid, "x" * 101)
    assert len(llm.requests) == 1


def test_strict_mode_raises_invalid_transition_and_changes_nothing():
    fsm, _ = manager([reply("ask_name"), reply("done", "bye")], strict=True)
    cid, _ = fsm.start_conversation("form")
    with pytest.raises(InvalidTransitionError):
        fsm.process_message(cid, "skip ahead")
    assert fsm.get_current_state(cid) == "ask_name"
    assert fsm.get_instance(cid).turn_count == 0


def test_explain_records_proposal_conditions_and_verdict():
    fsm, _ = manager([reply("ask_name"), reply("ask_email", "Great!"), reply("ask_name", "Name?")])
    cid, _ = fsm.start_conversation("form")
    fsm.process_message(cid, "hi")
    record = fsm.explain(cid)
    assert record.proposal == "ask_email"
    assert record.verdict.kind == "stay_rejected"
    assert record.evaluations[0].conditions[0].missing_keys == ["name"]
    assert [c.purpose for c in record.llm_calls] == ["turn", "regenerate"]
    assert fsm.explain(cid, 1) == record
    with pytest.raises(TurnNotFoundError):
        fsm.explain(cid, 7)


def test_explaining_a_turn_the_conversation_never_had_says_how_many_turns_it_has():
    fsm, _ = manager([reply("ask_name"), reply("ask_name", "Name?")])
    cid, _ = fsm.start_conversation("form")
    fsm.process_message(cid, "hi")
    with pytest.raises(TurnNotFoundError) as caught:
        fsm.explain(cid, 9)
    assert str(caught.value) == f"conversation {cid} has only 1 turn: there is no turn 9"
    assert "not kept" not in str(caught.value)


def test_explaining_turn_0_says_turns_count_from_1():
    fsm, _ = manager([reply("ask_name"), reply("ask_name", "Name?")])
    cid, _ = fsm.start_conversation("form")
    fsm.process_message(cid, "hi")
    with pytest.raises(TurnNotFoundError) as caught:
        fsm.explain(cid, 0)
    assert str(caught.value) == f"conversation {cid} has no turn 0: turns count from 1 (-1 is the last)"


def test_explaining_a_conversation_without_turns_says_it_has_none_yet():
    fsm, _ = manager([reply("ask_name")])
    cid, _ = fsm.start_conversation("form")
    with pytest.raises(TurnNotFoundError) as caught:
        fsm.explain(cid)
    assert str(caught.value) == f"conversation {cid} has no turns yet: there is no turn -1"


def test_explaining_a_turn_past_the_trail_bound_says_it_is_not_kept_and_which_are():
    fsm, _ = manager(
        [reply("ask_name")] + [reply("ask_name", f"r{i}") for i in range(4)], config=EngineConfig(max_turn_records=2)
    )
    cid, _ = fsm.start_conversation("form")
    for i in range(4):
        fsm.process_message(cid, f"m{i}")
    with pytest.raises(TurnNotFoundError) as caught:
        fsm.explain(cid, 1)
    assert str(caught.value).startswith(f"turn 1 of conversation {cid} is not kept: only turns 3 to 4 are")
    with pytest.raises(TurnNotFoundError) as caught:
        fsm.explain(cid, -3)
    assert str(caught.value).startswith(f"turn -3 (turn 2) of conversation {cid} is not kept: only turns 3 to 4 are")


def test_a_repeated_message_id_returns_the_stored_reply_without_a_second_turn():
    fsm, llm = manager([reply("ask_name"), reply("ask_email", "Email?", name="Ann")])
    cid, _ = fsm.start_conversation("form")
    first = fsm.process_message(cid, "Ann", message_id="m-1")
    again = fsm.process_message(cid, "Ann", message_id="m-1")
    assert first == again == "Email?"
    assert fsm.get_instance(cid).turn_count == 1 and len(llm.requests) == 2


def test_hooks_add_context_that_guards_read():
    fsm, _ = manager([reply("ask_name"), reply("ask_name", "hm"), reply("ask_email", "Your email?")])
    fsm.add_hook("after_context_update", lambda event: {"name": "from-crm"})
    cid, _ = fsm.start_conversation("form")
    fsm.process_message(cid, "it's me")
    # the model stayed, but the hook supplied the name, so the guard fired
    assert fsm.get_current_state(cid) == "ask_email"


def test_async_hooks_work_from_sync_code():
    async def on_start(event):
        return {"account_id": "acc-9"}

    fsm, _ = manager([reply("ask_name")])
    fsm.add_hook("on_start", on_start)
    cid, _ = fsm.start_conversation("form")
    assert fsm.get_conversation_data(cid) == {"account_id": "acc-9"}


def test_a_failing_hook_raises_hook_error_and_the_turn_is_not_applied():
    def broken(event):
        raise RuntimeError("crm down")

    fsm, _ = manager([reply("ask_name"), reply("ask_email", name="Ann")])
    fsm.add_hook("on_transition", broken)
    cid, _ = fsm.start_conversation("form")
    with pytest.raises(HookError):
        fsm.process_message(cid, "Ann")
    assert fsm.get_current_state(cid) == "ask_name" and fsm.get_conversation_data(cid) == {}


def test_async_api_runs_a_whole_conversation():
    fsm, _ = manager([reply("ask_name"), reply("ask_email", name="Ann"), reply("done", "Bye", email="a@b.c")])

    async def run():
        cid, _ = await fsm.astart_conversation("form")
        await fsm.aprocess_message(cid, "Ann")
        return cid, await fsm.aprocess_message(cid, "a@b.c")

    cid, last = asyncio.run(run())
    assert last == "Bye" and fsm.is_conversation_ended(cid)


def test_four_threads_on_one_conversation_each_get_the_reply_to_their_own_message():
    def echo(request):
        return {
            "transition": {"target_state": "ask_name", "context_update": {}},
            "message": f"re: {request.user_message}",
        }

    from llm_fsm.definition._model import FSMDefinition

    fsm = FSMManager(fsm_loader=lambda _: FSMDefinition.model_validate(FORM), llm_interface=FunctionLLM(echo))
    cid, _ = fsm.start_conversation("form")
    mismatches = []

    def worker(n):
        for i in range(20):
            message = f"thread {n} message {i}"
            if fsm.process_message(cid, message) != f"re: {message}":
                mismatches.append(message)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert mismatches == []
    exchanges = fsm.get_conversation_history(cid)[1:]  # live window + the store's archive
    pairs = list(zip(exchanges[::2], exchanges[1::2], strict=False))
    assert len(pairs) == 80
    assert all(
        (question["role"], answer["role"]) == ("user", "assistant") and answer["text"] == f"re: {question['text']}"
        for question, answer in pairs
    )


# --- the seed's Customer Support Router, end to end ----------------------------------------


def router_manager(replies):
    return FSMManager(llm_interface=ScriptedLLM(replies))


def test_router_premium_customer_with_billing_issue_reaches_billing():
    fsm = router_manager(
        [
            reply("greeting", "Welcome!"),
            reply("greeting", "Let me route you."),  # model stays; guard fires
            reply("premium_support", "Premium here. What's wrong?"),  # regenerated for premium_support
            reply("general_resolution", "Sorry!", **{"issue": {"description": "wrong charge on my bill"}}),
            reply("billing_issues", "Billing team here."),  # regenerated: billing overrides by priority
        ]
    )
    cid, _ = fsm.start_conversation(ROUTER, {"customer": {"tier": "premium"}})
    fsm.process_message(cid, "hello")
    assert fsm.get_current_state(cid) == "premium_support"
    assert fsm.process_message(cid, "I have a wrong charge on my bill") == "Billing team here."
    assert fsm.get_current_state(cid) == "billing_issues"


def test_router_standard_customer_unresolved_issue_is_escalated():
    fsm = router_manager(
        [
            reply("greeting", "Welcome!"),
            reply("standard_support", "Standard support. What's up?"),
            reply("general_resolution", "Let's fix it", **{"issue": {"description": "app crashes"}}),
            reply("resolution_confirmation", "Did that fix it?"),
            reply("feedback", "Great!", **{"issue": {"resolved": False}}),  # refused: not resolved
            reply("resolution_confirmation", "Sorry it is not fixed."),
            reply("escalation", "Escalating now."),
        ]
    )
    cid, _ = fsm.start_conversation(ROUTER, {"customer": {"tier": "standard", "lifetime_value": 100}})
    fsm.process_message(cid, "hi")
    fsm.process_message(cid, "the app crashes")
    fsm.process_message(cid, "ok")
    assert fsm.get_current_state(cid) == "resolution_confirmation"
    assert fsm.process_message(cid, "no it still crashes") == "Sorry it is not fixed."
    fsm.process_message(cid, "please escalate")
    assert fsm.get_current_state(cid) == "escalation"


def test_router_resolved_issue_leads_to_feedback_and_end():
    fsm = router_manager(
        [
            reply("greeting", "Welcome!"),
            reply("standard_support", "How can I help?"),
            reply("general_resolution", "Fixing", **{"issue": {"description": "password reset"}}),
            reply("resolution_confirmation", "Resolved?"),
            reply("feedback", "Rate us?", **{"issue": {"resolved": True}}),
            reply("end", "Thanks!", **{"feedback": {"rating": 5}}),
        ]
    )
    cid, _ = fsm.start_conversation(ROUTER, {"customer": {"tier": "standard"}})
    for text in ["hi", "password reset", "ok", "yes, fixed", "5 stars"]:
        fsm.process_message(cid, text)
    assert fsm.is_conversation_ended(cid)
    assert fsm.get_conversation_data(cid)["feedback"] == {"rating": 5}


def test_a_turn_in_progress_keeps_its_conversation_locked_even_through_garbage_collection():
    import gc

    from llm_fsm.definition._model import FSMDefinition

    entered, release = threading.Event(), threading.Event()

    def slow(request):
        if request.purpose == "turn":
            entered.set()
            release.wait(10)
        return {"transition": {"target_state": "ask_name", "context_update": {}}, "message": "ok"}

    fsm = FSMManager(fsm_loader=lambda _: FSMDefinition.model_validate(FORM), llm_interface=FunctionLLM(slow))
    cid, _ = fsm.start_conversation("form")
    worker = threading.Thread(target=fsm.process_message, args=(cid, "hi"))
    worker.start()
    try:
        assert entered.wait(10)
        gc.collect()
        assert fsm._lock_for(cid).locked(), "a second turn must wait for the first"
    finally:
        release.set()
        worker.join()


def test_requests_name_the_keys_that_matter_in_the_state():
    fsm, llm = manager([reply("ask_name"), reply("ask_email", "Email?", name="Ann"), reply("ask_email", "ok")])
    cid, _ = fsm.start_conversation("form", {"account_id": "acc-1"})
    fsm.process_message(cid, "Ann")
    fsm.process_message(cid, "hm")
    assert llm.requests[1].context_keys == ["name", "account_id"]
    assert llm.requests[2].context_keys == ["email", "account_id", "name"]


class _SchemaSendingLLM(ScriptedLLM):
    """A scripted model whose interface, like LiteLLMInterface on OpenAI, sends the reply schema itself."""

    sends_reply_schema = True


def test_prompts_show_the_format_example_when_the_interface_sends_no_schema():
    fsm, llm = manager([reply("ask_name", "Hi"), reply("ask_email", "Thanks", name="Ada")])
    cid, _ = fsm.start_conversation("form")
    fsm.process_message(cid, "I'm Ada")
    assert all("<response_format>" in request.system_prompt for request in llm.requests)


def test_prompts_leave_the_format_to_the_schema_when_the_interface_sends_it():
    # opening, a refused move (no name given), and the regenerated reply: three prompts
    llm = _SchemaSendingLLM([reply("ask_name", "Hi"), reply("ask_email", "Thanks"), reply("ask_name", "Your name?")])
    fsm = FSMManager(fsm_loader=lambda _id: FSMDefinition.model_validate(FORM), llm_interface=llm)
    cid, _ = fsm.start_conversation("form")
    fsm.process_message(cid, "hello")
    assert [r.purpose for r in llm.requests] == ["opening", "turn", "regenerate"]
    for request in llm.requests:
        assert "<response_format>" not in request.system_prompt
        assert "response schema" in request.system_prompt and request.response_schema


def test_a_conversation_started_from_a_definition_object_keeps_running_on_it():
    """start_conversation(FSMDefinition) stores the definition's name; later turns must find that definition."""
    from llm_fsm.definition import FSMDefinition

    fsm = FSMManager(llm_interface=ScriptedLLM([reply("ask_name", "Name?"), reply("ask_email", "Email?", name="Ann")]))
    cid, _ = fsm.start_conversation(FSMDefinition.model_validate(FORM))
    assert fsm.process_message(cid, "Ann") == "Email?"
    assert fsm.get_current_state(cid) == "ask_email"


def test_process_turn_returns_the_record_and_where_the_turn_left_the_conversation():
    from llm_fsm.llm.fakes import ScriptedLLM

    definition = FSMDefinition.model_validate(
        {
            "name": "t",
            "description": "t",
            "initial_state": "a",
            "states": {
                "a": {
                    "id": "a",
                    "description": "a",
                    "purpose": "a",
                    "transitions": [{"target_state": "b", "description": "go"}],
                },
                "b": {"id": "b", "description": "b", "purpose": "b", "transitions": []},
            },
        }
    )
    manager = FSMManager(
        fsm_loader=lambda _id: definition,
        llm_interface=ScriptedLLM(["Hi", {"target_state": "b", "context_update": {}, "message": "Bye"}]),
    )
    cid, _ = manager.start_conversation("t")
    outcome = manager.process_turn(cid, "done", message_id="m1")
    assert (outcome.reply, outcome.state, outcome.ended) == ("Bye", "b", True)
    assert outcome.record is not None and outcome.record.verdict.kind == "proposal_accepted"
    again = manager.process_turn(cid, "done", message_id="m1")
    assert (again.reply, again.record, again.state) == ("Bye", None, "b")
