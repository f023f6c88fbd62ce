"""``llm-fsm index``: build or refresh the full-text index the built-in retriever reads."""

from __future__ import annotations

import click

from llm_fsm.cli._app import EXIT_FINDINGS, GuardedCommand
from llm_fsm.retrieval._index import DEFAULT_MAX_BYTES


@click.command("index", cls=GuardedCommand)
@click.argument("docs", type=click.Path(file_okay=False))
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    required=True,
    help="The index file to create or bring up to date (SQLite).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Skip (and report) files larger than this; they are never read whole.",
)
@click.pass_context
def index_command(ctx: click.Context, docs: str, out: str, max_bytes: int) -> None:
    """Index the Markdown, text and HTML files under DOCS for FTSRetriever.

    Sections are chunked by heading and ranked by BM25 (SQLite FTS5, no
    service needed). Run it again after editing DOCS: only files that
    changed are read, deleted files are removed, and a chunk keeps its id
    while its file, heading and position stay the same. Files that could
    not be indexed as they are (not UTF-8, too large, unreadable) are
    listed, and the exit status is then 1.

    \b
    Example:
        llm-fsm index docs/ --out index.db
    """
    from llm_fsm.retrieval._index import build_index

    report = build_index(docs, out, max_bytes=max_bytes)  # a missing folder or a foreign --out exits 2
    for problem in report.problems:
        click.echo(f"{problem.path}: {problem.reason}", err=True)
    counts = (
        f"{len(report.added)} added, {len(report.updated)} updated, {len(report.removed)} removed, "
        f"{len(report.unchanged)} unchanged"
    )
    click.echo(f"{out}: {counts}; {report.chunks} chunks")
    if report.problems:
        ctx.exit(EXIT_FINDINGS)
