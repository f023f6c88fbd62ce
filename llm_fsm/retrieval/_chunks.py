"""Documents into chunks: the unit a retriever returns and a reply cites.

A chunk is a section's text (a Markdown or HTML heading and what follows it, up to the next heading) cut into
paragraph groups small enough to put several into one prompt. Chunks keep their heading path ("Billing > Refunds")
because that is what tells a reader, and the model, where a passage comes from.

HTML is read with the standard library's ``html.parser``: nothing is fetched or executed, and the text of
``<script>``, ``<style>`` and ``<template>`` never becomes a chunk (a page's code is not its content, and indexing it
would let a page smuggle text into prompts that no reader of the page ever sees).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser

#: a chunk's most characters: a handful fit a prompt's knowledge budget, and one still holds a whole paragraph
CHUNK_CHARS = 1500

#: the suffixes indexed, by how they are read
MARKDOWN_SUFFIXES = (".md", ".markdown")
TEXT_SUFFIXES = (".txt", ".text", ".rst")
HTML_SUFFIXES = (".html", ".htm")
SUFFIXES = MARKDOWN_SUFFIXES + TEXT_SUFFIXES + HTML_SUFFIXES

#: level 0 is a paragraph, 1-6 a heading of that level
Block = tuple[int, str]

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
#: YAML front matter: metadata for a site generator, not text a reader sees
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_HIDDEN_TAGS = frozenset({"script", "style", "template"})
_BLOCK_TAGS = frozenset(
    {"p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "pre", "blockquote", "hr", "dd", "dt"}
    | {"header", "footer", "main", "nav", "aside", "form", "figure", "figcaption", "title", "body", "td", "th"}
)
_HEADING_TAGS = {f"h{level}": level for level in range(1, 7)}


@dataclass(frozen=True)
class Chunk:
    """``heading`` is the path of headings above the text (empty before the first); ``index`` counts the chunks of
    the same heading path in the document, so heading and index name a chunk even when a section repeats."""

    heading: str
    text: str
    index: int


def chunk_document(name: str, text: str) -> list[Chunk]:
    """The chunks of a document, read by its name's suffix (Markdown, HTML, or else plain text)."""
    lowered = name.lower()
    if lowered.endswith(MARKDOWN_SUFFIXES):
        return _chunks(_markdown_blocks(text))
    if lowered.endswith(HTML_SUFFIXES):
        return _chunks(_html_blocks(text))
    return _chunks((0, paragraph) for paragraph in re.split(r"\n[ \t]*\n", text))


def html_to_text(page: str) -> str:
    """A page's visible text, headings and paragraphs separated by blank lines."""
    return "\n\n".join(text for _, text in _html_blocks(page))


def _markdown_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines: list[str] = []
    fence: str | None = None
    for line in _FRONT_MATTER.sub("", text, count=1).splitlines():
        opening = _FENCE.match(line)
        if fence is not None:
            lines.append(line)
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            lines.append(line)
            continue
        underline = _SETEXT.match(line)
        if underline and lines:  # the paragraph above was a heading ("Title" over "=====")
            blocks.append((1 if underline.group(1)[0] == "=" else 2, " ".join(part.strip() for part in lines)))
            lines = []
            continue
        heading = _HEADING.match(line)
        if heading or not line.strip():
            blocks.append((0, "\n".join(lines)))
            lines = []
            if heading:
                blocks.append((len(heading.group(1)), (heading.group(2) or "").strip()))
            continue
        lines.append(line)
    blocks.append((0, "\n".join(lines)))
    return blocks


class _VisibleText(HTMLParser):
    """Collects blocks of visible text; ``hidden`` counts the open script/style/template elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self._parts: list[str] = []
        self._level = 0
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN_TAGS:
            self._hidden += 1
        elif tag in _HEADING_TAGS:
            self.flush()
            self._level = _HEADING_TAGS[tag]
        elif tag in _BLOCK_TAGS:
            self.flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN_TAGS:
            self._hidden = max(0, self._hidden - 1)
        elif tag in _HEADING_TAGS or tag in _BLOCK_TAGS:
            self.flush()

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self._parts.append(data)

    def flush(self) -> None:
        text = " ".join("".join(self._parts).split())
        if text or self._level:
            self.blocks.append((self._level, text))
        self._parts, self._level = [], 0


def _html_blocks(page: str) -> list[Block]:
    parser = _VisibleText()
    parser.feed(page)
    parser.close()  # text left inside an unclosed <script> arrives here, still hidden
    parser.flush()
    return [(level, text) for level, text in parser.blocks if text]


def _chunks(blocks: Iterable[Block]) -> list[Chunk]:
    chunks: list[Chunk] = []
    path: list[tuple[int, str]] = []
    section: list[str] = []
    seen: dict[str, int] = {}

    def close_section() -> None:
        heading = " > ".join(title for _, title in path)
        for text in _groups(section):
            chunks.append(Chunk(heading=heading, text=text, index=seen.get(heading, 0)))
            seen[heading] = seen.get(heading, 0) + 1
        section.clear()

    for level, text in blocks:
        if level:
            close_section()
            path[:] = [entry for entry in path if entry[0] < level]
            path.append((level, text))
        elif text.strip():
            section.append(text.strip())
    close_section()
    return chunks


def _groups(paragraphs: list[str]) -> list[str]:
    """Paragraphs joined into groups of at most CHUNK_CHARS; a longer paragraph is cut at spaces."""
    groups: list[str] = []
    current = ""
    for paragraph in (piece for whole in paragraphs for piece in _pieces(whole)):
        if current and len(current) + 2 + len(paragraph) > CHUNK_CHARS:
            groups.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        groups.append(current)
    return groups


def _pieces(paragraph: str) -> list[str]:
    pieces: list[str] = []
    while len(paragraph) > CHUNK_CHARS:
        cut = paragraph.rfind(" ", 0, CHUNK_CHARS)
        cut = cut if cut > 0 else CHUNK_CHARS
        pieces.append(paragraph[:cut].rstrip())
        paragraph = paragraph[cut:].lstrip()
    if paragraph:
        pieces.append(paragraph)
    return pieces


__all__ = ["CHUNK_CHARS", "SUFFIXES", "Chunk", "chunk_document", "html_to_text"]
