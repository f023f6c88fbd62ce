"""JSON lines found on demand equal the lines of a full scan of the text, on random documents.

``JsonLines`` locates a path's line only when a finding needs it. The reference
below is the full token scan it replaced (with its fix for repeated keys):
slow, simple and obviously right. Documents are generated as text, so they
carry what ``json.dumps`` never writes: repeated keys, escapes in keys, any
whitespace (CR LF, tabs, none) between tokens.
"""

from __future__ import annotations

import json
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_fsm.definition._documents import JsonLines, Path, parse_json

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+', re.S)


def reference_lines(text: str) -> tuple[dict[Path, int], tuple[tuple[Path, int, int], ...]]:
    """Every path's line and every repeated key, by one walk over all tokens."""
    lines: dict[Path, int] = {}
    duplicates: list[tuple[Path, int, int]] = []
    stack: list[list[Any]] = []  # [is_object, path, expecting_key, current_key_or_index, seen_keys]
    line, prev = 1, 0
    for match in _TOKEN.finditer(text):
        line += text.count("\n", prev, match.start())
        prev = match.start()
        tok = match.group()
        top = stack[-1] if stack else None
        if top is not None and top[0] and top[2]:
            if tok[0] == '"':
                key = json.loads(tok)
                path = (*top[1], key)
                if key in top[4]:
                    duplicates.append((path, line, lines[path]))
                    for stale in [p for p in lines if len(p) > len(path) and p[: len(path)] == path]:
                        del lines[stale]
                else:
                    top[4].add(key)
                lines[path] = line
                top[3], top[2] = key, False
            elif tok == "}":
                stack.pop()
            continue
        if tok == ":":
            continue
        if tok == ",":
            if top is not None:
                if top[0]:
                    top[2] = True
                else:
                    top[3] += 1
            continue
        if tok in ("}", "]"):
            stack.pop()
            continue
        path = () if top is None else (*top[1], top[3])
        lines.setdefault(path, line)
        if tok == "{":
            stack.append([True, path, True, None, set()])
        elif tok == "[":
            stack.append([False, path, False, 0, None])
    return lines, tuple(duplicates)


def reference_line_for(lines: dict[Path, int], parts: Path) -> int | None:
    for end in range(len(parts), -1, -1):
        if parts[:end] in lines:
            return lines[parts[:end]]
    return None


# --- documents as text ------------------------------------------------------------------

SPACE = st.sampled_from(["", " ", "\n", "  ", "\r\n", "\t", "\n\n  ", " \n"])
KEYS = st.sampled_from(["a", "b", "id", "states", "x y", 'q"uote', "back\\slash", "é", "0", "1", "[", "{", ":,"])
SCALARS = st.sampled_from(["1", "-2.5e3", "true", "false", "null", '"s"', '"a\\nb"', '"[{,:}]"', '""', "0"])


@st.composite
def documents(draw: st.DrawFn, depth: int = 4) -> str:
    def space() -> str:
        return draw(SPACE)

    def value(level: int) -> str:
        kind = draw(st.sampled_from(["scalar", "array", "object"] if level < depth else ["scalar"]))
        if kind == "scalar":
            return draw(SCALARS)
        if kind == "array":
            items = [value(level + 1) for _ in range(draw(st.integers(0, 4)))]
            return "[" + space() + ("," + space()).join(items) + space() + "]"
        members = []
        keys = draw(st.lists(KEYS, max_size=5))
        for i, key in enumerate(keys):
            # a repeated key's replaced values are scalars: repeats inside a value that does not count are not listed
            member = value(level + 1) if key not in keys[i + 1 :] else draw(SCALARS)
            quoted = json.dumps(key, ensure_ascii=draw(st.booleans()))  # é or \\u00e9
            members.append(quoted + space() + ":" + space() + member)
        return "{" + space() + ("," + space()).join(members) + space() + "}"

    return space() + value(0) + space()


def all_paths(lines: dict[Path, int]) -> list[Path]:
    extra = [(*p, "missing") for p in lines] + [(*p, 99) for p in lines] + [(*p, True) for p in lines]
    return [*lines, *extra]


@settings(max_examples=400, deadline=None)
@given(documents())
def test_lines_found_on_demand_equal_a_full_scan(text: str) -> None:
    doc = parse_json(text)
    assert doc.data == json.loads(text)
    lines, duplicates = reference_lines(text)
    assert dict(doc.lines) == lines
    assert doc.duplicate_keys == duplicates
    assert doc.more_duplicate_keys == 0


@settings(max_examples=400, deadline=None)
@given(documents(), st.data())
def test_each_lookup_alone_gives_the_line_of_the_nearest_existing_ancestor(text: str, data: st.DataObject) -> None:
    lines, _ = reference_lines(text)
    paths = data.draw(st.lists(st.sampled_from(all_paths(lines)), max_size=6))
    doc = parse_json(text)  # fresh: each lookup starts from what the earlier ones located
    for parts in paths:
        flag = next((i for i, part in enumerate(parts) if part is True), None)
        if flag is None:
            assert doc.line_for(parts) == reference_line_for(lines, parts)
            assert doc.lines.get(parts) == lines.get(parts)
        else:  # a bool is no index here, though a dict of paths took True for 1
            assert doc.line_for(parts) == reference_line_for(lines, parts[:flag])
            assert doc.lines.get(parts) is None


def test_a_lookup_steps_over_what_comes_before_it_and_no_more() -> None:
    states = {f"s{i}": {"id": f"s{i}", "transitions": [{"target_state": "x"}] * 3} for i in range(1000)}
    text = json.dumps({"name": "n", "states": states, "after": [1, 2]}, indent=1)
    lines = parse_json(text).lines
    assert isinstance(lines, JsonLines)
    assert (
        lines.line_for(("states", "s2", "transitions", 1)) == reference_lines(text)[0]["states", "s2", "transitions", 1]
    )
    assert lines.skipped < 10  # name, s0, s1, id of s2, transitions[0]: the other 997 states were never looked at
    lines.line_for(("after", 1))
    assert lines.skipped < 15  # the rest of states went by in one call of the C scanner, then after[0]


def test_a_lookup_does_not_step_over_the_value_it_goes_into() -> None:
    text = '{"name": "n", "items": [' + ", ".join(["[[]]"] * 100_000) + '],\n"after": 1}'
    lines = parse_json(text).lines
    assert isinstance(lines, JsonLines)
    assert lines.line_for(("items", 5, 0)) == 1
    assert lines.skipped == 6  # "name", items[0] to items[4]; neither the 100,000 items nor items[5]
    assert lines.line_for(("after",)) == 2
    assert lines.skipped == 7  # the rest of items went by in one call of the C scanner


def test_repeated_keys_beyond_the_listed_ones_are_counted() -> None:
    text = "{" + ",".join(['"a": 1'] * 3_000) + "}"
    doc = parse_json(text)
    assert len(doc.duplicate_keys) == 1_000
    assert doc.more_duplicate_keys == 1_999
    assert doc.duplicate_keys[0] == (("a",), 1, 1)


def test_a_value_nested_deeper_than_the_scanner_can_follow_is_stepped_over_by_counting_brackets() -> None:
    import sys

    depth = sys.getrecursionlimit() - 60
    text = '{"deep": ' + "[" * depth + "]" * depth + ',\n"after": 1}'
    doc = parse_json(text)

    def nested(levels: int) -> int | None:
        if levels == 0:
            return doc.line_for(("after",))
        return nested(levels - 1)

    assert nested(100) == 2  # called from deep in a stack, so the C scanner runs out of room on the way
