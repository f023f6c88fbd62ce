"""An ActionRegistry for the CLI tests (``--actions tests/data/actions/registry.py:registry``)."""

from llm_fsm.actions import ActionRegistry

registry = ActionRegistry()


@registry.register("lookup_order")
def lookup_order(order_id: str) -> dict[str, str]:
    return {"status": "shipped" if order_id.startswith("A") else "pending"}


not_a_registry = 42
