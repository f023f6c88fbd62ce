"""``llm-fsm index``: build or refresh the full-text index the built-in retrievers read (a SQLite file, or tables in
a PostgreSQL database)."""

from __future__ import annotations

import click

from llm_fsm.cli._app import EXIT_FINDINGS, GuardedCommand
from llm_fsm.retrieval._index import DEFAULT_MAX_BYTES

_POSTGRES = ("postgresql://", "postgres://")


@click.command("index", cls=GuardedCommand)
@click.argument("docs", type=click.Path(file_okay=False))
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False),
    required=True,
    help="The index to create or bring up to date: a SQLite file, or a postgresql:// URL.",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_BYTES,
    show_default=True,
    help="Skip (and report) files larger than this; they are never read whole.",
)
@click.option(
    "--table",
    default=None,
    help="PostgreSQL only: the index's table, [schema.]name (default llm_fsm_docs).",
)
@click.option(
    "--language",
    default=None,
    help="PostgreSQL only: the text search configuration (stemming, stop words; default english).",
)
@click.pass_context
def index_command(
    ctx: click.Context, docs: str, out: str, max_bytes: int, table: str | None, language: str | None
) -> None:
    """Index the Markdown, text and HTML files under DOCS for FTSRetriever
    (or PostgresRetriever, when --out is a postgresql:// URL).

    Sections are chunked by heading and ranked by BM25 (SQLite FTS5, no
    service needed) or by ts_rank_cd (PostgreSQL full-text search). Run it
    again after editing DOCS: only files that changed are read, deleted
    files are removed, and a chunk keeps its id while its file, heading and
    position stay the same. Files that could not be indexed as they are
    (not UTF-8, too large, unreadable) are listed, and the exit status is
    then 1.

    \b
    Examples:
        llm-fsm index docs/ --out index.db
        llm-fsm index docs/ --out postgresql://app@db/support --table kb
    """
    if out.startswith(_POSTGRES):
        from llm_fsm.retrieval._pg_index import DEFAULT_LANGUAGE, DEFAULT_TABLE, build_postgres_index, describe

        report = build_postgres_index(
            docs, out, table=table or DEFAULT_TABLE, language=language or DEFAULT_LANGUAGE, max_bytes=max_bytes
        )  # a database that is down or tables that are not an index exit 2
        target = f"{describe(out)} table {table or DEFAULT_TABLE}"  # never the URL's password
    else:
        if table is not None or language is not None:
            raise click.UsageError("--table and --language apply to a postgresql:// --out only")
        from llm_fsm.retrieval._index import build_index

        report = build_index(docs, out, max_bytes=max_bytes)  # a missing folder or a foreign --out exits 2
        target = out
    for problem in report.problems:
        click.echo(f"{problem.path}: {problem.reason}", err=True)
    counts = (
        f"{len(report.added)} added, {len(report.updated)} updated, {len(report.removed)} removed, "
        f"{len(report.unchanged)} unchanged"
    )
    click.echo(f"{target}: {counts}; {report.chunks} chunks")
    if report.problems:
        ctx.exit(EXIT_FINDINGS)
