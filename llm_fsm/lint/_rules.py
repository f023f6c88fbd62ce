"""The lint codes, their severities and whether they block loading; diagnostics and results."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from llm_fsm.definition._model import (
    FSMDefinition,
)


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True)
class Rule:
    """One entry of the code table. ``blocks_loading``: the engine refuses such a file."""

    code: str
    name: str
    severity: Severity
    summary: str
    blocks_loading: bool = False


_E, _W, _I = Severity.ERROR, Severity.WARNING, Severity.INFO

#: The registry of codes. Codes are stable: never renumber, only add.
RULES: dict[str, Rule] = {
    rule.name: rule
    for rule in (
        Rule(
            "FSM000",
            "unreadable-input",
            _E,
            "The file cannot be read or parsed (missing, not UTF-8, not JSON/YAML, too large, too deep).",
        ),
        Rule("FSM001", "schema-violation", _E, "The document does not match the definition schema.", True),
        Rule("FSM002", "unsupported-version", _E, "`version` is not a format version this engine supports.", True),
        Rule("FSM003", "unknown-field", _W, "A field the format does not define; the engine ignores it."),
        Rule("FSM004", "state-id-mismatch", _E, "A state's `id` differs from its key in `states`.", True),
        Rule("FSM005", "initial-state-missing", _E, "`initial_state` names no declared state.", True),
        Rule("FSM006", "unknown-target-state", _E, "A transition targets a state that is not declared.", True),
        Rule("FSM007", "unreachable-state", _E, "No path leads from the initial state to this state."),
        Rule("FSM008", "no-terminal-state", _W, "No state is terminal, so no conversation can ever end."),
        Rule("FSM009", "trap-state", _W, "No terminal state can be reached from this state."),
        Rule("FSM010", "duplicate-transition", _W, "Two transitions of a state have the same target and conditions."),
        Rule(
            "FSM011",
            "ambiguous-priority",
            _W,
            "Guarded transitions of one state to different targets share a priority.",
        ),
        Rule(
            "FSM012",
            "invalid-logic",
            _E,
            "A JsonLogic rule uses an unknown operator, the wrong arity or a bad shape.",
            True,
        ),
        Rule(
            "FSM013",
            "condition-reads-key-without-default",
            _W,
            "A condition would hold under reference JsonLogic when a key is missing, but not in this engine.",
        ),
        Rule(
            "FSM014",
            "condition-key-never-provided",
            _W,
            "A condition reads a key no state collects, no condition requires and the application does not provide.",
        ),
        Rule(
            "FSM015",
            "required-key-never-collected",
            _W,
            "`requires_context_keys` names a key no state collects and the application does not provide.",
        ),
        Rule("FSM016", "duplicate-key", _W, "A key appears twice in one object; parsers silently keep the last."),
        Rule(
            "FSM017",
            "condition-always-true",
            _W,
            "A condition has neither `logic` nor `requires_context_keys`, so it always holds.",
        ),
        Rule(
            "FSM018",
            "confirmation-target-undeclared",
            _E,
            "A confirmation's `on_yes`/`on_no` names no declared transition of its state.",
        ),
        Rule(
            "FSM019",
            "flow-definition-not-found",
            _W,
            "A sub-flow's `definition` names no file next to this one or on the search path (checked by the"
            " CLI, which may read files).",
        ),
        Rule(
            "FSM020",
            "flow-definition-invalid",
            _E,
            "A sub-flow's definition file exists but does not load (the engine would refuse to start it).",
        ),
        Rule(
            "FSM021",
            "called-flow-never-returns",
            _E,
            "A called sub-flow cannot reach a terminal state from its initial state, so the flow that"
            " called it never resumes.",
        ),
        Rule(
            "FSM022",
            "flow-input-never-provided",
            _W,
            "A sub-flow's `inputs` hands over a key this flow never collects, requires or is given.",
        ),
        Rule(
            "FSM023",
            "flow-input-unused",
            _W,
            "A sub-flow's `inputs` fills a key the sub-flow never collects, reads or passes on.",
        ),
        Rule(
            "FSM024",
            "flow-output-never-provided",
            _W,
            "A sub-flow's `outputs` copies back a key the sub-flow never collects or is given, so it is always empty.",
        ),
        Rule(
            "FSM025",
            "recursive-flow",
            _W,
            "Sub-flow calls form a cycle, so a definition can call itself without bound (stopped only by"
            " the run-time depth limit).",
        ),
        Rule(
            "FSM026",
            "call-outputs-lost-by-link",
            _W,
            "A called sub-flow can link onward; the call's `outputs` are then never copied back (the linked"
            " flow's own `outputs` apply).",
        ),
        Rule(
            "FSM027",
            "condition-type-mismatch",
            _W,
            "A condition compares a declared key with a literal of another type (or looks inside a key that"
            " `in` cannot look inside).",
        ),
        Rule(
            "FSM028",
            "condition-value-not-in-enum",
            _E,
            "A condition compares a key declared with an `enum` with a value outside it, so the comparison is"
            " decided before any conversation runs.",
        ),
        Rule(
            "FSM029",
            "condition-value-outside-declaration",
            _E,
            "A condition compares a declared key with a value no stored value can match: outside"
            " `minimum`/`maximum`, of the wrong format or length, or in a form the engine normalises away.",
        ),
        Rule(
            "FSM030",
            "required-key-not-writable",
            _E,
            "A state's `required_context_keys` names a key the model may not write (application-only, or"
            " undeclared with `additional_keys: false`).",
        ),
        Rule(
            "FSM031",
            "declared-key-never-collected",
            _W,
            "A declared key no state collects, no condition reads or requires and the application does not provide.",
        ),
        Rule(
            "FSM032",
            "undeclared-key",
            _W,
            "Keys are declared, and a state or condition names one that is not (with `additional_keys: true`,"
            " only a likely misspelling of a declared one).",
        ),
        Rule(
            "FSM033",
            "action-input-never-provided",
            _W,
            "An action's input reads a key no state collects, no other action writes and the application does not"
            " provide, so the action never runs.",
        ),
        Rule(
            "FSM034",
            "action-output-never-read",
            _I,
            "An action writes a key no condition reads, no action or sub-flow takes, no declaration or state text"
            " names: possibly a result nobody uses.",
        ),
        Rule(
            "FSM035",
            "action-error-state-undeclared",
            _E,
            "An action's `on_error` names a state the definition does not declare (nor `fail` or `handoff`).",
            True,
        ),
        Rule(
            "FSM036",
            "action-error-reenters-state",
            _W,
            "An `enter` action's `on_error` names its own state: entering it again runs the action again, and a"
            " second failure in a turn raises ActionError, so it means `fail`.",
        ),
        Rule(
            "FSM037",
            "action-output-collected-by-model",
            _W,
            "An action writes a key a state also asks the model to collect, and the key is not application-only:"
            " the model can overwrite the backend's value.",
        ),
        Rule(
            "FSM038",
            "action-never-runs",
            _W,
            "An `exit` action of a terminal state: a conversation never leaves such a state, so it never runs.",
        ),
        Rule(
            "FSM039",
            "action-not-registered",
            _E,
            "A state calls an action the registry given with `--actions` does not have.",
        ),
        Rule(
            "FSM040",
            "action-signature-mismatch",
            _E,
            "The registered function cannot be called with the declared inputs: an input it does not accept, or a"
            " required parameter no input gives.",
        ),
        Rule(
            "FSM041",
            "misspelt-key-in-guard",
            _E,
            "A condition waits for a key nothing provides that is a misspelling of one the file provides or"
            " declares: the condition never holds, so its transition never fires.",
        ),
        Rule(
            "FSM042",
            "proof-trap",
            _E,
            "fsm-lint --prove: a reachable configuration from which no sequence of answers ends the conversation "
            "(property no_trap).",
        ),
        Rule(
            "FSM043",
            "proof-no-progress",
            _E,
            "fsm-lint --prove: a reachable state no answer can leave: every exit needs a condition that cannot hold "
            "or a key nothing reachable provides (property progress).",
        ),
        Rule(
            "FSM044",
            "proof-model-gate",
            _E,
            "fsm-lint --prove: the model alone can open a transition into a state that matters: its condition reads "
            "only keys the model writes, ungrounded, that no state asks the user for (property no_model_gate).",
        ),
        Rule(
            "FSM045",
            "proof-flow-return",
            _E,
            "fsm-lint --prove: a sub-flow call that cannot return to its caller with its declared outputs, or flows "
            "that call themselves (property flows_return).",
        ),
        Rule(
            "FSM046",
            "migration-unknown-state",
            _E,
            "migrations.states maps an old state to a state this definition does not declare.",
        ),
        Rule(
            "FSM047",
            "migration-undeclared-key",
            _W,
            "Keys are declared, and migrations.keys renames to (or migrations.defaults gives) a key that is not.",
        ),
        Rule(
            "FSM048",
            "migration-default-invalid",
            _E,
            "A default of migrations.defaults breaks its key's declaration.",
        ),
        Rule(
            "FSM049",
            "migration-unknown-flow",
            _E,
            "migrations.flows renames a sub-flow to a name this definition does not declare.",
        ),
        Rule(
            "FSM050",
            "migration-key-conflict",
            _E,
            "migrations.keys renames two old keys to the same key.",
        ),
        Rule(
            "FSM051",
            "migration-source-unknown",
            _E,
            "With the previous version: migrations renames a state, key or flow the previous version does not have.",
        ),
        Rule(
            "FSM052",
            "migration-stranded-state",
            _W,
            "With the previous version: a state of it this version neither keeps nor maps; conversations in it would"
            " be stranded.",
        ),
        Rule(
            "FSM053",
            "say-invalid-placeholder",
            _E,
            "A say text is malformed (an unmatched brace, a conversion, an indexed field) or a placeholder's format "
            "spec is invalid: the text could never be said.",
        ),
        Rule("FSM054", "say-unknown-response", _E, "A say names a response id the responses table does not have."),
        Rule(
            "FSM055",
            "say-undeclared-key",
            _W,
            "Keys are declared, and a say placeholder names a key that is not: the text falls back every time.",
        ),
        Rule(
            "FSM056",
            "say-sensitive-key",
            _E,
            "A say placeholder names a sensitive key not listed in its reveal: the engine never fills it in.",
        ),
        Rule(
            "FSM057",
            "say-key-never-set",
            _W,
            "A say placeholder names a key no state collects and neither the application nor an action provides.",
        ),
        Rule(
            "FSM058",
            "global-scope-unknown",
            _E,
            "A global transition's `from_states`, `from_groups` or `except_states`, or a state group, names a state"
            " or group that is not declared.",
            True,
        ),
        Rule(
            "FSM059",
            "global-transition-applies-nowhere",
            _W,
            "A global transition applies in no state: every state of its scope is terminal, excluded or its target.",
        ),
        Rule(
            "FSM060",
            "global-transition-shadowed",
            _W,
            "Every state a global transition applies in declares its own transition to the same target with the same"
            " conditions and a priority as good: the state's own always wins, so the global one is never taken.",
        ),
        Rule(
            "FSM061",
            "global-scope-never-applies",
            _W,
            "A global transition's `from_states` names a state where it never applies: a terminal state, its own"
            " target, or a state also in `except_states`.",
        ),
        Rule(
            "FSM062",
            "timer-go-undeclared",
            _E,
            "A timer moves to a state that is not a declared transition of its state, or to its confirmation's "
            "on_yes: the engine refuses the move.",
        ),
        Rule(
            "FSM063",
            "timer-never-armed",
            _E,
            "A terminal or handoff state declares timers: a conversation there has ended or is with a person, so they "
            "are never armed.",
        ),
        Rule("FSM064", "timer-duration-not-positive", _E, "A timer's duration is not above zero."),
        Rule(
            "FSM065",
            "timer-say-invalid",
            _E,
            "A timer's say text is malformed or names a response id the responses table does not have.",
        ),
        Rule(
            "FSM066",
            "timer-after-move",
            _W,
            "A timer is due no earlier than a timer that moves the conversation out of the state (both timed from "
            "entering it): it fires only when that move is refused.",
        ),
        Rule(
            "FSM067",
            "say-key-not-always-set",
            _W,
            "A say or refusal placeholder names a key that is not set on every way to where the text is said.",
        ),
        Rule(
            "FSM068",
            "refusal-never-said",
            _W,
            "A refusal on a transition no refused move can meet: it has no conditions (and is no confirmation's "
            "answer), or it leads back to its own state.",
        ),
        Rule(
            "FSM069",
            "transition-say-passed-by",
            _I,
            "A transition's say leads into a state chaining may leave in the same turn: then its text is not said.",
        ),
        Rule(
            "FSM070",
            "text-missing-language",
            _W,
            "A per-language text lacks a declared language (or is empty in it): that language reads the default's.",
        ),
        Rule(
            "FSM071",
            "undeclared-language",
            _E,
            "A text is written in a language the definition does not declare: no conversation can be in it.",
        ),
        Rule("FSM072", "default-language-undeclared", _E, "`default_language` is not one of `languages`."),
        Rule(
            "FSM073",
            "language-key-invalid",
            _E,
            "`language_key` is not a declared key whose enum values are all declared languages: it cannot switch.",
        ),
        Rule(
            "FSM074",
            "language-not-shipped",
            _I,
            "A declared language the library's own sentences are not written in: they are quoted in English.",
        ),
        Rule(
            "FSM075",
            "retrieve-budget-empty",
            _E,
            "A retrieve with max_chars 0: nothing is asked, so no snippet reaches the prompt.",
        ),
        Rule(
            "FSM076",
            "retrieve-error-state-undeclared",
            _E,
            "A retrieve's on_error names neither continue nor a declared state.",
        ),
        Rule(
            "FSM077",
            "retriever-not-registered",
            _E,
            "A retrieve names a retriever the application did not register (checked when the names are given).",
        ),
        Rule(
            "FSM078",
            "mcp-tool-unknown",
            _E,
            "An action calls mcp:SERVER/TOOL, but the MCP config has no such server or the server lists no such tool "
            "(checked with --mcp).",
        ),
        Rule(
            "FSM079",
            "mcp-inputs-mismatch",
            _E,
            "An MCP tool call's inputs do not match the tool's input schema: a required input never given, an input "
            "the schema does not take, or a context key of a type it refuses (checked with --mcp).",
        ),
        Rule(
            "FSM080",
            "mcp-server-unreachable",
            _W,
            "An MCP server the definition's actions call could not be asked for its tools, so their calls were not "
            "checked (with --mcp).",
        ),
        Rule("FSM099", "internal-error", _E, "A check failed unexpectedly (a bug in fsm-lint; please report it)."),
    )
}

RULES_BY_CODE: dict[str, Rule] = {rule.code: rule for rule in RULES.values()}


@dataclass(frozen=True)
class Diagnostic:
    """One finding: stable code and name, severity, where, what, and how to fix it."""

    code: str
    name: str
    severity: Severity
    message: str
    hint: str | None = None
    file: str | None = None
    path: str = "$"
    line: int | None = None

    @property
    def blocks_loading(self) -> bool:
        return RULES_BY_CODE[self.code].blocks_loading

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["severity"] = self.severity.value
        return data


def make_diagnostic(
    name: str,
    message: str,
    *,
    hint: str | None = None,
    file: str | None = None,
    path: str = "$",
    line: int | None = None,
) -> Diagnostic:
    """A diagnostic for rule ``name`` (used by the CLI for FSM000 as well)."""
    rule = RULES[name]
    return Diagnostic(rule.code, rule.name, rule.severity, message, hint, file, path, line)


@dataclass(frozen=True)
class LintResult:
    """The diagnostics, and the validated model when the document passed the schema."""

    diagnostics: tuple[Diagnostic, ...]
    definition: FSMDefinition | None

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.severity is Severity.ERROR)
