"""Checks of the retrieval a definition declares (FSM075-FSM077): a budget that holds nothing, a failure sent to
a state that does not exist, and (with the names the application registered, ``lint_document(retrievers=...)``)
a retriever nobody registered.

Retrieval never fails a turn by itself (``on_error: continue`` answers without snippets), so each of these is a
state that silently answers without the documents it was written to use: only lint can show it before a user
asks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from llm_fsm.definition._documents import Path
from llm_fsm.definition._retrieval import ON_ERROR_CONTINUE
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import _did_you_mean
from llm_fsm.lint._typos import _Typos


def _declarations(run: LintRun) -> Iterator[tuple[Path, Mapping[str, Any]]]:
    """(path, declaration) of the definition's ``retrieve`` and of every state's."""
    top = run.data.get("retrieve")
    if isinstance(top, Mapping):
        yield ("retrieve",), top
    for key, state in run.states():
        declared = state.get("retrieve")
        if isinstance(declared, Mapping):
            yield ("states", key, "retrieve"), declared


def retrieval_error_moves(run: LintRun) -> Iterator[tuple[str, str]]:
    """(state, the state its failed retrieval moves to) for each state that retrieves with ``on_error`` naming a
    state: its own ``retrieve``, else the definition's."""
    top = run.data.get("retrieve")
    for key, state in run.states():
        declared = state.get("retrieve", top)
        target = declared.get("on_error") if isinstance(declared, Mapping) else None
        if isinstance(target, str) and target not in (ON_ERROR_CONTINUE, key):
            yield key, target


def budget(run: LintRun) -> None:
    """FSM075: ``max_chars: 0``, a retrieval whose snippets never reach the prompt."""
    for parts, declared in _declarations(run):
        if declared.get("max_chars") == 0:
            run.add(
                "retrieve-budget-empty",
                (*parts, "max_chars"),
                f"retriever {declared.get('retriever')!r} is named, but max_chars is 0: the engine asks nothing and "
                "no snippet reaches the prompt, so the model answers without the documents",
                "give it a budget (characters of snippet text the prompt may hold), or remove the retrieve",
            )


def on_error(run: LintRun) -> None:
    """FSM076: ``on_error`` naming neither ``continue`` nor a declared state."""
    if run.partial:  # the state it names may be in the part not validated
        return
    states = run.data.get("states")
    declared_states = [str(k) for k in states] if isinstance(states, Mapping) else []
    typos = functools.cache(lambda: _Typos(declared_states))
    for parts, declared in _declarations(run):
        target = declared.get("on_error", ON_ERROR_CONTINUE)
        if not isinstance(target, str) or target == ON_ERROR_CONTINUE or target in declared_states:
            continue
        run.add(
            "retrieve-error-state-undeclared",
            (*parts, "on_error"),
            f"on_error of retriever {declared.get('retriever')!r} names {target!r}, which is not a declared state "
            "(nor continue): a failing retrieval cannot move the conversation there",
            functools.partial(_state_hint, target, typos),
        )


def _state_hint(target: str, typos: Callable[[], _Typos]) -> str:
    close = typos().near(target)
    return f"did you mean {close!r}?" if close is not None else "name a declared state, or use continue"


def registered(run: LintRun) -> None:
    """FSM077: a retriever name the application did not register (only when the registered names are given)."""
    names = run.retrievers
    if names is None:
        return
    for parts, declared in _declarations(run):
        name = declared.get("retriever")
        if not isinstance(name, str) or name in names:
            continue
        run.add(
            "retriever-not-registered",
            (*parts, "retriever"),
            f"no retriever is registered under {name!r}; a conversation here would answer without the documents "
            "(or go to on_error's state)",
            functools.partial(_register_hint, name, names),
        )


def _register_hint(name: str, names: frozenset[str]) -> str:
    return _did_you_mean(name, sorted(names)) or f"register it: FSMManager(retrievers={{{name!r}: retriever}})"
