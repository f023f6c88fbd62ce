"""The ``migrations:`` block: how conversations stored on the previous version of a definition move onto this one.

Conversations stay pinned to the version they started on; moving them is an explicit step
(``llm_fsm.engine._migrate``), and this block is what that step needs to know that the two versions alone
cannot say: which old state is which new one, which key was renamed, what a key the new version needs
holds in a conversation that never had it, and which sub-flow was renamed.

The block is structure only (what the JSON Schema can say too); whether its names exist in either version is
fsm-lint's business (FSM046–FSM052), since a file must load to be linted. Unknown parts are refused, unlike the
definition's unknown fields: a misspelt ``state:`` would otherwise migrate nothing, silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llm_fsm.definition._documents import ParsedDocument, format_path
from llm_fsm.errors import DefinitionError

if TYPE_CHECKING:
    from llm_fsm.definition._model import FlowDeclaration, FSMDefinition


class Migrations(BaseModel):
    """States renamed or merged, keys renamed, defaults for new keys, sub-flows renamed (old name → new name)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    states: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Old state id → new state id, for conversations stored in the old one (several old ids to one new id "
            "merge them). Applies to this definition's own frames, not to its sub-flows' (each has its own block)."
        ),
    )
    keys: dict[str, str] = Field(
        default_factory=dict,
        description="Old context key → new context key (dot paths allowed); the value moves, the old key goes.",
    )
    defaults: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Key → value set in a migrated conversation that lacks the key (never over a stored value); checked "
            "against the key's declaration like an application's write."
        ),
    )
    flows: dict[str, str] = Field(
        default_factory=dict,
        description="Old sub-flow name → new sub-flow name, for sub-flows this definition declares.",
    )

    @property
    def empty(self) -> bool:
        return not (self.states or self.keys or self.defaults or self.flows)


def flow_declarations(definition: FSMDefinition) -> list[FlowDeclaration]:
    """Every sub-flow a definition declares, at the top level, then in each state."""
    return [*(definition.flows or ()), *(flow for state in definition.states.values() for flow in state.flows or ())]


def flow_names(definition: FSMDefinition) -> set[str]:
    """Every sub-flow name a definition declares, at the top level or in any state: what a renamed flow may be
    renamed to, and what a paused sub-flow's name must still be (its output mapping travels with its frame, so
    the state it was declared in does not matter)."""
    return {flow.name for flow in flow_declarations(definition)}


def migrations_from_document(doc: ParsedDocument) -> Migrations:
    """A standalone migrations file's block: the mapping at its top level, or under ``migrations:``.

    Raises ``DefinitionError`` naming the file, the JSON path and the line of the first problem (every one in
    ``problems``), as for a definition.
    """
    data = doc.data
    prefix: tuple[str, ...] = ()
    if isinstance(data, Mapping) and set(data) == {"migrations"}:
        data, prefix = data["migrations"], ("migrations",)
    if not isinstance(data, Mapping):
        raise DefinitionError(
            "a migrations file is a mapping of states, keys, defaults and flows (at the top level or under "
            "migrations:)",
            file=doc.file,
            path=format_path(prefix),
            line=doc.line_for(prefix) or 1,
        )
    try:
        return Migrations.model_validate(data)
    except ValidationError as exc:
        raise _located(exc, doc, prefix) from None


def _located(exc: ValidationError, doc: ParsedDocument, prefix: tuple[str, ...]) -> DefinitionError:
    problems: list[tuple[str, str]] = []
    first_line: int | None = None
    for error in exc.errors(include_url=False):
        loc = (*prefix, *error["loc"])
        message = "unknown part of a migrations block" if error["type"] == "extra_forbidden" else error["msg"]
        line = doc.line_for(loc)
        first_line = first_line if first_line is not None else line
        problems.append((format_path(loc), message + (f" (line {line})" if line else "")))
    path, message = problems[0]
    return DefinitionError(message.rsplit(" (line", 1)[0], file=doc.file, path=path, line=first_line, problems=problems)


__all__ = ["Migrations", "flow_declarations", "flow_names", "migrations_from_document"]
