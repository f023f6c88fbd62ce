"""``escape_nul``: text for a column that cannot hold U+0000 (PostgreSQL's ``text``), and back, losslessly."""

from __future__ import annotations

import pytest

from llm_fsm.stores.codec import NUL_MARK, escape_nul, unescape_nul

VALUES = [
    "",
    "plain reply",
    "\x00",
    "a\x00b\x00",
    NUL_MARK,
    NUL_MARK + "x",
    NUL_MARK + '"x"',
    NUL_MARK + "\x00",
    'quotes " and \\ and ünïcode ✈',
]


@pytest.mark.parametrize("value", VALUES)
def test_every_value_round_trips(value: str) -> None:
    assert unescape_nul(escape_nul(value)) == value


@pytest.mark.parametrize("value", VALUES)
def test_no_escaped_value_holds_nul(value: str) -> None:
    assert "\x00" not in escape_nul(value)


def test_a_value_without_nul_or_mark_is_stored_as_it_is() -> None:
    assert escape_nul("hi there") == "hi there"


@pytest.mark.parametrize(
    "text", [NUL_MARK, NUL_MARK + "x", NUL_MARK + '"x"', NUL_MARK + "[1]", NUL_MARK + '"a\\u0041"']
)
def test_text_escape_nul_would_not_write_is_read_as_it_is(text: str) -> None:
    assert unescape_nul(text) == text
