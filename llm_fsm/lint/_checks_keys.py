"""Conditions that compare a declared context key (``context_keys``) with a literal: against the key's declared
type, enum, range, format and stored form (FSM027-FSM029). The other checks of declared keys (FSM030-FSM032)
are in ``_checks_declarations``.

The engine checks every write against its declaration, the application's included, so a stored value always has
the declared type, is one of the enum (in its canonical spelling) and lies within the bounds. A comparison with a
literal the declaration excludes is therefore decided before any conversation runs; that is what these checks
find. Only declarations that validate are trusted (a broken one is FSM001's finding), and every check here is
skipped when validation stopped early: a declaration, or a use of one, may be in the part not validated.
"""

from __future__ import annotations

import json
from typing import Any

from llm_fsm.definition._documents import Path
from llm_fsm.definition._enums import DONTCARE
from llm_fsm.definition._keys import KeyDeclaration, fold
from llm_fsm.engine._values import _FORMAT_HINT, format_problem, normalise
from llm_fsm.lint._run import LintRun
from llm_fsm.lint._support import _did_you_mean

# re-exported: tests import the misspelling index from here, where it was first written
from llm_fsm.lint._typos import _MAX_TYPO_INDEX as _MAX_TYPO_INDEX
from llm_fsm.lint._typos import _Typos as _Typos
from llm_fsm.logic._coercions import _le, _loose_eq, _lt, _strict_eq

_EQUALITY = frozenset(("==", "===", "!=", "!=="))
_NEGATED = frozenset(("!=", "!=="))
_ORDER = frozenset(("<", "<=", ">", ">="))
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
#: operators whose second argument (the body) is evaluated with each item as its data: a var there reads the item
_ITERATORS = frozenset(("map", "filter", "reduce", "all", "some", "none"))
_COMPARING = _EQUALITY | _ORDER | {"in", "contains"}
_CONTAINERS = (dict, list)

#: where a literal is: (path of an argument list, position in it)
Place = tuple[Path, int]
#: the comparable kind of each declared type (integer and number compare alike)
_KIND = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
}
#: a literal longer than this is cut short in a message
_MAX_SHOWN = 80
#: enums longer than this are not searched for substrings (``in`` against a string key) nor for a close spelling
#: (a hint): the work per finding stays bounded
_MAX_SUBSTRING_ENUM = 1_000
#: string literals longer than this are not judged against a format (the format rules are regular expressions)
_MAX_JUDGED_LITERAL = 1_000
#: formats whose stored text orders as its values do, so `<` against a literal in another form is a mistake
_ORDERED_FORMATS = frozenset(("date", "time", "date-time"))
#: a rule nested deeper than this is not a rule the model compiled (FSM012 reports it); not walked further
_MAX_RULE_DEPTH = 128


def _literal_kind(value: Any) -> str | None:
    """The comparable kind of a scalar literal; None for null and for anything that is not a literal."""
    kind = type(value)
    if kind is bool:
        return "boolean"
    if kind is int or kind is float:
        return "number"
    if kind is str:
        return "string"
    return None


def _var(node: Any) -> tuple[str, bool, Any] | None:
    """``{"var": "k"}`` / ``{"var": ["k"]}`` / ``{"var": ["k", default]}`` → (k, has a default, the default)."""
    if type(node) is not dict or len(node) != 1 or "var" not in node:
        return None
    name, has_default, default = node["var"], False, None
    if type(name) is list:
        if not name or len(name) > 2:
            return None
        if len(name) == 2:
            has_default, default = True, name[1]
        name = name[0]
    if type(name) is not str or not name:
        return None  # the whole data, a list index, or a name computed at run time
    return name, has_default, default


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 4] + '..."'


def _values(declaration: KeyDeclaration, limit: int = 6) -> str:
    enum = declaration.enum or []
    shown = ", ".join(_show(v) for v in enum[:limit])
    return shown + (f", ... ({len(enum)} values)" if len(enum) > limit else "")


def _holds(op: str, value: Any, literal: Any) -> bool:
    """``value op literal`` with the engine's semantics (for a var's default, which the rule may return)."""
    if op == "==":
        return _loose_eq(value, literal)
    if op == "!=":
        return not _loose_eq(value, literal)
    if op == "===":
        return _strict_eq(value, literal)
    if op == "!==":
        return not _strict_eq(value, literal)
    if op == "<":
        return _lt(value, literal)
    if op == "<=":
        return _le(value, literal)
    if op == ">":
        return _lt(literal, value)
    return _le(literal, value)


def _never_in_range(op: str, literal: float, declaration: KeyDeclaration) -> str | None:
    """Why ``key op literal`` never holds for a value within the declared bounds, or None when it may."""
    low, high = declaration.minimum, declaration.maximum
    if op in ("==", "===") and low is not None and literal < low:
        return f"the declared minimum is {_number(low)}"
    if op in ("==", "===", ">=") and high is not None and literal > high:
        return f"the declared maximum is {_number(high)}"
    if op == ">" and high is not None and literal >= high:
        return f"the declared maximum is {_number(high)}"
    if op == "<" and low is not None and literal <= low:
        return f"the declared minimum is {_number(low)}"
    if op == "<=" and low is not None and literal < low:
        return f"the declared minimum is {_number(low)}"
    return None


def _stored_problem(declaration: KeyDeclaration, literal: str) -> tuple[str, str | None] | None:
    """Why no stored value of a string key equals ``literal`` (and the form it would be stored in), or None.

    The engine's own normalising and format rules decide; the ``pattern`` is not run (a hostile pattern can
    backtrack for ever on a crafted literal, and lint must stay fast on any file)."""
    stored = normalise(declaration, literal)
    if type(stored) is not str:
        return None
    if declaration.format is not None and format_problem(declaration, stored, detail=False) is not None:
        return f"it is not {_FORMAT_HINT[declaration.format]}, the declared format", None
    if declaration.min_length is not None and len(stored) < declaration.min_length:
        return f"it is shorter than the declared min_length ({declaration.min_length})", None
    if declaration.max_length is not None and len(stored) > declaration.max_length:
        return f"it is longer than the declared max_length ({declaration.max_length})", None
    if stored != literal:
        return f"the engine stores that value as {_show(stored)}", stored
    return None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class _Comparisons:
    """FSM027-FSM029 for one run: each comparison of a declared key with a literal."""

    def __init__(self, run: LintRun, declared: dict[str, KeyDeclaration]) -> None:
        self.run = run
        self.declared = declared
        self._enums: dict[int, frozenset[tuple[str, Any]] | None] = {}

    def lookup(self, path: str) -> KeyDeclaration | None:
        """The declaration a value read at ``path`` must satisfy: the key's own, or its items' for ``key.0``.

        A field of a declared object has no declaration of its own (the object's fields are not typed).
        """
        declaration = self.declared.get(path)
        if declaration is not None:
            return declaration
        parent, _, index = path.rpartition(".")
        if parent and index.isdigit():
            owner = self.declared.get(parent)
            if owner is not None and owner.type == "array":
                return owner.items
        return None

    def enum(self, declaration: KeyDeclaration) -> frozenset[tuple[str, Any]] | None:
        """The enum as (kind, value) pairs (so ``true`` is not ``1``), built once per declaration; None when
        the declaration has no enum or one of its values is a list or an object (compared by identity)."""
        key = id(declaration)
        if key not in self._enums:
            values = declaration.enum
            pairs = [(_literal_kind(v), v) for v in values or ()]
            usable = values is not None and all(kind is not None for kind, _ in pairs)
            self._enums[key] = frozenset((str(kind), v) for kind, v in pairs) if usable else None
        return self._enums[key]

    def walk(self, rule: Any, at: Path) -> None:
        """Judge every comparison of ``rule`` (whose path is ``at``); iterative, and paths into the rule are
        spelt out only for the operators that compare (most of a rule is literals and vars)."""
        stack: list[tuple[Any, Path]] = [(rule, at)]
        limit = len(at) + _MAX_RULE_DEPTH
        while stack:
            node, where = stack.pop()
            if len(where) > limit:
                continue
            if type(node) is list:
                stack.extend((item, (*where, i)) for i, item in enumerate(node) if type(item) in _CONTAINERS)
                continue
            if type(node) is not dict or len(node) != 1:
                continue  # a literal rule (logic: true), or an object of more than one key, which is a literal too
            ((op, args),) = node.items()
            if op == "var":
                continue
            if type(args) is not list:
                if type(args) in _CONTAINERS:
                    stack.append((args, (*where, op)))
                continue
            if op in _ITERATORS:
                # the body reads each item, not the context: only the collection (and reduce's initial value) do
                stack.extend((args[i], (*where, op, i)) for i in ((0, 2) if op == "reduce" else (0,)) if i < len(args))
                continue
            if op in _COMPARING:
                self.compare(op, args, (*where, op))
            for i, item in enumerate(args):
                kind = type(item)
                if kind is list or (kind is dict and "var" not in item):  # a var holds no comparison to judge
                    stack.append((item, (*where, op, i)))

    def compare(self, op: str, items: list[Any], at: Path) -> None:
        """One comparison operator whose arguments are ``items`` at path ``at``."""
        if op in _EQUALITY:
            if len(items) == 2:
                for one, other in ((0, 1), (1, 0)):
                    var = _var(items[one])
                    if var is not None:
                        self.pair(op, var, items[other], (at, other))
        elif op in _ORDER:
            if len(items) in (2, 3):
                for left in range(len(items) - 1):  # a chain: {"<": [0, {"var": "x"}, 10]} is 0 < x and x < 10
                    var = _var(items[left])
                    if var is not None:
                        self.pair(op, var, items[left + 1], (at, left + 1))
                    var = _var(items[left + 1])
                    if var is not None:
                        self.pair(_FLIP[op], var, items[left], (at, left))
        elif len(items) == 2:  # in, contains
            value, collection = (0, 1) if op == "in" else (1, 0)
            self.membership(op, items[value], items[collection], (*at, value), (*at, collection))

    def pair(self, op: str, var: tuple[str, bool, Any], literal: Any, place: Place, *, in_list: bool = False) -> None:
        """``key op literal`` (the var on the left), reported at the literal: item ``place[1]`` of the arguments
        at ``place[0]`` (a path is spelt out only for a finding)."""
        key, has_default, default = var
        literal_kind = _literal_kind(literal)
        if literal_kind is None or (has_default and default is not None and _literal_kind(default) is None):
            return  # null (a presence test), not a literal, or a default computed at run time
        declaration = self.lookup(key)
        if declaration is None or (declaration.dontcare and literal == DONTCARE):
            return  # a key declaring dontcare may hold "dontcare" whatever its type
        declared_kind = _KIND[declaration.type]
        if declared_kind != literal_kind:
            if not (has_default and _literal_kind(default) == literal_kind):
                self.mismatch(op, repr(key), declaration, literal, (*place[0], place[1]), in_list=in_list)
            return
        if has_default and _holds(op, default, literal):
            return  # the rule may see the default, for which the comparison holds
        if declaration.enum is not None:
            if op in _EQUALITY and literal != "":  # "" is how a rule says "nothing yet"
                self.not_in_enum(op, repr(key), declaration, literal, (*place[0], place[1]), in_list=in_list)
            elif (
                op in _ORDER
                and literal_kind == "number"
                and len(declaration.enum) <= _MAX_SUBSTRING_ENUM
                and not any(_holds(op, value, literal) for value in declaration.enum)
            ):
                self.run.add(
                    "condition-value-outside-declaration",
                    (*place[0], place[1]),
                    f"{key!r} {op} {_show(literal)} never holds: no declared value ({_values(declaration)}) is",
                    "compare with a value between the declared ones, or add values to the enum in context_keys",
                )
            return
        if literal_kind == "string":
            self.stored_form(op, key, declaration, literal, place, in_list=in_list)
            return
        if literal_kind == "number" and op not in _NEGATED:
            why = _never_in_range(op, literal, declaration)
            if (
                why is None
                and declaration.type == "integer"
                and op in ("==", "===")
                and not float(literal).is_integer()
            ):
                why = "the key is declared integer"
            if why is not None:
                shown_op = "===" if op == "===" else op
                self.run.add(
                    "condition-value-outside-declaration",
                    (*place[0], place[1]),
                    f"{key!r} {shown_op} {_show(literal)} never holds: {why}, and the engine stores only values "
                    "the declaration allows",
                    "compare with a value the declaration allows, or change it in context_keys",
                )

    def stored_form(
        self, op: str, key: str, declaration: KeyDeclaration, literal: str, place: Place, *, in_list: bool
    ) -> None:
        """A string the engine would refuse (format, length) or store in another form (trimmed, a date as
        YYYY-MM-DD, an email's domain in lower case): an equality with it is decided, and so is an ordering of
        dates or times against a literal not in their stored form."""
        if op in _ORDER and declaration.format not in _ORDERED_FORMATS:
            return
        if literal == "" or len(literal) > _MAX_JUDGED_LITERAL:
            return
        problem = _stored_problem(declaration, literal)
        if problem is None:
            return
        why, stored = problem
        if in_list:
            outcome = "that item never matches"
        elif op in _ORDER:
            outcome = f"`{op}` compares the stored text with one in another form"
        elif op in _NEGATED:
            outcome = "the comparison is always true"
        else:
            outcome = "the comparison is never true"
        self.run.add(
            "condition-value-outside-declaration",
            (*place[0], place[1]),
            f"{key!r} is compared with {_show(literal)}, but {why}; {outcome}",
            f"compare with {_show(stored)}" if stored is not None else "compare with a value the declaration allows",
        )

    def not_in_enum(
        self, op: str, label: str, declaration: KeyDeclaration, literal: Any, where: Path, *, in_list: bool
    ) -> None:
        enum = self.enum(declaration)
        if enum is None or (str(_literal_kind(literal)), literal) in enum:
            return
        if in_list:
            outcome = "that item never matches"
        elif op in _NEGATED:
            outcome = "the comparison is always true"
        else:
            outcome = "the comparison is never true"
        self.run.add(
            "condition-value-not-in-enum",
            where,
            f"{_show(literal)} is not one of the declared values of {label} ({_values(declaration)}); the engine "
            f"stores only those, so {outcome}",
            lambda: _enum_hint(declaration, literal),
        )

    def mismatch(
        self, op: str, label: str, declaration: KeyDeclaration, literal: Any, where: Path, *, in_list: bool
    ) -> None:
        literal_kind = _literal_kind(literal)
        if in_list or op in ("===", "!=="):
            outcome = "strict equality between different types is never true" + (
                "" if in_list else " (so `!==` is always true)" if op == "!==" else ""
            )
        elif op in _ORDER:
            outcome = "the two are converted to numbers to be ordered, which rarely means what was meant"
        else:
            outcome = "loose equality converts one side first, which rarely means what was meant"
        self.run.add(
            "condition-type-mismatch",
            where,
            f"compares {label}, declared as {declaration.type}, with the {literal_kind} {_show(literal)}: {outcome}",
            lambda: _type_hint(declaration, literal),
        )

    def membership(self, op: str, value: Any, collection: Any, value_at: Path, collection_at: Path) -> None:
        var = _var(value)
        if var is not None and type(collection) is list:
            for index, item in enumerate(collection):  # `in` compares with ===: each item is a comparison
                self.pair("===", var, item, (collection_at, index), in_list=True)
            return
        var = _var(collection)
        if var is None or var[1] or _literal_kind(value) is None:
            return  # not a declared collection against a literal (or one with a default: it may be anything)
        key = var[0]
        declaration = self.lookup(key)
        if declaration is None:
            return
        if declaration.type == "array":
            if declaration.items is not None:
                self._item(op, key, declaration.items, value, value_at)
            return
        if declaration.type == "string":
            self._substring(op, key, declaration, value, value_at)
            return
        if declaration.type == "object" and op == "contains":
            return  # contains tests an object's keys
        self.run.add(
            "condition-type-mismatch",
            collection_at,
            f"`{op}` looks for a substring of a string or an item of a list, but {key!r} is declared as "
            f"{declaration.type}, so it is never true",
            'use a comparison such as {"==": [...]}'
            + (f', or {{"contains": [{{"var": "{key}"}}, "field"]}} to test a key of the object')
            * (declaration.type == "object"),
        )

    def _item(self, op: str, key: str, items: KeyDeclaration, value: Any, where: Path) -> None:
        """A literal looked for in a declared list: it must be of the items' type and, with an enum, one of it."""
        label = f"the items of {key!r}"
        if _KIND[items.type] != _literal_kind(value):
            self.mismatch("===", label, items, value, where, in_list=False)
        elif items.enum is not None and value != "":
            self.not_in_enum("===", label, items, value, where, in_list=False)

    def _substring(self, op: str, key: str, declaration: KeyDeclaration, value: Any, where: Path) -> None:
        enum = declaration.enum
        if enum is None or len(enum) > _MAX_SUBSTRING_ENUM or type(value) is not str or not value:
            return
        if any(value in v for v in enum if isinstance(v, str)):
            return
        self.run.add(
            "condition-value-not-in-enum",
            where,
            f"no declared value of {key!r} ({_values(declaration)}) contains {_show(value)}; the engine stores "
            f"only those, so `{op}` is never true",
            lambda: _enum_hint(declaration, value),
        )


def _enum_hint(declaration: KeyDeclaration, literal: Any) -> str:
    """Point at the stored spelling when the literal is one the engine would normalise to it."""
    if isinstance(literal, str):
        folded = fold(literal)
        canonical = declaration.enum_lookup.get(folded)
        if canonical is not None:
            how = "is spelt" if fold(str(canonical)) == folded else "is a synonym of"
            return f"values are stored in their declared spelling: {_show(literal)} {how} {_show(canonical)}"
        enum = declaration.enum or ()
        if len(enum) <= _MAX_SUBSTRING_ENUM:  # did-you-mean compares with every value: bounded like substrings
            close = _did_you_mean(literal, [v for v in enum if isinstance(v, str)])
            if close:
                return close
    return "compare with one of the declared values, or add the value to the enum in context_keys"


def _type_hint(declaration: KeyDeclaration, literal: Any) -> str:
    kind = _KIND[declaration.type]
    if kind == "string" and not isinstance(literal, bool):
        return f"compare with the string {_show(str(literal))}, or declare the key as {_literal_kind(literal)}"
    if kind == "number" and isinstance(literal, str):
        try:
            number = float(literal)
        except ValueError:
            pass
        else:
            if number == number and abs(number) != float("inf"):
                return f"compare with the number {_number(number)}, or declare the key as a string"
    if kind == "boolean":
        return "compare with true or false (the engine stores yes/no answers as booleans)"
    return f"compare with a {declaration.type} value, or change the key's type in context_keys"


# --- the checks -----------------------------------------------------------------------------------


def comparisons(run: LintRun) -> None:
    """FSM027-FSM029: conditions comparing a declared key with a literal its declaration excludes."""
    if run.partial:
        return
    declared = run.declarations()
    if not declared:
        return
    checker = _Comparisons(run, declared)
    for parts, condition in run.conditions():
        rule = condition.get("logic")
        if rule is None or parts in run.logic_reported:
            continue
        checker.walk(rule, (*parts, "logic"))
