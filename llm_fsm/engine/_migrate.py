"""Moving a stored conversation onto a new version of its definition, and what would strand it there.

Conversations stay pinned to the version they started on; ``migrate`` is the explicit step that moves one. It is
pure (the runtime loads, saves with compare-and-set and records; this only computes), and it never changes the
instance it is given: it returns a migrated copy, every change it made, and the problems the new version still
has with it (``stranded``), so a caller can refuse to save a conversation the new version cannot run.

Each flow of the stack is migrated with its own definition: the root frame with the root's block (or the block
given, e.g. from ``--migrations FILE``), a sub-flow's frame with the block of that sub-flow's new definition
(``flows``, by the sub-flow's new name). A parent's ``flows`` renames the sub-flows it started. What moves:

- the state of every frame, the active one and the paused ones, and the state a handoff came from;
- context keys renamed in every frame's data, and the output mapping a called flow hands back through;
- defaults, only where a frame lacks the key, checked as an application's write is;
- stored values of declared keys, put in the form the new declaration stores (``"42"`` for an integer key
  becomes 42), with the engine's own normalising (``engine._values``), never a second validator;
- every frame's ``definition_hash``, to its new version's;
- ``action_runs`` of a renamed state: kept under the new id when the new state declares the same action at the
  same place (it ran, with those inputs, during this visit), dropped otherwise, so the new version's action runs
  on its next turn;
- archived flows' names, when the blocks agree on one new name.

``pending_cancel`` and ``mode`` are kept as they are: a cancel waiting for its confirmation names no state, and
the engine checks ``cancellable`` again when it is confirmed. A frame's ``fsm_id`` is the loader's reference,
which only the caller knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from llm_fsm.definition._migrations import Migrations, flow_names
from llm_fsm.definition._model import FSMDefinition
from llm_fsm.engine._actions import action_key
from llm_fsm.engine._context import _MISSING, _delete_path, _set_path, get_path
from llm_fsm.engine._data import _replace, copy_json
from llm_fsm.engine._flows import _active_frame
from llm_fsm.engine._instance import FlowFrame, FSMInstance
from llm_fsm.engine._provenance import Origins
from llm_fsm.engine._values import MASK, KeyPolicy, Refusal

ChangeKind = Literal["state", "key", "default", "value", "flow", "definition", "action_run", "handoff"]
ProblemKind = Literal["state", "flow", "key", "default"]

ROOT = "root"
"""``where`` of the root frame (a sub-flow's is its flow name)."""

_NONE = Migrations()


@dataclass(frozen=True)
class MigrationChange:
    """One change ``migrate`` made: what, in which flow, from what to what, and a sentence for people.

    ``name`` is what changed (a state id, a key, a flow name, a run key); ``before``/``after`` its old and new
    form (a value for ``default``/``value``, masked for a sensitive key; ``after`` None for a dropped run).
    """

    kind: ChangeKind
    where: str
    name: str
    before: Any
    after: Any
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MigrationProblem:
    """Something the new version cannot hold: the conversation would be stranded on it.

    ``kind``: ``state`` (a frame's state is not declared), ``flow`` (a sub-flow the parent no longer declares,
    or whose new definition was not given), ``key`` (a stored value its declaration refuses), ``default`` (a
    default its declaration refuses, for a key the conversation lacks). ``where``: ``"root"`` or the sub-flow's
    name.
    """

    kind: ProblemKind
    where: str
    name: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MigrationResult:
    """The migrated copy, what changed, and what still strands it (empty: the new version can run it)."""

    instance: FSMInstance
    changes: tuple[MigrationChange, ...]
    problems: tuple[MigrationProblem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def migrate(
    instance: FSMInstance,
    new: FSMDefinition,
    migrations: Migrations | None = None,
    *,
    flows: Mapping[str, FSMDefinition] | None = None,
) -> MigrationResult:
    """``instance`` moved onto ``new`` (a copy; ``instance`` is never changed), then judged by ``stranded``.

    ``migrations`` replaces ``new``'s own block for the root frame; ``flows`` gives the new definition of each
    sub-flow on the stack by its new name.
    """
    result = instance.copy_for_turn()
    changes: list[MigrationChange] = []
    frames = [*result.flow_stack, _active_frame(result, "active", None)]
    blocks: list[Migrations] = []
    origins = Origins(result.provenance, len(frames))
    for index, frame in enumerate(frames):
        parent = blocks[-1] if blocks else None
        _rename_flow(frame, parent, new, changes)
        where = ROOT if index == 0 else frame.flow_name
        definition = _definition_of(index, frame, new, flows)
        block = _block_of(index, definition, new, migrations)
        _map_state(frame, block, where, changes)
        origins.rename(index, frame, _rename_keys(frame.data, block.keys, where, changes))
        if parent is not None:  # parent key <- this flow's key: each side renamed by its own flow's block
            frame.output_mapping = {
                parent.keys.get(mine, mine): block.keys.get(theirs, theirs)
                for mine, theirs in frame.output_mapping.items()
            }
        if definition is not None:
            origins.set(index, frame, _fill_defaults(frame.data, block.defaults, definition, where, changes))
            _normalise_values(frame.data, definition, where, changes)
            if frame.definition_hash != definition.content_hash:
                changes.append(
                    MigrationChange(
                        "definition",
                        where,
                        frame.flow_name,
                        frame.definition_hash,
                        definition.content_hash,
                        f"{_who(where)} now runs on version {definition.content_hash} (was {frame.definition_hash})",
                    )
                )
                frame.definition_hash = definition.content_hash
        _map_action_runs(result.action_runs, frame, block, definition, where, changes)
        blocks.append(block)
    _write_active(result, frames[-1])
    _map_handoff(result, blocks[-1], changes)
    _rename_archived(result, blocks, changes)
    problems = stranded(result, new, flows=flows, migrations=migrations)
    return MigrationResult(result, tuple(changes), tuple(problems))


def stranded(
    instance: FSMInstance,
    new: FSMDefinition,
    *,
    flows: Mapping[str, FSMDefinition] | None = None,
    migrations: Migrations | None = None,
) -> list[MigrationProblem]:
    """What ``new`` cannot hold of ``instance`` as it is stored (nothing is mapped here: ``migrate`` does that).

    A frame's state ``new`` (or the sub-flow's definition) does not declare; a sub-flow its new parent no longer
    declares, or whose new definition ``flows`` does not give; a stored value its key's new declaration refuses
    (a value the engine's normalising makes acceptable is held: ``migrate`` stores it so); a default of the block
    (``migrations``, else each definition's own) that its declaration refuses, for a key a frame lacks.
    """
    problems: list[MigrationProblem] = []
    frames = [*instance.flow_stack, _active_frame(instance, "active", None)]
    parent: FSMDefinition | None = None
    for index, frame in enumerate(frames):
        where = ROOT if index == 0 else frame.flow_name
        definition = _definition_of(index, frame, new, flows)
        if index and parent is not None and frame.flow_name not in flow_names(parent):
            problems.append(
                MigrationProblem(
                    "flow",
                    where,
                    frame.flow_name,
                    f"the conversation is in sub-flow {frame.flow_name!r}, which the new version of {parent.name!r} "
                    "no longer declares: rename it in that version's migrations.flows, or declare it again",
                )
            )
        parent = definition
        if definition is None:
            problems.append(
                MigrationProblem(
                    "flow",
                    where,
                    frame.flow_name,
                    f"no new definition of sub-flow {frame.flow_name!r} was given, so its state and data cannot be "
                    "checked: give every sub-flow on the stack by its new name",
                )
            )
            continue
        if frame.current_state not in definition.states:
            problems.append(
                MigrationProblem(
                    "state",
                    where,
                    frame.current_state,
                    f"{_who(where)} is in state {frame.current_state!r}, which the new version of "
                    f"{definition.name!r} does not declare: map it to a state in migrations.states",
                )
            )
        policy = KeyPolicy(definition)
        for key in definition.context_keys or {}:
            value = get_path(frame.data, key)
            if value is not _MISSING and (refusal := _refusal(policy, key, value)) is not None:
                problems.append(
                    MigrationProblem(
                        "key",
                        where,
                        key,
                        f"{_who(where)} holds {key!r}, and its new declaration refuses the value: {refusal.reason}; "
                        "rename the key in migrations.keys, or change the declaration",
                    )
                )
        block = _block_of(index, definition, new, migrations)
        for key, value in block.defaults.items():
            if get_path(frame.data, key) is _MISSING and (refusal := _refusal(policy, key, value)) is not None:
                problems.append(
                    MigrationProblem(
                        "default",
                        where,
                        key,
                        f"the default for {key!r} is refused by its declaration: {refusal.reason}; {_who(where)} "
                        "lacks the key, so fix the default in migrations.defaults",
                    )
                )
    return problems


# --- one frame ----------------------------------------------------------------------------------


def _who(where: str) -> str:
    return "the conversation" if where == ROOT else f"sub-flow {where!r}"


def _definition_of(
    index: int, frame: FlowFrame, new: FSMDefinition, flows: Mapping[str, FSMDefinition] | None
) -> FSMDefinition | None:
    return new if index == 0 else (flows or {}).get(frame.flow_name)


def _block_of(index: int, definition: FSMDefinition | None, new: FSMDefinition, given: Migrations | None) -> Migrations:
    if index == 0:
        return given if given is not None else new.migrations or _NONE
    return (definition.migrations if definition is not None else None) or _NONE


def _rename_flow(
    frame: FlowFrame, parent: Migrations | None, new: FSMDefinition, changes: list[MigrationChange]
) -> None:
    """A sub-flow's name by its parent's block; the root's is its definition's name."""
    if parent is None:
        renamed = new.name if frame.mode == "root" else frame.flow_name
    else:
        renamed = parent.flows.get(frame.flow_name, frame.flow_name)
    if renamed != frame.flow_name:
        where = ROOT if parent is None else renamed
        message = f"flow {frame.flow_name!r} is now called {renamed!r}"
        changes.append(MigrationChange("flow", where, renamed, frame.flow_name, renamed, message))
        frame.flow_name = renamed


def _map_state(frame: FlowFrame, block: Migrations, where: str, changes: list[MigrationChange]) -> None:
    target = block.states.get(frame.current_state, frame.current_state)
    if target != frame.current_state:
        message = f"{_who(where)} moved from state {frame.current_state!r} to {target!r}"
        changes.append(MigrationChange("state", where, target, frame.current_state, target, message))
        frame.current_state = target


def _rename_keys(
    data: dict[str, Any], keys: Mapping[str, str], where: str, changes: list[MigrationChange]
) -> list[tuple[str, str]]:
    """Every renamed key at once: all values are taken out first, so keys renamed onto each other swap. Returns the
    (old, new) pairs whose value moved."""
    moving = [
        (old, new, value) for old, new in keys.items() if old != new and (value := _take(data, old)) is not _MISSING
    ]
    for old, new, value in moving:
        replaced = _set(data, new, value) is not _MISSING
        message = f"{_who(where)}'s key {old!r} is now {new!r}" + (", replacing the value it had" if replaced else "")
        changes.append(MigrationChange("key", where, new, old, new, message))
    return [(old, new) for old, new, _ in moving]


def _take(data: dict[str, Any], path: str) -> Any:
    """Remove and return the value at ``path`` (a literal dotted key first, as ``get_path`` reads), dropping
    objects the removal left empty; ``_MISSING`` when there is none."""
    if path in data:
        return data.pop(path)
    value = _delete_path(data, path)
    parts = path.split(".")
    while value is not _MISSING and len(parts) > 1:
        parts.pop()
        parent = ".".join(parts)
        if get_path(data, parent) != {}:
            break
        _delete_path(data, parent)
    return value


def _set(data: dict[str, Any], path: str, value: Any) -> Any:
    if path in data:
        previous = data[path]
        data[path] = value
        return previous
    return _set_path(data, path, value)


def _refusal(policy: KeyPolicy, key: str, value: Any) -> Refusal | None:
    return policy.vet(key, value, model=False)[1]


def _shown(definition: FSMDefinition, key: str, value: Any) -> Any:
    found = definition.declaration_for(key)
    return MASK if found is not None and found[1].sensitive else value


def _fill_defaults(
    data: dict[str, Any],
    defaults: Mapping[str, Any],
    definition: FSMDefinition,
    where: str,
    changes: list[MigrationChange],
) -> list[str]:
    """Set each default the frame lacks, as the application's write would store it; a refused one is left to
    ``stranded`` to report. Returns the keys set."""
    policy = KeyPolicy(definition)
    done: list[str] = []
    for key, value in defaults.items():
        if value is None or get_path(data, key) is not _MISSING:
            continue
        stored, refusal = policy.vet(key, copy_json(value), model=False)
        if refusal is None:
            _set(data, key, stored)
            done.append(key)
            shown = _shown(definition, key, stored)
            message = f"{_who(where)} lacked {key!r}; set to its default {shown!r}"
            changes.append(MigrationChange("default", where, key, None, shown, message))
    return done


def _normalise_values(
    data: dict[str, Any], definition: FSMDefinition, where: str, changes: list[MigrationChange]
) -> None:
    """Stored values of declared keys in the form their new declaration stores, where that form is accepted."""
    policy = KeyPolicy(definition)
    for key in definition.context_keys or {}:
        value = get_path(data, key)
        if value is _MISSING:
            continue
        stored, refusal = policy.vet(key, value, model=False)
        if refusal is None and (stored != value or type(stored) is not type(value)):
            _set(data, key, stored)
            before, after = _shown(definition, key, value), _shown(definition, key, stored)
            message = f"{_who(where)}'s {key!r} is stored as its new declaration stores it: {after!r} (was {before!r})"
            changes.append(MigrationChange("value", where, key, before, after, message))


def _map_action_runs(
    runs: dict[str, str],
    frame: FlowFrame,
    block: Migrations,
    definition: FSMDefinition | None,
    where: str,
    changes: list[MigrationChange],
) -> None:
    """Runs of ``collected`` actions in a renamed state: re-keyed when the new state has the same action at the
    same place (it ran during this visit), else forgotten, so the new version's action runs next turn."""
    prefix = f"{frame.flow_id}/"
    for run_key in [k for k in runs if k.startswith(prefix)]:
        old_state, sep, rest = run_key[len(prefix) :].partition("#")
        target = block.states.get(old_state, old_state)
        if not sep or target == old_state:
            continue
        fingerprint = runs.pop(run_key)
        kept = f"{prefix}{target}#{rest}" if _declares(definition, target, rest) else None
        if kept is not None:
            runs[kept] = fingerprint
            message = f"the run of {rest!r} in {old_state!r} is remembered in {target!r}"
        else:
            message = f"{target!r} has no action {rest!r}: its run in {old_state!r} is forgotten"
        changes.append(MigrationChange("action_run", where, run_key, run_key, kept, message))


def _declares(definition: FSMDefinition | None, state_id: str, rest: str) -> bool:
    """Whether ``state_id`` has, at the same index, the action a run key's ``index:call`` names."""
    state = definition.states.get(state_id) if definition is not None else None
    index = rest.split(":", 1)[0]
    if state is None or not index.isdigit() or int(index) >= len(state.actions or ()):
        return False
    action = (state.actions or [])[int(index)]
    return action.when == "collected" and action_key(state, int(index), action) == f"{state_id}#{rest}"


# --- the instance around the frames -------------------------------------------------------------


def _write_active(instance: FSMInstance, active: FlowFrame) -> None:
    """The active frame's migrated fields back into the instance (pydantic built the frame's data as a copy)."""
    instance.context.data = active.data
    instance.current_state = active.current_state
    if active.flow_name != (instance.flow_name or instance.fsm_id):
        instance.flow_name = active.flow_name
    instance.definition_hash = active.definition_hash
    instance.flow_output_mapping = active.output_mapping


def _map_handoff(instance: FSMInstance, block: Migrations, changes: list[MigrationChange]) -> None:
    """A handoff remembers the state it came from, in the active flow (turns in human mode do not move it)."""
    handoff = instance.handoff
    if handoff is None:
        return
    target = block.states.get(handoff.from_state, handoff.from_state)
    if target != handoff.from_state:
        where = ROOT if not instance.flow_stack else instance.flow_name or instance.fsm_id
        message = f"the handoff now says it came from {target!r} (was {handoff.from_state!r})"
        changes.append(MigrationChange("handoff", where, target, handoff.from_state, target, message))
        instance.handoff = _replace(handoff, from_state=target)


def _rename_archived(instance: FSMInstance, blocks: list[Migrations], changes: list[MigrationChange]) -> None:
    """Archived flows by their new names. Which flow started one is not kept, so a name is renamed only when
    every block that renames it agrees."""
    targets: dict[str, set[str]] = {}
    for block in blocks:
        for old, new in block.flows.items():
            targets.setdefault(old, set()).add(new)
    for position, frame in enumerate(instance.completed_flows):
        names = targets.get(frame.flow_name, set())
        if len(names) == 1 and (renamed := next(iter(names))) != frame.flow_name:
            message = f"archived flow {frame.flow_name!r} is now called {renamed!r}"
            changes.append(MigrationChange("flow", "archive", renamed, frame.flow_name, renamed, message))
            instance.completed_flows[position] = _replace(frame, flow_name=renamed)


__all__ = [
    "ROOT",
    "MigrationChange",
    "MigrationProblem",
    "MigrationResult",
    "migrate",
    "stranded",
]
