"""Moving a stored conversation onto a new definition version (``llm_fsm.engine._migrate``).

``migrate`` is pure: it returns a migrated copy, what it changed, and what the new version still cannot hold
(``stranded``). Each frame of the flow stack is migrated with its own definition's block: the root's block
maps the root frame, a sub-flow's block maps that sub-flow's frames, and a parent's ``flows`` renames the
sub-flows it started.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llm_fsm.definition._migrations import Migrations
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._instance import FlowFrame, FSMContext, FSMInstance, Handoff
from llm_fsm.engine._migrate import MigrationProblem, MigrationResult, migrate, stranded
from llm_fsm.engine._values import check
from llm_fsm.llm.fakes import ScriptedLLM
from llm_fsm.loading import load_fsm_definition, read_document
from llm_fsm.manager import FSMManager


def state(sid: str, *targets: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": sid,
        "description": sid,
        "purpose": sid,
        "transitions": [{"target_state": t, "description": t} for t in targets],
        **extra,
    }


def definition(
    name: str,
    states: dict[str, dict[str, Any]],
    *,
    keys: dict[str, Any] | None = None,
    migrations: dict[str, Any] | None = None,
    **extra: Any,
) -> FSMDefinition:
    data: dict[str, Any] = {
        "name": name,
        "description": name,
        "initial_state": next(iter(states)),
        "states": states,
        **extra,
    }
    if keys is not None:
        data["context_keys"] = keys
    if migrations is not None:
        data["migrations"] = migrations
    return FSMDefinition.model_validate(data)


OLD_KEYS = {"name": {}, "email": {"format": "email"}, "age": {"type": "integer"}}

BLOCK: dict[str, Any] = {
    "states": {"ask_name": "collect_name", "ask_email": "contact", "ask_phone": "contact"},
    "keys": {"name": "full_name", "addr.city": "city"},
    "defaults": {"tier": "basic"},
    "flows": {"verify": "verify_identity"},
}

NEW = definition(
    "signup",
    {
        "collect_name": state("collect_name", "contact"),
        "contact": state(
            "contact", "confirm", flows=[{"name": "verify_identity", "definition": "v", "description": "v"}]
        ),
        "confirm": state("confirm", "done"),
        "done": state("done"),
    },
    keys={
        "full_name": {},
        "email": {"format": "email"},
        "age": {"type": "integer", "minimum": 18},
        "tier": {"enum": ["basic", "gold"]},
        "city": {},
    },
    migrations=BLOCK,
)

VERIFY = definition(
    "verify_identity",
    {"enter_code": state("enter_code", "verified"), "verified": state("verified")},
    keys={"passed": {"type": "boolean"}},
    migrations={"states": {"code": "enter_code"}, "keys": {"ok": "passed"}},
)


def conversation(current: str = "ask_name", data: dict[str, Any] | None = None, **fields: Any) -> FSMInstance:
    return FSMInstance(
        fsm_id="signup",
        current_state=current,
        context=FSMContext(data=data if data is not None else {"name": "Ada"}),
        definition_hash="oldhash",
        flow_name="signup",
        **fields,
    )


def in_sub_flow(root_state: str = "ask_email", sub_state: str = "code") -> FSMInstance:
    """A conversation paused in the root, running the ``verify`` sub-flow it called."""
    root = FlowFrame(
        flow_id="root",
        flow_name="signup",
        fsm_id="signup",
        definition_hash="oldhash",
        current_state=root_state,
        data={"name": "Ada", "email": "ada@example.com"},
        status="paused",
        mode="root",
    )
    return FSMInstance(
        fsm_id="verify.yaml",
        current_state=sub_state,
        context=FSMContext(data={"ok": True}),
        definition_hash="oldverify",
        flow_id="verify_1234",
        flow_name="verify",
        flow_mode="call",
        flow_output_mapping={"name_checked": "ok"},
        flow_stack=[root],
    )


# --- states -------------------------------------------------------------------------------------


def test_a_renamed_state_moves_the_conversation_to_its_new_id() -> None:
    result = migrate(conversation("ask_name"), NEW)
    assert result.instance.current_state == "collect_name"
    assert result.problems == ()


def test_merged_states_both_lead_to_the_one_state() -> None:
    assert migrate(conversation("ask_email"), NEW).instance.current_state == "contact"
    assert migrate(conversation("ask_phone"), NEW).instance.current_state == "contact"


def test_a_state_the_new_version_still_declares_is_left_alone() -> None:
    result = migrate(conversation("confirm"), NEW)
    assert result.instance.current_state == "confirm"
    assert not [c for c in result.changes if c.kind == "state"]


def test_the_conversation_is_pinned_to_the_new_version() -> None:
    result = migrate(conversation(), NEW)
    assert result.instance.definition_hash == NEW.content_hash
    (change,) = [c for c in result.changes if c.kind == "definition"]
    assert (change.before, change.after) == ("oldhash", NEW.content_hash)


def test_a_change_is_structured_and_reads_as_a_sentence() -> None:
    (change,) = [c for c in migrate(conversation(), NEW).changes if c.kind == "state"]
    assert (change.where, change.before, change.after) == ("root", "ask_name", "collect_name")
    assert "ask_name" in change.message and "collect_name" in change.message
    assert change.to_dict()["kind"] == "state"


def test_a_handoff_remembers_the_renamed_state_it_came_from() -> None:
    handed = conversation("ask_name", mode="human", handoff=Handoff(reason="r", actor="a", from_state="ask_name"))
    result = migrate(handed, NEW)
    assert result.instance.handoff is not None and result.instance.handoff.from_state == "collect_name"
    assert result.instance.mode == "human"
    assert handed.handoff is not None and handed.handoff.from_state == "ask_name"


def test_a_pending_cancel_is_kept() -> None:
    assert migrate(conversation(pending_cancel=True), NEW).instance.pending_cancel is True


# --- keys ---------------------------------------------------------------------------------------


def test_a_renamed_key_keeps_its_value_under_the_new_name() -> None:
    data = migrate(conversation(data={"name": "Ada", "email": "ada@example.com"}), NEW).instance.context.data
    assert data == {"full_name": "Ada", "email": "ada@example.com", "tier": "basic"}


def test_a_dot_path_is_renamed_out_of_its_object() -> None:
    data = migrate(conversation(data={"addr": {"city": "Oslo", "zip": "0150"}}), NEW).instance.context.data
    assert data["city"] == "Oslo"
    assert data["addr"] == {"zip": "0150"}


def test_keys_renamed_onto_each_other_are_swapped() -> None:
    new = definition("s", {"a": state("a")}, migrations={"keys": {"x": "y", "y": "x"}})
    data = migrate(conversation("a", data={"x": 1, "y": 2}), new).instance.context.data
    assert data == {"x": 2, "y": 1}


def test_a_default_fills_a_key_the_conversation_lacks() -> None:
    result = migrate(conversation(data={}), NEW)
    assert result.instance.context.data["tier"] == "basic"
    (change,) = [c for c in result.changes if c.kind == "default"]
    assert change.name == "tier"


def test_a_default_never_replaces_a_stored_value() -> None:
    assert migrate(conversation(data={"tier": "gold"}), NEW).instance.context.data["tier"] == "gold"


def test_a_stored_value_is_put_in_the_form_its_new_declaration_stores() -> None:
    # the old version kept age as text; the new one declares an integer, which the engine stores as a number
    result = migrate(conversation(data={"age": "42"}), NEW)
    assert result.instance.context.data["age"] == 42
    assert result.problems == ()


# --- the flow stack -----------------------------------------------------------------------------


def test_a_renamed_sub_flow_is_renamed_in_the_stack() -> None:
    result = migrate(in_sub_flow(), NEW, flows={"verify_identity": VERIFY})
    instance = result.instance
    assert instance.flow_name == "verify_identity"
    assert instance.stack == ["verify_identity"]
    assert result.problems == ()


def test_each_frame_is_mapped_by_its_own_definition() -> None:
    result = migrate(in_sub_flow("ask_email", "code"), NEW, flows={"verify_identity": VERIFY})
    instance = result.instance
    assert instance.flow_stack[0].current_state == "contact"  # the root's block
    assert instance.current_state == "enter_code"  # the sub-flow's block
    assert instance.flow_stack[0].data["full_name"] == "Ada"  # root keys renamed in the paused frame
    assert instance.context.data == {"passed": True}  # the sub-flow's keys renamed in its own data


def test_each_frame_is_pinned_to_its_own_new_version() -> None:
    instance = migrate(in_sub_flow(), NEW, flows={"verify_identity": VERIFY}).instance
    assert instance.flow_stack[0].definition_hash == NEW.content_hash
    assert instance.definition_hash == VERIFY.content_hash


def test_a_sub_flow_s_output_mapping_follows_both_renames() -> None:
    # parent key name_checked <- sub-flow key ok: ok was renamed passed by the sub-flow's block
    instance = migrate(in_sub_flow(), NEW, flows={"verify_identity": VERIFY}).instance
    assert instance.flow_output_mapping == {"name_checked": "passed"}


def test_archived_flows_are_renamed_too() -> None:
    before = conversation("confirm")
    before.completed_flows = [
        FlowFrame(flow_id="v1", flow_name="verify", fsm_id="v", current_state="done", status="completed", mode="call")
    ]
    result = migrate(before, NEW)
    assert [f.flow_name for f in result.instance.completed_flows] == ["verify_identity"]
    assert before.completed_flows[0].flow_name == "verify"


def test_the_migrations_given_replace_the_definition_s_own_block() -> None:
    given = Migrations(states={"ask_name": "confirm"})
    result = migrate(conversation("ask_name"), NEW, given)
    assert result.instance.current_state == "confirm"
    assert result.instance.context.data == {"name": "Ada"}  # the definition's key rename was not applied


# --- action runs --------------------------------------------------------------------------------


def test_a_collected_action_that_ran_in_a_renamed_state_is_remembered_under_its_new_id() -> None:
    action = {"call": "lookup", "inputs": {"who": "full_name"}}
    old_key, new_key = "root/ask_name#0:lookup", "root/collect_name#0:lookup"
    new = definition("s", {"collect_name": state("collect_name", actions=[action])}, migrations=BLOCK)
    result = migrate(conversation("ask_name", action_runs={old_key: "f1"}), new)
    assert result.instance.action_runs == {new_key: "f1"}


def test_a_run_of_an_action_the_new_state_no_longer_has_is_forgotten() -> None:
    result = migrate(conversation("ask_name", action_runs={"root/ask_name#0:lookup": "f1"}), NEW)
    assert result.instance.action_runs == {}


# --- the input is never changed -----------------------------------------------------------------


def test_the_stored_conversation_is_never_changed() -> None:
    original = in_sub_flow()
    original.action_runs = {"root/ask_email#0:x": "f"}
    before = copy.deepcopy(original.model_dump())
    migrate(original, NEW, flows={"verify_identity": VERIFY})
    assert original.model_dump() == before


# --- what the new version cannot hold -----------------------------------------------------------


def kinds(problems: tuple[MigrationProblem, ...] | list[MigrationProblem]) -> list[tuple[str, str, str]]:
    return [(p.kind, p.where, p.name) for p in problems]


def test_a_state_the_new_version_does_not_declare_strands_the_conversation() -> None:
    result = migrate(conversation("ask_address"), NEW)
    assert kinds(result.problems) == [("state", "root", "ask_address")]
    assert "ask_address" in result.problems[0].message and "migrations.states" in result.problems[0].message


def test_a_paused_frame_in_an_undeclared_state_strands_the_conversation() -> None:
    result = migrate(in_sub_flow("ask_address"), NEW, flows={"verify_identity": VERIFY})
    assert kinds(result.problems) == [("state", "root", "ask_address")]


def test_a_sub_flow_the_new_parent_no_longer_declares_strands_the_conversation() -> None:
    without = definition("signup", {"ask_email": state("ask_email")})
    result = migrate(in_sub_flow(), without, flows={"verify": VERIFY})
    assert ("flow", "verify", "verify") in kinds(result.problems)


def test_a_sub_flow_whose_new_definition_was_not_given_is_reported() -> None:
    result = migrate(in_sub_flow(), NEW)
    assert kinds(result.problems) == [("flow", "verify_identity", "verify_identity")]


def test_a_stored_value_its_new_declaration_refuses_strands_the_conversation() -> None:
    result = migrate(conversation(data={"age": 12}), NEW)
    (problem,) = result.problems
    assert (problem.kind, problem.where, problem.name) == ("key", "root", "age")
    assert "12" in problem.message


def test_a_sensitive_value_is_not_shown_in_a_problem() -> None:
    new = definition("s", {"a": state("a")}, keys={"pin": {"pattern": "^[0-9]{4}$", "sensitive": True}})
    (problem,) = migrate(conversation("a", data={"pin": "secret-12"}), new).problems
    assert "secret" not in problem.message


def test_a_default_its_declaration_refuses_is_reported_and_not_stored() -> None:
    new = definition("s", {"a": state("a")}, keys={"tier": {"enum": ["basic"]}}, migrations={"defaults": {"tier": "x"}})
    result = migrate(conversation("a", data={}), new)
    assert kinds(result.problems) == [("default", "root", "tier")]
    assert "tier" not in result.instance.context.data


def test_stranded_alone_judges_a_conversation_as_stored() -> None:
    assert kinds(stranded(conversation("ask_name"), NEW)) == [("state", "root", "ask_name")]
    assert stranded(migrate(conversation("ask_name"), NEW).instance, NEW) == []


def test_the_result_says_whether_the_conversation_can_move() -> None:
    assert isinstance(migrate(conversation(), NEW), MigrationResult)
    assert migrate(conversation(), NEW).ok
    assert not migrate(conversation("nowhere"), NEW).ok


# --- the property -------------------------------------------------------------------------------

OLD_STATES = ["s0", "s1", "s2", "s3", "s4"]
NEW_STATES = ["n0", "n1", "s2", "s3"]
DECLARED = {"k_int": {"type": "integer", "minimum": 0}, "k_enum": {"enum": ["a", "b"]}, "k_str": {}}
VALUES = st.one_of(st.integers(-5, 5), st.sampled_from(["a", "b", "c", "7", " a "]), st.booleans())


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[FSMInstance, FSMDefinition]:
    state_map = draw(st.dictionaries(st.sampled_from(OLD_STATES), st.sampled_from(NEW_STATES + ["gone"]), max_size=5))
    key_map = draw(st.dictionaries(st.sampled_from(["o1", "o2", "k_str"]), st.sampled_from(list(DECLARED)), max_size=2))
    defaults = draw(st.dictionaries(st.sampled_from(list(DECLARED)), VALUES, max_size=2))
    new = definition(
        "p",
        {sid: state(sid) for sid in NEW_STATES},
        keys=DECLARED,
        migrations={"states": state_map, "keys": key_map, "defaults": defaults},
    )
    data = draw(st.dictionaries(st.sampled_from(["o1", "o2", *DECLARED]), VALUES, max_size=4))
    return conversation(draw(st.sampled_from(OLD_STATES + NEW_STATES)), data=data), new


@given(scenarios())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_conversation_migrated_without_problems_is_one_the_new_version_holds(
    scenario: tuple[FSMInstance, FSMDefinition],
) -> None:
    before, new = scenario
    stored = copy.deepcopy(before.model_dump())
    result = migrate(before, new)
    assert before.model_dump() == stored
    if result.problems:
        return
    instance = result.instance
    assert instance.current_state in new.states
    assert instance.definition_hash == new.content_hash
    for key, declaration in (new.context_keys or {}).items():
        if key in instance.context.data:
            assert check(declaration, instance.context.data[key]) is None, (key, instance.context.data[key])


SUB_OLD_STATES = ["c0", "c1", "c2"]
SUB_NEW_STATES = ["d0", "c2"]


def mostly_complete(old: list[str], new: list[str]) -> st.SearchStrategy[dict[str, str]]:
    """A state map that maps every old state, then perhaps forgets some."""
    complete = st.fixed_dictionaries({sid: st.sampled_from(new) for sid in old})
    return st.tuples(complete, st.sets(st.sampled_from(old), max_size=2)).map(
        lambda drawn: {k: v for k, v in drawn[0].items() if k not in drawn[1]}
    )


@st.composite
def stacked_scenarios(draw: st.DrawFn) -> tuple[FSMInstance, FSMDefinition, dict[str, FSMDefinition]]:
    """A root paused in an old state, running an old sub-flow ``sub`` that the new root may rename."""
    renamed = draw(st.sampled_from(["sub", "sub2"]))
    declared = draw(st.sampled_from([renamed, renamed, renamed, "other"]))
    new = definition(
        "p",
        {sid: state(sid) for sid in NEW_STATES},
        keys=DECLARED,
        flows=[{"name": declared, "definition": "sub.yaml", "description": "s"}],
        migrations={
            "states": draw(mostly_complete(OLD_STATES, NEW_STATES)),
            "flows": {"sub": renamed} if renamed != "sub" else {},
        },
    )
    child = definition(
        "child",
        {sid: state(sid) for sid in SUB_NEW_STATES},
        keys={"k_int": {"type": "integer"}},
        migrations={"states": draw(mostly_complete(SUB_OLD_STATES, SUB_NEW_STATES))},
    )
    given = draw(st.sampled_from([{renamed: child}, {renamed: child}, {"sub": child}, {}]))
    root = FlowFrame(
        flow_id="root",
        flow_name="p",
        fsm_id="p",
        current_state=draw(st.sampled_from(OLD_STATES + NEW_STATES)),
        data=draw(st.dictionaries(st.sampled_from(list(DECLARED)), VALUES, max_size=3)),
        mode="root",
    )
    instance = FSMInstance(
        fsm_id="sub.yaml",
        current_state=draw(st.sampled_from(SUB_OLD_STATES + SUB_NEW_STATES)),
        context=FSMContext(data=draw(st.dictionaries(st.just("k_int"), st.one_of(st.integers(), VALUES), max_size=1))),
        flow_id="sub_1",
        flow_name="sub",
        flow_mode="call",
        flow_stack=[root],
    )
    return instance, new, given


@given(stacked_scenarios())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_frame_of_a_stack_migrated_without_problems_is_declared_in_its_new_version(
    scenario: tuple[FSMInstance, FSMDefinition, dict[str, FSMDefinition]],
) -> None:
    before, new, flows = scenario
    stored = copy.deepcopy(before.model_dump())
    result = migrate(before, new, flows=flows)
    assert before.model_dump() == stored
    if result.problems:
        return
    instance = result.instance
    root, child = instance.flow_stack[0], flows[instance.flow_name or ""]
    assert root.current_state in new.states and root.definition_hash == new.content_hash
    assert instance.current_state in child.states and instance.definition_hash == child.content_hash
    assert instance.flow_name in {flow.name for flow in new.flows or ()}
    for frame_data, declared in ((root.data, new), (instance.context.data, child)):
        for key, declaration in (declared.context_keys or {}).items():
            if key in frame_data:
                assert check(declaration, frame_data[key]) is None, (key, frame_data[key])


def test_an_empty_block_given_migrates_nothing_the_definition_s_block_would() -> None:
    result = migrate(conversation("ask_name"), NEW, Migrations())
    assert result.instance.current_state == "ask_name"
    assert [p.kind for p in result.problems] == ["state"]


# --- a conversation the engine ran --------------------------------------------------------------

BOOKING = Path(__file__).resolve().parents[1] / "definitions" / "flight_booking.yaml"


def _in_check_booking() -> FSMInstance:
    """flight_booking paused in collect_origin, running its check_booking sub-flow, as the engine left it."""
    replies = [
        {"intent": "continue", "transition": {"target_state": "", "context_update": {}}, "message": "From where?"},
        {"intent": "start_flow", "flow": "check_booking", "transition": {"target_state": ""}, "message": "Sure."},
        {"intent": "continue", "transition": {"target_state": "", "context_update": {}}, "message": "Reference?"},
    ]
    fsm = FSMManager(llm_interface=ScriptedLLM(replies))
    cid, _ = fsm.start_conversation(str(BOOKING))
    fsm.process_message(cid, "Can I check my booking first?")
    instance = fsm.get_instance(cid)
    assert instance.stack == ["check_booking"] and instance.flow_stack[0].current_state == "collect_origin"
    return instance


def test_a_running_conversation_migrated_onto_its_own_version_is_unchanged() -> None:
    instance = _in_check_booking()
    root = load_fsm_definition(BOOKING)
    child = load_fsm_definition(BOOKING.parent / "flows" / "check_booking.yaml")
    result = migrate(instance, root, flows={"check_booking": child})
    assert result.problems == () and result.changes == ()
    assert result.instance.model_dump() == instance.model_dump()


def test_a_running_conversation_follows_renames_of_both_versions() -> None:
    instance = _in_check_booking()
    root_data = read_document(BOOKING).data
    root_data["flows"][0]["name"] = "booking_status"
    root_data["states"]["origin"] = {**root_data["states"].pop("collect_origin"), "id": "origin"}
    root_data["initial_state"] = "origin"
    for state_data in root_data["states"].values():
        for transition in state_data.get("transitions") or ():
            if transition["target_state"] == "collect_origin":
                transition["target_state"] = "origin"
    root_data["migrations"] = {"states": {"collect_origin": "origin"}, "flows": {"check_booking": "booking_status"}}
    root = FSMDefinition.model_validate(root_data)
    child = load_fsm_definition(BOOKING.parent / "flows" / "check_booking.yaml")
    result = migrate(instance, root, flows={"booking_status": child})
    assert result.problems == ()
    assert result.instance.stack == ["booking_status"]
    assert result.instance.flow_stack[0].current_state == "origin"
    assert result.instance.flow_stack[0].definition_hash == root.content_hash
    assert result.instance.current_state == instance.current_state == "ask_reference"
