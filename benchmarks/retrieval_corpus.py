"""The corpus and the labelled questions of ``retrieval.py``, generated offline from real public text.

Documents that answer (the labelled ones): the service schemas of the Schema-Guided Dialogue dataset (SGD, the
subset in ``../shared/sgd``; Rastogi et al., AAAI 2020; CC BY-SA 4.0, see that folder's README), one Markdown
file per service, one section per intent and one per slot, worded from the schema's own descriptions.

Questions: the real user utterances of SGD's dialogues, never taken from the documents, labelled by the dataset's
own per-turn annotation:

- ``intent``: the user turn where a frame's ``active_intent`` first becomes an intent ("I'm looking for somewhere
  to eat vegetarian food." -> Restaurants_2's FindRestaurants); a hit is that intent's section;
- ``slot``: a user turn whose ``requested_slots`` is not empty ("Do they have live music?" ->
  Restaurants_2's has_live_music); a hit is the section of any slot asked for.

Distractors, real text that answers none of them, to reach 1,000 and 100,000 chunks:

1. only with ``same_domain``: the SYSTEM turns of the same dialogues (CC BY-SA 4.0). Same domain, same words,
   the hardest distractors there are ("What city would you like to find a restaurant in?"): not what a docs
   folder holds, so a variant of its own;
2. docstring paragraphs and comment blocks of the Python standard library (PSF License);
3. past those, the same from the installed packages whose metadata declares a permissive licence (MIT, BSD,
   Apache 2.0, ISC or PSF), in name order; each keeps its own licence. Which packages are installed varies
   by machine, so the 100,000-chunk figures say how many chunks came from where.

Anything derived from SGD keeps its attribution and licence: the generated folder holds SGD's README and
LICENSE beside the rendered schemas.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from llm_fsm.retrieval._chunks import CHUNK_CHARS, chunk_document

#: licences a distractor package may have: text we may copy into a benchmark's temporary folder and measure
PERMISSIVE = re.compile(r"\b(MIT|BSD|Apache|ISC|PSF|Python Software Foundation)\b", re.IGNORECASE)
#: the most characters of one distractor: one section is then one chunk, as the labelled sections are
DISTRACTOR_CHARS = min(1400, CHUNK_CHARS - 100)
#: distractor sections per generated file
SECTIONS_PER_FILE = 2000

_WORD = re.compile(r"[A-Za-z]{3,}")
_MARKDOWN_START = re.compile(r"^(#|=|-|\*|>|`{3}|~{3}|\d+\.)")


@dataclass(frozen=True)
class Question:
    """A user's utterance and the sections that answer it (sources as the retriever names them)."""

    text: str
    kind: str  # "intent" or "slot"
    service: str
    answers: frozenset[str]


@dataclass
class Corpus:
    """A generated folder of documents holding exactly ``chunks`` chunks, and where they came from."""

    folder: Path
    chunks: int
    by_origin: dict[str, int] = field(default_factory=dict)


def _words(name: str) -> str:
    return name.replace("_", " ")


def render_service(service: dict[str, Any]) -> str:
    """One service's schema as a help page: the service, then a section per intent and per slot."""
    name = service["service_name"]
    lines = [f"# {name}", "", f"{service['description']}.", ""]
    for intent in service["intents"]:
        lines += [f"## {intent['name']}", "", f"{intent['description']}."]
        required = ", ".join(_words(s) for s in intent["required_slots"])
        optional = ", ".join(_words(s) for s in intent["optional_slots"])
        results = ", ".join(_words(s) for s in intent["result_slots"])
        lines += ["", f"Needs: {required}." if required else "Needs nothing."]
        if optional:
            lines.append(f"Optional: {optional}.")
        if results:
            lines.append(f"Tells you: {results}.")
        lines.append("")
    for slot in service["slots"]:
        lines += [f"## {slot['name']}", "", f"{slot['description']}."]
        if slot.get("possible_values"):
            lines.append(f"Values: {', '.join(slot['possible_values'])}.")
        lines.append("")
    return "\n".join(lines)


def _source(service: str, section: str) -> str:
    return f"services/{service}.md > {service} > {section}"


def load_questions(data: Path) -> list[Question]:
    """The labelled questions of every dialogue, in the dataset's order."""
    questions: list[Question] = []
    for dialogue in json.loads((data / "dialogues.json").read_text(encoding="utf-8")):
        active: dict[str, str] = {}
        for turn in dialogue["turns"]:
            if turn["speaker"] != "USER":
                continue
            for frame in turn["frames"]:
                service, state = frame["service"], frame.get("state", {})
                intent = state.get("active_intent", "NONE")
                if intent != "NONE" and active.get(service) != intent:
                    answers = frozenset({_source(service, intent)})
                    questions.append(Question(turn["utterance"], "intent", service, answers))
                active[service] = intent
                if state.get("requested_slots"):
                    answers = frozenset(_source(service, slot) for slot in state["requested_slots"])
                    questions.append(Question(turn["utterance"], "slot", service, answers))
    return questions


def _system_turns(data: Path) -> Iterator[tuple[str, str]]:
    for dialogue in json.loads((data / "dialogues.json").read_text(encoding="utf-8")):
        for number, turn in enumerate(dialogue["turns"], 1):
            if turn["speaker"] == "SYSTEM" and turn["utterance"].strip():
                yield f"Dialogue {dialogue['dialogue_id']}, turn {number}", turn["utterance"].strip()


def _prose(text: str) -> str | None:
    """``text`` as one line of prose fit for a section, or None when it is too short, code-like or Markdown."""
    text = " ".join(text.split())
    if len(text) < 50 or len(_WORD.findall(text)) < 6 or _MARKDOWN_START.match(text):
        return None
    if len(text) > DISTRACTOR_CHARS:
        text = text[:DISTRACTOR_CHARS].rsplit(" ", 1)[0]
    return text


def _python_text(path: Path, module: str) -> Iterator[tuple[str, str]]:
    """Docstring paragraphs and comment blocks of one Python file, as (heading, text)."""
    try:
        source = path.read_bytes().decode("utf-8", errors="replace")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            docstring = ast.get_docstring(node)
            name = module if isinstance(node, ast.Module) else f"{module}.{node.name}"
            for part, paragraph in enumerate(re.split(r"\n\s*\n", docstring or ""), 1):
                yield f"{name} ({part})", paragraph
    block: list[str] = []
    for number, line in enumerate([*source.splitlines(), ""], 1):
        stripped = line.strip()
        if stripped.startswith("#") and not stripped.startswith("#!"):
            block.append(stripped.lstrip("#").strip())
        elif block:
            yield f"{module}, comment before line {number}", " ".join(block)
            block = []


def _stdlib_files() -> Iterator[tuple[Path, str]]:
    root = Path(sysconfig.get_paths()["stdlib"])
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in {"site-packages", "dist-packages", "__pycache__"})
        for name in sorted(files):
            if name.endswith(".py"):
                path = Path(folder) / name
                yield path, path.relative_to(root).with_suffix("").as_posix().replace("/", ".")


def permissive_licence(dist: metadata.Distribution) -> str | None:
    """The licence a distribution's metadata declares, when it is a permissive one; else None."""
    meta = dist.metadata
    declared = [meta["License-Expression"] or "", (meta["License"] or "").split("\n")[0][:80]]
    declared += [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    for text in declared:
        if text and PERMISSIVE.search(text) and "GPL" not in text.upper():
            return text
    return None


def _package_files() -> Iterator[tuple[Path, str, str]]:
    seen: set[str] = set()
    dists = sorted(metadata.distributions(), key=lambda d: (d.metadata["Name"] or "").lower())
    for dist in dists:
        name = (dist.metadata["Name"] or "").lower()
        if not name or name in seen or name in {"llm-fsm", "llm_fsm"}:
            continue
        seen.add(name)
        if permissive_licence(dist) is None:
            continue
        for file in sorted(dist.files or [], key=str):
            if file.suffix == ".py":
                yield Path(str(dist.locate_file(file))), file.with_suffix("").as_posix().replace("/", "."), name


def distractors(data: Path, *, same_domain: bool = False) -> Iterator[tuple[str, str, str]]:
    """(origin, heading, text) of every distractor, in a fixed order, each text once."""
    seen: set[str] = set()
    for heading, text in _system_turns(data) if same_domain else ():
        yield "sgd system turns", heading, " ".join(text.split())
    for path, module in _stdlib_files():
        for heading, raw in _python_text(path, module):
            prose = _prose(raw)
            if prose is not None and prose not in seen:
                seen.add(prose)
                yield "python stdlib", heading, prose
    for path, module, package in _package_files():
        for heading, raw in _python_text(path, module):
            prose = _prose(raw)
            if prose is not None and prose not in seen:
                seen.add(prose)
                yield f"package {package}", heading, prose


def build_corpus(data: Path, folder: Path, chunks: int, *, same_domain: bool = False) -> Corpus:
    """Write ``folder``: SGD's rendered schemas plus distractors, exactly ``chunks`` chunks in all."""
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "services").mkdir(parents=True)
    for notice in ("README.md", "LICENSE.txt"):  # CC BY-SA: what is derived keeps the attribution
        if (data / notice).is_file():
            shutil.copyfile(data / notice, folder / "services" / f"SGD-{notice}.notice")  # not indexed
    corpus = Corpus(folder, chunks)
    for service in json.loads((data / "schema.json").read_text(encoding="utf-8")):
        text = render_service(service)
        (folder / "services" / f"{service['service_name']}.md").write_text(text, encoding="utf-8")
        corpus.by_origin["sgd schemas (labelled)"] = corpus.by_origin.get("sgd schemas (labelled)", 0) + len(
            chunk_document("x.md", text)
        )
    left = chunks - sum(corpus.by_origin.values())
    if left < 0:
        raise ValueError(f"{chunks} chunks cannot hold the {chunks - left} labelled ones")
    sections: list[str] = []
    files = 0

    def flush() -> None:
        nonlocal files
        if sections:
            files += 1
            (folder / f"distractors_{files:03d}.md").write_text("\n".join(sections), encoding="utf-8")
            sections.clear()

    for origin, heading, text in distractors(data, same_domain=same_domain) if left else ():
        key = "python packages (permissive licences)" if origin.startswith("package ") else origin
        corpus.by_origin[key] = corpus.by_origin.get(key, 0) + 1
        sections.append(f"## {heading}\n\n{text}\n")
        if len(sections) == SECTIONS_PER_FILE:
            flush()
        left -= 1
        if not left:
            break
    flush()
    if left:
        raise ValueError(f"only {chunks - left} chunks of real text found here; {chunks} were asked for")
    return corpus


__all__ = ["Corpus", "Question", "build_corpus", "distractors", "load_questions", "permissive_licence"]
