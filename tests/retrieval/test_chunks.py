"""Documents become chunks a reader can cite: a Markdown section, a paragraph group, an HTML page's visible text."""

from __future__ import annotations

from llm_fsm.retrieval._chunks import chunk_document, html_to_text


def test_markdown_is_chunked_by_heading_with_the_heading_path_kept() -> None:
    text = "# Billing\nIntro.\n\n## Refunds\nThirty days.\n\n## Invoices\nMonthly.\n"
    chunks = chunk_document("guide.md", text)
    assert [(c.heading, c.text) for c in chunks] == [
        ("Billing", "Intro."),
        ("Billing > Refunds", "Thirty days."),
        ("Billing > Invoices", "Monthly."),
    ]


def test_a_hash_inside_a_code_fence_is_not_a_heading() -> None:
    chunks = chunk_document("a.md", "# Setup\n```sh\n# not a heading\nrun\n```\n")
    assert [c.heading for c in chunks] == ["Setup"]
    assert "# not a heading" in chunks[0].text


def test_plain_text_is_chunked_by_paragraphs_up_to_a_size() -> None:
    paragraphs = [f"paragraph {i} " + "word " * 100 for i in range(10)]
    chunks = chunk_document("notes.txt", "\n\n".join(paragraphs))
    assert len(chunks) > 1
    assert all(len(c.text) <= 1600 for c in chunks)
    assert "".join(c.text for c in chunks).count("paragraph") == 10


def test_html_keeps_visible_text_and_never_the_text_of_scripts_or_styles() -> None:
    page = (
        "<html><head><style>body { color: secretstyle; }</style><script>alert('secretscript')</script></head>"
        "<body><h1>Refunds</h1><p>Thirty <b>days</b>.</p><script type='x'>var secretinline = 1;</script></body></html>"
    )
    text = html_to_text(page)
    assert "secretstyle" not in text and "secretscript" not in text and "secretinline" not in text
    chunks = chunk_document("page.html", page)
    assert [(c.heading, c.text) for c in chunks] == [("Refunds", "Thirty days.")]


def test_an_unclosed_script_hides_the_rest_of_the_page_rather_than_leaking_it() -> None:
    assert "leak" not in html_to_text("<p>Shown</p><script>leak = 1; <p>leak</p>")


def test_setext_headings_are_headings() -> None:
    chunks = chunk_document("a.md", "Billing\n=======\nIntro.\n\nRefunds\n-------\nThirty days.\n")
    assert [(c.heading, c.text) for c in chunks] == [("Billing", "Intro."), ("Billing > Refunds", "Thirty days.")]


def test_front_matter_is_not_indexed() -> None:
    chunks = chunk_document("a.md", "---\ntitle: Secret draft\n---\n# Refunds\nThirty days.\n")
    assert [(c.heading, c.text) for c in chunks] == [("Refunds", "Thirty days.")]


def test_a_thematic_break_after_a_blank_line_is_text_not_a_heading() -> None:
    chunks = chunk_document("a.md", "# A\nOne.\n\n---\n\nTwo.\n")
    assert [c.heading for c in chunks] == ["A"]
