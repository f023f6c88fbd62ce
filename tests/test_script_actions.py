"""Conversation scripts stub the actions a definition calls, assert how they were called, and count them.

The definition (tests/data/actions/orders.yaml) looks an order up when its id is collected and routes on
the status the backend returned.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fsm.cli import main
from llm_fsm.errors import ScriptError
from llm_fsm.scripting._scripts import load_script
from llm_fsm.scripting._suite import run_suite

DATA = Path(__file__).parent / "data" / "actions"

GIVE_ID = "model: {context_update: {order_id: A-17}, message: ok}"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copy(DATA / "orders.yaml", tmp_path / "orders.yaml")
    return tmp_path


def script(folder: Path, body: str) -> Path:
    path = folder / "orders.conv.yaml"
    path.write_text("definition: orders.yaml\n" + textwrap.dedent(body), encoding="utf-8")
    return path


def failures(path: Path) -> list[str]:
    report = run_suite([path])
    assert not report.errors, report.errors
    return [f for r in report.results for f in r.failures + [x for t in r.turns for x in t.failures]]


def test_a_stub_answers_the_action_and_the_turn_routes_on_it(folder: Path) -> None:
    path = script(
        folder,
        f"""
        actions: {{lookup_order: {{status: shipped}}}}
        turns:
          - user: A-17
            {GIVE_ID}
            expect: {{state: shipped, context: {{order.status: shipped}}}}
        """,
    )
    assert failures(path) == []


def test_called_checks_the_inputs_the_action_received(folder: Path) -> None:
    path = script(
        folder,
        f"""
        actions: {{lookup_order: {{status: shipped}}}}
        turns:
          - user: A-17
            {GIVE_ID}
            expect: {{called: {{lookup_order: {{order_id: B-1}}}}}}
        """,
    )
    assert failures(path) == ['called.lookup_order.order_id: expected "B-1", got "A-17"']


def test_called_takes_matchers(folder: Path) -> None:
    path = script(
        folder,
        f"""
        actions: {{lookup_order: {{status: shipped}}}}
        turns:
          - user: A-17
            {GIVE_ID}
            expect: {{called: {{lookup_order: {{order_id: {{regex: "^A-"}}}}}}}}
        """,
    )
    assert failures(path) == []


def test_not_called_fails_when_the_action_ran(folder: Path) -> None:
    path = script(
        folder,
        f"""
        actions: {{lookup_order: {{status: shipped}}}}
        turns:
          - user: A-17
            {GIVE_ID}
            expect: {{not_called: [lookup_order]}}
        """,
    )
    assert failures(path) == ["not_called: lookup_order was called"]


def test_a_raising_stub_makes_the_action_fail_and_on_error_apply(folder: Path) -> None:
    path = script(
        folder,
        f"""
        actions: {{lookup_order: {{raise: backend down}}}}
        turns:
          - user: A-17
            {GIVE_ID}
            expect: {{state: support, verdict: action_error}}
        """,
    )
    assert failures(path) == []


def test_a_turn_can_replace_a_stub_from_that_turn_on(folder: Path) -> None:
    path = script(
        folder,
        """
        actions: {lookup_order: {status: pending}}
        turns:
          - user: A-17
            model: {context_update: {order_id: A-17}, message: ok}
            expect: {state: ask}
          - user: try B-2
            actions: {lookup_order: {status: shipped}}
            model: {context_update: {order_id: B-2}, message: ok}
            expect: {state: shipped, called: {lookup_order: {order_id: B-2}}}
        """,
    )
    assert failures(path) == []


def test_an_action_neither_stubbed_nor_registered_fails_the_conversation_and_says_how_to_stub_it(
    folder: Path,
) -> None:
    path = script(folder, f"turns:\n  - user: A-17\n    {GIVE_ID}\n")
    [failure] = failures(path)
    assert "lookup_order" in failure and "actions: {name:" in failure


def test_a_stub_is_a_mapping_or_a_raise_with_only_a_message(folder: Path) -> None:
    for stub in ("shipped", "{raise: down, status: x}", "{raise: 5}"):
        path = script(folder, f"actions: {{lookup_order: {stub}}}\nturns:\n  - user: x\n")
        with pytest.raises(ScriptError):
            load_script(path)


def test_coverage_counts_the_actions_called(folder: Path) -> None:
    path = script(
        folder,
        f"""
        actions: {{lookup_order: {{status: shipped}}}}
        turns:
          - user: A-17
            {GIVE_ID}
        """,
    )
    [coverage] = run_suite([path]).coverage.definitions.values()
    assert [(a.call, a.calls) for a in coverage.actions] == [("lookup_order", 1)]


def test_coverage_lists_an_action_never_called(folder: Path) -> None:
    path = script(folder, "turns:\n  - user: hello\n    model: {message: hi}\n")
    report = run_suite([path])
    assert "ask: lookup_order  (action never called)" in report.coverage.table()


def test_llm_fsm_test_takes_the_applications_registry_with_actions(folder: Path) -> None:
    script(folder, f"turns:\n  - user: A-17\n    {GIVE_ID}\n    expect: {{state: shipped}}\n")
    result = CliRunner().invoke(main, ["test", str(folder), "--actions", f"{DATA / 'registry.py'}:registry"])
    assert result.exit_code == 0, result.output


def test_an_actions_option_naming_no_registry_exits_2_with_a_message(folder: Path) -> None:
    script(folder, f"turns:\n  - user: A-17\n    {GIVE_ID}\n")
    for spec in (f"{DATA / 'registry.py'}:not_a_registry", f"{DATA / 'missing.py'}:registry", "no_colon"):
        result = CliRunner().invoke(main, ["test", str(folder), "--actions", spec])
        assert result.exit_code == 2, (spec, result.output)
        assert "--actions" in result.output and "Traceback" not in result.output


def test_llm_fsm_run_calls_the_registrys_actions(folder: Path) -> None:
    replies = folder / "replies.yaml"
    replies.write_text(
        "- {message: hi}\n- {context_update: {order_id: A-17}, message: ok}\n- {message: shipped!}\n",
        encoding="utf-8",
    )
    messages = folder / "in.txt"
    messages.write_text("A-17\n", encoding="utf-8")
    result = CliRunner().invoke(
        main,
        [
            "run",
            str(folder / "orders.yaml"),
            "--model",
            f"scripted:{replies}",
            "--store",
            "memory://",
            "--input",
            str(messages),
            "--actions",
            f"{DATA / 'registry.py'}:registry",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "shipped" in result.output


def test_llm_fsm_run_shows_each_action_the_turn_ran(folder: Path) -> None:
    replies = folder / "replies.yaml"
    replies.write_text("- {message: hi}\n- {context_update: {order_id: B-9}, message: ok}\n", encoding="utf-8")
    messages = folder / "in.txt"
    messages.write_text("B-9\n", encoding="utf-8")
    result = CliRunner().invoke(
        main,
        ["run", str(folder / "orders.yaml"), "--model", f"scripted:{replies}", "--store", "memory://"]
        + ["--input", str(messages), "--actions", f"{DATA / 'registry.py'}:registry"],
    )
    assert "action lookup_order (collected ask): ok" in result.output


def test_a_handoff_stub_gives_the_conversation_to_a_person(folder: Path) -> None:
    path = script(
        folder,
        f"""
        actions: {{lookup_order: {{handoff: refund over the limit}}}}
        turns:
          - user: A-17
            {GIVE_ID}
            expect: {{state: ask, verdict: handed_off, mode: human}}
        """,
    )
    assert failures(path) == []


def test_a_script_sends_content_parts_and_metadata(folder: Path) -> None:
    path = script(
        folder,
        """
        actions: {lookup_order: {status: shipped}}
        turns:
          - user:
              - {type: text, text: "my order is A-17, here is the label"}
              - {type: image_url, image_url: {url: "https://example.com/label.png"}}
            metadata: {channel: whatsapp}
            model: {context_update: {order_id: A-17}, message: ok}
            expect: {state: shipped, called: {lookup_order: {order_id: A-17}}}
        """,
    )
    report = run_suite([path])
    assert [f for r in report.results for t in r.turns for f in t.failures] == []


def test_a_script_message_of_broken_parts_fails_its_turn_with_a_typed_error(folder: Path) -> None:
    path = script(
        folder,
        """
        actions: {lookup_order: {status: shipped}}
        turns:
          - user: [{type: video, url: x}]
            expect: {error: InvalidMessageError}
        """,
    )
    assert failures(path) == []


def test_llm_fsm_test_shows_a_message_of_parts_as_its_text_and_image_count(folder: Path) -> None:
    script(
        folder,
        """
        actions: {lookup_order: {status: shipped}}
        turns:
          - user: [{type: text, text: label attached}, {type: image_url, image_url: {url: "https://e.com/l.png"}}]
            model: {context_update: {order_id: A-17}, message: ok}
        """,
    )
    result = CliRunner().invoke(main, ["test", str(folder), "-v"])
    assert "user: label attached [1 image]" in result.output, result.output
