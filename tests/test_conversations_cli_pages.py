"""``llm-fsm conversations --limit N [--cursor C]``: a page of stored conversations and the cursor of the next."""

from __future__ import annotations

import time
from pathlib import Path

from click.testing import CliRunner

from llm_fsm.cli import main
from llm_fsm.engine import FSMInstance
from llm_fsm.stores import open_store


def _stored(tmp_path: Path, count: int) -> tuple[str, list[str]]:
    """A SQLite store holding ``count`` of alice's conversations a second apart; its URL and their ids newest first."""
    url = f"sqlite:///{tmp_path}/conversations.db"  # an absolute path: four slashes
    store = open_store(url)
    now = time.time()
    ids = []
    for n in range(count):
        instance = FSMInstance(fsm_id="f", current_state="s", user_id="alice", updated_at=now - 100 + n)
        store.save(instance, expected_version=None)
        ids.append(instance.conversation_id)
    store.close()
    return url, ids[::-1]


def _listed(output: str) -> list[str]:
    return [line.split()[0] for line in output.splitlines()[1:] if not line.startswith("next page")]


def test_a_limit_lists_the_newest_and_prints_the_next_cursor(tmp_path: Path) -> None:
    url, newest_first = _stored(tmp_path, 3)
    result = CliRunner().invoke(main, ["conversations", "--store", url, "--user", "alice", "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert _listed(result.stdout) == newest_first[:2]
    assert "--cursor " in result.stderr


def test_the_cursor_printed_lists_the_next_page_which_is_the_last(tmp_path: Path) -> None:
    url, newest_first = _stored(tmp_path, 3)
    first = CliRunner().invoke(main, ["conversations", "--store", url, "--limit", "2"])
    cursor = first.stderr.split("--cursor ")[1].split()[0]
    rest = CliRunner().invoke(main, ["conversations", "--store", url, "--limit", "2", "--cursor", cursor])
    assert rest.exit_code == 0, rest.output
    assert _listed(rest.stdout) == newest_first[2:] and "--cursor" not in rest.stderr


def test_a_cursor_no_listing_gave_is_a_usage_error(tmp_path: Path) -> None:
    url, _ = _stored(tmp_path, 1)
    result = CliRunner().invoke(main, ["conversations", "--store", url, "--cursor", "garbage"])
    assert result.exit_code == 2 and "cursor" in result.output


def test_a_store_holding_none_says_so_naming_the_store(tmp_path: Path) -> None:
    """A wrong --store must not look like an empty listing that says nothing."""
    url, _ = _stored(tmp_path, 0)
    result = CliRunner().invoke(main, ["conversations", "--store", url])
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and f"no conversations in {url}" in result.stderr
