"""An example backend for the definitions in this folder: the functions their states' ``actions`` call.

A definition says *which* backend call runs *when* and where its result goes (``actions:`` in a state);
the application registers a function under each name. This module is that application side for the
examples, as deterministic offline fakes over small in-memory tables (a CRM, a till, a restaurant
calendar, a clinic calendar), so the examples run end to end without any service::

    llm-fsm chat definitions/coffee_order.yaml --actions definitions/actions.py:registry --model gpt-4o-mini
    llm-fsm test definitions/ --actions definitions/actions.py:registry

A real application registers its own functions under the same names (``manager.actions.register`` or
``FSMManager(actions=registry)``), taking the argument names of each declaration's ``inputs`` and
returning a mapping with the fields its ``outputs`` read. A failure is an exception (or a timeout):
the declaration's ``on_error`` then decides where the conversation goes, so these fakes raise for an
unknown customer, a drink not on the menu or a table already taken, as a real backend would.

- ``lookup_customer`` (customer_support_router.json): C-1001 is premium, C-2002 standard, C-3003
  standard but a high spender; any other number is unknown.
- ``price_order`` (coffee_order.yaml): a menu, size and plant-milk surcharges, in euros.
- ``check_availability``, ``place_booking`` and ``release_table`` (restaurant_booking.yaml): every Friday at 20:00
  is full; a held table is released when the read-back's hold runs out.
- ``list_slots`` (appointment_scheduler.json): the free slots per service.
"""

from __future__ import annotations

import datetime
import hashlib

from llm_fsm.actions import ActionRegistry

registry = ActionRegistry()

# --- the CRM: customer_support_router.json ---------------------------------------------------------

CUSTOMERS: dict[str, dict[str, str | float]] = {
    "C-1001": {"tier": "premium", "lifetime_value": 12000.0},
    "C-2002": {"tier": "standard", "lifetime_value": 300.0},
    "C-3003": {"tier": "standard", "lifetime_value": 8000.0},
}


@registry.register("lookup_customer")
def lookup_customer(customer_id: str) -> dict[str, str | float]:
    """The customer's tier and lifetime value; an unknown number raises, so ``on_error`` routes it."""
    try:
        return dict(CUSTOMERS[customer_id])
    except KeyError:
        raise LookupError(f"no customer {customer_id}") from None


# --- the till: coffee_order.yaml --------------------------------------------------------------------

MENU = {
    "espresso": 2.20,
    "americano": 2.60,
    "latte": 3.10,
    "cappuccino": 3.10,
    "flat_white": 3.30,
    "mocha": 3.50,
    "tea": 2.00,
}
SIZES = {"small": 0.0, "medium": 0.40, "large": 0.80}
PLANT_MILKS = {"oat", "soy", "almond"}
PLANT_MILK_SURCHARGE = 0.50


@registry.register("price_order")
def price_order(drink: str, size: str, milk: str | None = None) -> dict[str, float]:
    """The price in euros: the drink, its size, and 50 cents for a plant milk.

    ``take_order`` calls it without a milk (drinks without milk never get one), ``choose_milk`` with one.
    """
    if drink not in MENU or size not in SIZES:
        raise ValueError(f"not on the menu: {size} {drink}")
    price = MENU[drink] + SIZES[size] + (PLANT_MILK_SURCHARGE if milk in PLANT_MILKS else 0.0)
    return {"price": round(price, 2)}


# --- the restaurant's calendar: restaurant_booking.yaml ---------------------------------------------

FULLY_BOOKED = {(4, "20:00")}
"""(weekday, time) pairs without a free table: Monday is 0, so every Friday at 20:00 is full."""


def _free(date: str, time: str) -> bool:
    return (datetime.date.fromisoformat(date).weekday(), time) not in FULLY_BOOKED


@registry.register("check_availability")
def check_availability(date: str, time: str, party_size: int) -> dict[str, bool]:
    """Whether a table for ``party_size`` is free then (parties over eight go to the events team first)."""
    return {"available": party_size <= 8 and _free(date, time)}


@registry.register("release_table")
def release_table(date: str, time: str, party_size: int) -> dict[str, bool]:
    """Give back the table held for a read-back the guest never confirmed (a timer calls it when the hold runs out)."""
    del date, time, party_size  # the demo calendar holds nothing: a real one frees the slot here
    return {"released": True}


@registry.register("place_booking")
def place_booking(date: str, time: str, party_size: int, name: str) -> dict[str, str]:
    """Book the table; the reference is derived from the booking, so the same booking gets the same one."""
    if not check_availability(date, time, party_size)["available"]:
        raise RuntimeError(f"no table for {party_size} on {date} at {time}")
    digest = hashlib.sha256(f"{date} {time} {party_size} {name}".encode()).hexdigest()
    return {"booking_ref": f"R-{int(digest[:8], 16) % 10000:04d}"}


# --- the clinic's calendar: appointment_scheduler.json ----------------------------------------------

FREE_SLOTS = {
    "consultation": ["2027-06-14 09:00", "2027-06-14 14:30", "2027-06-15 11:00"],
    "follow_up": ["2027-06-14 10:00", "2027-06-16 16:00"],
    "check_up": ["2027-06-14 09:00", "2027-06-14 14:30", "2027-06-15 11:00"],
}


@registry.register("list_slots")
def list_slots(service: str) -> dict[str, list[str]]:
    """The free slots for a service, as ``YYYY-MM-DD HH:MM`` (the format the definition declares)."""
    if service not in FREE_SLOTS:
        raise LookupError(f"the clinic offers no {service}")
    return {"slots": list(FREE_SLOTS[service])}
