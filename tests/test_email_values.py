"""Email addresses read with email-validator: one stored form, a refusal that says what is wrong, a finder.

A key declared ``format: email`` stores the address email-validator normalises (domain lower-cased and read as
IDNA, so "Ada@Example.COM" and "ada@ＥＸＡＭＰＬＥ.com" are stored alike) and refuses one it does not take saying
why ("An email address cannot have two periods in a row"). Never a DNS query: the check is of the syntax only.
Without the library (a core install) the regular expression decides, as before.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition import FSMDefinition
from llm_fsm.definition._email import emails_in
from llm_fsm.definition._keys import KeyDeclaration
from llm_fsm.engine._records import ContextChange
from llm_fsm.engine._values import check, normalise
from llm_fsm.llm.fakes import FunctionLLM
from llm_fsm.manager import FSMManager

EMAIL = KeyDeclaration(format="email")


def without_email_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a core install: ``import email_validator`` raises ImportError (the library stays installed)."""
    monkeypatch.setitem(sys.modules, "email_validator", None)


def turn(written: Any, message: str) -> ContextChange:
    """The change to ``email`` of one turn in which the user says ``message`` and the model writes ``written``."""
    definition = FSMDefinition.model_validate(
        {
            "name": "signup",
            "description": "d",
            "initial_state": "ask",
            "context_keys": {"email": {"format": "email"}},
            "states": {
                "ask": {
                    "id": "ask",
                    "description": "ask",
                    "purpose": "collect an email address",
                    "required_context_keys": ["email"],
                    "transitions": [{"target_state": "ask", "description": "again"}],
                }
            },
        }
    )

    def model(request: Any) -> dict[str, Any]:
        update = {"email": written} if request.purpose == "turn" else {}
        return {"transition": {"target_state": "ask", "context_update": update}, "message": "ok"}

    manager = FSMManager(fsm_loader=lambda _id: definition, llm_interface=FunctionLLM(model))
    cid, _ = manager.start_conversation("signup")
    manager.process_message(cid, message)
    (change,) = [c for c in manager.explain(cid).context_changes if c.key == "email"]
    return change


# --- a conversation ----------------------------------------------------------------------------------


def test_an_address_the_user_types_in_capitals_is_stored_normalised() -> None:
    change = turn("Ada.Lovelace@EXAMPLE.com", "it's Ada.Lovelace@EXAMPLE.com")
    assert change.applied, change.reason
    assert change.value == "Ada.Lovelace@example.com"


def test_an_address_in_full_width_letters_is_stored_in_its_plain_form() -> None:
    change = turn("ada@ｅｘａｍｐｌｅ.com", "ada@ｅｘａｍｐｌｅ.com")
    assert change.applied, change.reason
    assert change.value == "ada@example.com"


def test_an_address_that_is_not_one_is_refused_in_the_conversation_saying_why() -> None:
    change = turn("ada@example..com", "ada@example..com")
    assert not change.applied and change.rule == "format"
    assert change.reason == "'ada@example..com' is not an email address: it cannot have two periods in a row"


# --- one stored form ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        (" <Ada@Example.COM> ", "Ada@example.com"),
        ("mailto:ada@example.com", "ada@example.com"),
        ("ada@BÜCHER.example", "ada@bücher.example"),
        ("ada@xn--bcher-kva.example", "ada@bücher.example"),
        ("ada@ｅｘａｍｐｌｅ.com", "ada@example.com"),
    ],
)
def test_each_written_form_of_an_address_is_stored_in_one_form(written: str, stored: str) -> None:
    assert normalise(EMAIL, written) == stored
    assert check(EMAIL, stored) is None


@pytest.mark.parametrize(
    ("written", "why"),
    [
        ("ada@example..com", "it cannot have two periods in a row"),
        ("ada@example", "the part after the @-sign is not valid. It should have a period"),
        ("ada", "it must have an @-sign"),
        ("ada lovelace@example.com", "it contains invalid characters before the @-sign: SPACE"),
        ("ada@exam_ple.com", "the part after the @-sign contains invalid characters: '_'"),
    ],
)
def test_an_address_that_is_not_one_is_refused_saying_what_is_wrong(written: str, why: str) -> None:
    refusal = check(EMAIL, normalise(EMAIL, written))
    assert refusal is not None and refusal.rule == "format"
    assert refusal.reason == f"{written!r} is not an email address: {why}"


def test_an_address_of_a_domain_nobody_resolves_is_taken_without_asking_dns() -> None:
    assert check(EMAIL, normalise(EMAIL, "ada@no-such-domain-anywhere-4f2a.com")) is None


def test_a_masked_addresss_refusal_shows_none_of_it() -> None:
    refusal = check(KeyDeclaration(format="email", sensitive=True), "ada@exam_ple.com", shown="***")
    assert refusal is not None and refusal.reason == "*** is not an email address"


def test_without_email_validator_the_regular_expression_decides_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    without_email_validator(monkeypatch)
    assert normalise(EMAIL, " <Ada@Example.COM> ") == "Ada@example.com"
    assert check(EMAIL, "Ada@example.com") is None
    refusal = check(EMAIL, normalise(EMAIL, "ada@ｅｘａｍｐｌｅ.com"))
    assert refusal is not None and refusal.reason == "'ada@ｅｘａｍｐｌｅ.com' is not an email address"
    refusal = check(EMAIL, "ada@example..com")
    assert refusal is not None and refusal.reason == "'ada@example..com' is not an email address"


def test_importing_the_package_and_the_engine_does_not_import_email_validator() -> None:
    code = "import sys, llm_fsm, llm_fsm.engine._values; print('email_validator' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


# --- the finder ---------------------------------------------------------------------------------------


def test_emails_in_finds_every_address_with_its_stored_value_and_span() -> None:
    text = "Write to Ada@Example.COM, or <grace@navy.example>; mailto:x@ｅｘａｍｐｌｅ.com."
    found = emails_in(text)
    assert [f.value for f in found] == ["Ada@example.com", "grace@navy.example", "x@example.com"]
    assert [f.text for f in found] == ["Ada@Example.COM", "grace@navy.example", "x@ｅｘａｍｐｌｅ.com"]
    assert all(text[f.start : f.end] == f.text for f in found)


def test_emails_in_finds_no_address_where_there_is_none() -> None:
    assert emails_in("meet me @ the station at 5, or ada@example..com, or @ada") == ()


def test_emails_in_without_email_validator_finds_the_addresses_the_regular_expression_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    without_email_validator(monkeypatch)
    assert [f.value for f in emails_in("to Ada@Example.COM.")] == ["Ada@example.com"]


# --- what is stored is stored again unchanged -------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.emails())
def test_every_address_is_stored_in_a_form_that_normalises_to_itself(address: str) -> None:
    stored = normalise(EMAIL, address)
    if check(EMAIL, stored) is None:
        assert normalise(EMAIL, stored) == stored
        assert check(EMAIL, stored) is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aAbZ09._-+@<>: ÜｅﬁİK", max_size=30), st.booleans())
def test_every_stored_email_value_normalises_to_itself_and_passes(written: str, library: bool) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        if not library:
            without_email_validator(monkeypatch)
        stored = normalise(EMAIL, written)
        if check(EMAIL, stored) is None:
            assert normalise(EMAIL, stored) == stored
            assert check(EMAIL, stored) is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.emails(), st.sampled_from(["write", "to", ",", ".", "<", ">", "@", "'", "mailto:"]))))
def test_every_address_emails_in_finds_is_stored_as_its_value_from_its_span(parts: list[str]) -> None:
    text = " ".join(parts)
    for found in emails_in(text):
        assert text[found.start : found.end] == found.text
        assert normalise(EMAIL, found.text) == found.value
        assert check(EMAIL, found.value) is None
