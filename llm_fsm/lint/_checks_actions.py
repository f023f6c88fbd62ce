"""Checks of the actions states declare (FSM033-FSM040): where their inputs come from, who reads their outputs,
where a failure goes, and (with the application's registry, ``fsm-lint --actions``) whether the functions exist
and take the declared inputs.

An action runs only once every input has a value, so an input nothing provides is an action that never runs;
its outputs are application writes, so a key the model also collects is one the model can overwrite. These are
the mistakes a file can show before any backend is called. Keys are matched by the two-way dot-path rule of
FSM014 (``KeyCover``): writing ``customer`` provides ``customer.tier``, and reading ``customer`` reads what an
action writes under it.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from llm_fsm.definition._actions import ON_ERROR_FAIL, ON_ERROR_HANDOFF, mcp_tool_of
from llm_fsm.definition._documents import Path
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import KeyCover, _did_you_mean, _prefixes, _strings
from llm_fsm.lint._typos import _Typos

#: the parameter through which the registry hands a function its ``ActionCall`` (llm_fsm.actions)
_CALL_PARAMETER = "call"
#: state fields whose text may tell the model to use a key ("tell the user their order.eta")
_TEXT_FIELDS = ("description", "purpose", "instructions", "knowledge")
#: a dot path as prose spells it: "their order.eta." names ``order.eta``
_WORDS = re.compile(r"[\w.]+")


def _keys(run: LintRun, field_name: str) -> list[str]:
    return [key for _, key, _ in run.action_mapping(field_name)]


def _supplied(run: LintRun) -> list[str]:
    """Keys that can have a value while the conversation runs: collected by a state, provided by the application
    (listed, protected or declared ``writable_by: application``), written by an action, copied back by a sub-flow,
    or required by a condition (whether that requirement is itself met is FSM015's finding, not this one's)."""
    keys = [k for _, state in run.states() for k in _strings(state.get("required_context_keys"))]
    keys += _strings(run.data.get("application_context_keys"))
    keys += _strings(run.data.get("protected_context_keys"))
    keys += run.application_declared()
    keys += _keys(run, "outputs")
    for _, flow in run.flows():
        outputs = flow.get("outputs")
        if isinstance(outputs, Mapping):
            keys += [k for k in outputs if isinstance(k, str)]
    for _, condition in run.conditions():
        keys += _strings(condition.get("requires_context_keys"))
    return keys


def inputs_provided(run: LintRun) -> None:
    """FSM033: an action input whose key nothing ever sets, so the action waits for it for ever."""
    if run.partial:  # a key may be collected in the part not validated
        return
    supplied = _supplied(run)
    cover = KeyCover(supplied)
    typos = functools.cache(lambda: _Typos(sorted(set(supplied))))  # built for the first finding that needs it
    for where, key, argument in run.action_mapping("inputs"):
        if cover.covers(key):
            continue
        run.add(
            "action-input-never-provided",
            where,
            f"input {argument!r} reads {key!r}, which no state collects, no action writes and the application "
            "does not provide: an action runs only once every input has a value, so this one never does",
            functools.partial(_input_hint, key, typos),
        )


def _input_hint(key: str, typos: Callable[[], _Typos]) -> str:
    close = typos().near(key)
    if close is not None:
        return f"did you mean {close!r}?"
    return (
        f"add {key!r} to a state's required_context_keys, or list it in application_context_keys if the "
        "application gives it (initial_context)"
    )


def _named_paths(run: LintRun) -> set[str]:
    """Every dot path the prose the model is given names (persona, knowledge, each state's description, purpose
    and instructions), as whole words: one pass over the text, however many outputs are judged."""
    parts = [v for v in (run.data.get("persona"), run.data.get("knowledge")) if isinstance(v, str)]
    for _, state in run.states():
        parts.extend(v for field_name in _TEXT_FIELDS if isinstance(v := state.get(field_name), str))
    return {word.strip(".") for text in parts for word in _WORDS.findall(text)}


def outputs_read(run: LintRun) -> None:
    """FSM034 (info): an action output nothing in the file reads. Runs after the logic check (``run.reads``)."""
    if run.partial:
        return
    readers: list[str] = [key for _, key in run.reads]
    for _, condition in run.conditions():
        readers += _strings(condition.get("requires_context_keys"))
    readers += _keys(run, "inputs")
    readers += run.declared_names()  # a declared key is one the application means to use
    for _, flow in run.flows():
        inputs = flow.get("inputs")
        if isinstance(inputs, Mapping):
            readers += [v for v in inputs.values() if isinstance(v, str)]
    for _, state in run.states():
        confirmation = state.get("confirmation")
        if isinstance(confirmation, Mapping):
            readers += _strings(confirmation.get("keys"))
    cover = KeyCover(readers)
    named: set[str] | None = None
    for where, key, field in run.action_mapping("outputs"):
        if cover.covers(key):
            continue
        if named is None:
            named = _named_paths(run)
        if key in named:
            continue
        run.add(
            "action-output-never-read",
            where,
            f"the result's {field!r} is written to {key!r}, which no condition reads, no action or sub-flow takes, "
            "no confirmation reads back, no declaration names and no state's text mentions",
            f"if the application or the model uses it, declare {key!r} in context_keys (or name it in the purpose "
            "of the state that tells the user); otherwise drop the output",
        )


def _state_keys(run: LintRun) -> list[str]:
    states = run.data.get("states")
    return [str(k) for k in states] if isinstance(states, Mapping) else []


def on_error(run: LintRun) -> None:
    """FSM035: ``on_error`` naming an undeclared state; FSM036: an enter action sending a failure back into its
    own state (a collected or exit action may: the conversation then stays, and a collected one runs again when
    an input changes)."""
    if run.partial:  # the state it names may be in the part not validated
        return
    declared = _state_keys(run)
    declared_set = set(declared)
    typos = functools.cache(lambda: _Typos(declared))
    for parts, state_key, action in run.actions():
        target = action.get("on_error", ON_ERROR_FAIL)
        if not isinstance(target, str) or target in (ON_ERROR_FAIL, ON_ERROR_HANDOFF):
            continue
        where = (*parts, "on_error")
        if target not in declared_set:
            run.add(
                "action-error-state-undeclared",
                where,
                f"on_error of action {action.get('call')!r} names {target!r}, which is not a declared state "
                "(nor fail or handoff): a failure of the action would fail the turn instead",
                functools.partial(_state_hint, target, typos),
            )
        elif target == state_key and action.get("when") == "enter":
            run.add(
                "action-error-reenters-state",
                where,
                f"on_error of enter action {action.get('call')!r} names its own state {state_key!r}: entering it "
                "again runs the action again, which fails again (a second failure in a turn raises ActionError), "
                "so this is on_error: fail",
                "send a failure to a state that handles it (apologise, hand over, offer another way), or say "
                "on_error: fail or handoff",
            )


def _state_hint(target: str, typos: Callable[[], _Typos]) -> str:
    close = typos().near(target)
    return f"did you mean {close!r}?" if close is not None else "name a declared state, or use fail or handoff"


def _application_only(run: LintRun) -> set[str]:
    return {*_strings(run.data.get("protected_context_keys")), *run.application_declared()}


def _at_or_below(key: str, keys: set[str]) -> bool:
    return key in keys or any(p in keys for p in _prefixes(key))


def outputs_not_collected(run: LintRun) -> None:
    """FSM037: an action output the model may also write, because a state collects it (or an object around it,
    or a field of it) and nothing makes it application-only."""
    if run.partial:
        return
    collected = KeyCover(k for _, state in run.states() for k in _strings(state.get("required_context_keys")))
    only = _application_only(run)
    for where, key, _ in run.action_mapping("outputs"):
        if not collected.covers(key) or _at_or_below(key, only) or key.startswith("_"):
            continue
        run.add(
            "action-output-collected-by-model",
            where,
            f"an action writes {key!r}, which a state also asks the model to collect: a later reply can overwrite "
            "the backend's value",
            f"add {key!r} to protected_context_keys (or declare it writable_by: application), or stop collecting it",
        )


def never_run(run: LintRun) -> None:
    """FSM038: an ``exit`` action of a terminal state (a conversation that reaches it never leaves it)."""
    states = dict(run.states())
    for parts, state_key, action in run.actions():
        if action.get("when") != "exit" or states[state_key].get("transitions") not in (None, []):
            continue
        run.add(
            "action-never-runs",
            (*parts, "when"),
            f"action {action.get('call')!r} runs on exit, but {state_key!r} is terminal: a conversation never "
            "leaves it, so the action never runs",
            "use when: enter to run it as the conversation ends",
        )


# --- with the application's registry (fsm-lint --actions) ------------------------------------------------------


def registered(run: LintRun) -> None:
    """FSM039/FSM040: each called name is registered, and its function can be called with the declared inputs."""
    registry = run.registry
    if registry is None:
        return
    signatures: dict[str, Mapping[str, inspect.Parameter] | None] = {}  # inspected once per name
    for parts, _, action in run.actions():
        name = action.get("call")
        if not isinstance(name, str):
            continue
        if run.mcp_tools is not None and mcp_tool_of(name) is not None:
            continue  # a tool of an MCP server: checked against what the server lists (_checks_mcp)
        function = registry.get(name)
        if function is None:
            run.add(
                "action-not-registered",
                (*parts, "call"),
                f"no function is registered under {name!r} in the registry given with --actions; a conversation "
                "reaching this state would fail",
                functools.partial(_register_hint, name, registry),
            )
            continue
        inputs = action.get("inputs")
        declared = [k for k in inputs if isinstance(k, str)] if isinstance(inputs, Mapping) else []
        if name not in signatures:
            signatures[name] = _parameters(function)
        for where, message in _signature_problems(signatures[name], name, declared, parts):
            run.add(
                "action-signature-mismatch",
                where,
                message,
                "make the declared inputs and the function's parameters agree (a **kwargs parameter takes any input)",
            )


def _register_hint(name: str, registry: Mapping[str, Any]) -> str:
    tool = mcp_tool_of(name)
    if tool is not None:
        return f"a tool of an MCP server: give --mcp CONFIG, a file whose mcpServers has {tool[0]!r}"
    return _did_you_mean(name, list(registry)) or f"register it: manager.actions.register({name!r}, function)"


def _parameters(function: Callable[..., Any]) -> Mapping[str, inspect.Parameter] | None:
    try:
        return inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature: nothing to compare with
        return None


def _signature_problems(
    parameters: Mapping[str, inspect.Parameter] | None, name: str, declared: Iterable[str], parts: Path
) -> list[tuple[Path, str]]:
    """What calling the function with ``**inputs`` (plus ``call=`` when it takes one) would refuse, located."""
    if parameters is None:
        return []
    by_keyword = {
        p.name
        for p in parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    any_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    takes_call = _CALL_PARAMETER in parameters
    declared = list(declared)
    problems: list[tuple[Path, str]] = []
    for argument in declared:
        where: Path = (*parts, "inputs", argument)
        if argument == _CALL_PARAMETER and takes_call:
            problems.append(
                (
                    where,
                    f"input {argument!r}: {name!r} takes a parameter named call, which receives the ActionCall, so "
                    "this input's value never reaches it",
                )
            )
        elif argument not in by_keyword and not any_keyword:
            problems.append((where, f"{name!r} has no parameter {argument!r}, so calling it with this input fails"))
    given = set(declared)
    for parameter in parameters.values():
        if parameter.default is not inspect.Parameter.empty or parameter.name == _CALL_PARAMETER:
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            problems.append(
                (
                    (*parts, "call"),
                    f"{name!r} requires the positional-only parameter {parameter.name!r}; actions are called with "
                    "keyword arguments, so no input can give it",
                )
            )
        elif parameter.name not in given:
            problems.append(
                (
                    (*parts, "call"),
                    f"{name!r} requires a parameter {parameter.name!r} that no declared input gives, so calling it "
                    "fails",
                )
            )
    return problems
