"""definitions/actions.py is a backend for every action the shipped definitions call.

``llm-fsm chat definitions/coffee_order.yaml --actions definitions/actions.py:registry`` must work, so
every ``call`` a definition declares is registered there, under a function that takes the declared
input names and returns the fields the declared outputs read. The fake data itself is pinned too: the
conversation scripts and the README describe it (C-1001 is premium, Friday at 20:00 is full, ...).
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from llm_fsm.actions import load_registry
from llm_fsm.definition._actions import ActionDeclaration, mcp_tool_of
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.loading import load_fsm_definition
from llm_fsm.manager import FSMManager
from llm_fsm.scripting._files import is_mcp_config_file

DEFINITIONS = Path(__file__).resolve().parents[1] / "definitions"
BACKEND = DEFINITIONS / "actions.py"
REGISTRY = load_registry(f"{BACKEND}:registry")


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_backend", BACKEND)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BACKEND_MODULE = _module()


def _declarations() -> list[tuple[str, str, ActionDeclaration]]:
    found = []
    for path in sorted(DEFINITIONS.rglob("*")):
        if path.suffix not in (".json", ".yaml", ".yml") or ".conv." in path.name or is_mcp_config_file(path):
            continue
        definition = load_fsm_definition(path, cache=None)
        for state in definition.states.values():
            found += [(path.name, state.id, action) for action in state.actions or ()]
            timed = [entry.action_declaration for entry in state.after or ()]  # a timer's action is declared too
            found += [(path.name, state.id, action) for action in timed if action is not None]
    # mcp:SERVER/TOOL calls are tools of the shipped MCP server (definitions/mcp/, tests/mcp/test_client_example.py)
    return [entry for entry in found if mcp_tool_of(entry[2].call) is None]


DECLARATIONS = _declarations()
IDS = [f"{file}:{state}:{action.call}" for file, state, action in DECLARATIONS]

#: inputs the fake data answers without failing, by argument name
VALID_INPUTS: dict[str, dict[str, Any]] = {
    "lookup_customer": {"customer_id": "C-1001"},
    "price_order": {"drink": "cappuccino", "size": "large", "milk": "oat"},
    "check_availability": {"date": "2027-06-12", "time": "19:30", "party_size": 4},
    "place_booking": {"date": "2027-06-12", "time": "19:30", "party_size": 4, "name": "Chidi Okafor"},
    "list_slots": {"service": "check_up"},
    "release_table": {"date": "2027-06-12", "time": "19:30", "party_size": 4},
}


def test_the_shipped_definitions_call_actions() -> None:
    assert {action.call for _, _, action in DECLARATIONS} == set(VALID_INPUTS)


def test_the_example_backend_registers_exactly_the_actions_the_definitions_call() -> None:
    assert REGISTRY.names() == sorted({action.call for _, _, action in DECLARATIONS})


@pytest.mark.parametrize(("file", "state", "action"), DECLARATIONS, ids=IDS)
def test_the_function_takes_the_declared_input_names(file: str, state: str, action: ActionDeclaration) -> None:
    function = getattr(BACKEND_MODULE, action.call)
    signature = inspect.signature(function)
    # every declared input is a parameter, and every parameter without a default is declared
    signature.bind(**dict.fromkeys(action.inputs or {}))
    required = {n for n, p in signature.parameters.items() if p.default is inspect.Parameter.empty}
    assert required <= set(action.inputs or {})


@pytest.mark.parametrize(("file", "state", "action"), DECLARATIONS, ids=IDS)
def test_the_function_returns_every_field_the_declared_outputs_read(
    file: str, state: str, action: ActionDeclaration
) -> None:
    arguments = {name: VALID_INPUTS[action.call][name] for name in action.inputs or {}}
    result = getattr(BACKEND_MODULE, action.call)(**arguments)
    assert set((action.outputs or {}).values()) <= set(result)


# --- the fake data the scripts and the README describe -------------------------------------------


@pytest.mark.parametrize(
    ("customer_id", "tier", "lifetime_value"),
    [("C-1001", "premium", 12000), ("C-2002", "standard", 300), ("C-3003", "standard", 8000)],
)
def test_the_crm_knows_three_customers(customer_id: str, tier: str, lifetime_value: float) -> None:
    assert BACKEND_MODULE.lookup_customer(customer_id) == {"tier": tier, "lifetime_value": lifetime_value}


def test_the_crm_raises_for_an_unknown_customer_so_on_error_applies() -> None:
    with pytest.raises(LookupError, match="C-9999"):
        BACKEND_MODULE.lookup_customer("C-9999")


@pytest.mark.parametrize(
    ("drink", "size", "milk", "price"),
    [
        ("espresso", "small", None, 2.2),
        ("cappuccino", "medium", None, 3.5),
        ("cappuccino", "large", "oat", 4.4),
        ("latte", "medium", "whole", 3.5),
        ("tea", "small", None, 2.0),
    ],
)
def test_the_till_prices_drink_size_and_plant_milk(drink: str, size: str, milk: str | None, price: float) -> None:
    assert BACKEND_MODULE.price_order(drink, size, milk) == {"price": price}


def test_the_till_refuses_a_drink_off_the_menu() -> None:
    with pytest.raises(ValueError, match="hot_chocolate"):
        BACKEND_MODULE.price_order("hot_chocolate", "small")


@pytest.mark.parametrize(
    ("date", "time", "party_size", "available"),
    [
        ("2025-06-20", "20:00", 2, False),  # a Friday at eight
        ("2027-06-11", "20:00", 2, False),  # another Friday
        ("2025-06-20", "21:30", 2, True),
        ("2025-06-21", "20:00", 2, True),  # Saturday
        ("2025-06-21", "20:00", 12, False),  # the events team's
    ],
)
def test_the_restaurant_calendar_is_full_on_fridays_at_eight(
    date: str, time: str, party_size: int, available: bool
) -> None:
    assert BACKEND_MODULE.check_availability(date, time, party_size) == {"available": available}


def test_a_booking_gets_a_stable_reference_in_the_declared_format() -> None:
    first = BACKEND_MODULE.place_booking("2025-06-21", "19:30", 4, "Chidi Okafor")
    again = BACKEND_MODULE.place_booking("2025-06-21", "19:30", 4, "Chidi Okafor")
    assert first == again and re.fullmatch(r"R-[0-9]{4}", first["booking_ref"])


def test_a_booking_of_a_full_slot_fails_so_on_error_applies() -> None:
    with pytest.raises(RuntimeError, match="no table"):
        BACKEND_MODULE.place_booking("2025-06-20", "20:00", 2, "Wanjiru Kamau")


def test_the_clinic_lists_slots_per_service_in_the_declared_format() -> None:
    for service in ("consultation", "follow_up", "check_up"):
        slots = BACKEND_MODULE.list_slots(service)["slots"]
        assert slots and all(re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", s) for s in slots)


# --- the registry drives the definitions, as --actions does ---------------------------------------


def _router_turn(customer_id: str) -> tuple[str, dict[str, Any]]:
    def model(request: Any) -> dict[str, Any]:
        update = {"customer_id": customer_id} if request.purpose == "turn" else {}
        return {"transition": {"target_state": "", "context_update": update}, "message": "ok"}

    manager = FSMManager(
        fsm_loader=lambda _id: load_fsm_definition(DEFINITIONS / "customer_support_router.json", cache=None),
        llm_interface=FunctionLLM(model),
        actions=REGISTRY,
    )
    cid, _ = manager.start_conversation("router")
    manager.process_message(cid, f"it's {customer_id}")
    return manager.get_current_state(cid), manager.get_instance(cid).context.data


@pytest.mark.parametrize(
    ("customer_id", "state"),
    [("C-1001", "premium_support"), ("C-2002", "standard_support"), ("C-3003", "premium_support")],
)
def test_the_router_routes_on_the_tier_the_example_crm_returns(customer_id: str, state: str) -> None:
    reached, data = _router_turn(customer_id)
    assert reached == state
    assert data["customer"] == BACKEND_MODULE.CUSTOMERS[customer_id]


def test_the_router_sends_a_customer_the_example_crm_does_not_know_to_standard_support() -> None:
    reached, data = _router_turn("C-9999")
    assert reached == "standard_support"
    assert "customer" not in data
