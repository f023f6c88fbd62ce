"""``PostgresRetriever``: snippets from an index ``build_postgres_index`` built, ranked by ``ts_rank_cd``; the user's
words are never tsquery syntax, and a database that cannot answer is a typed error."""

from __future__ import annotations

from pathlib import Path

import pytest
from stores.postgres_server import PostgresServer, free_port

from llm_fsm.errors import RetrievalError, RetrievalIndexError
from llm_fsm.retrieval import PostgresRetriever, Retriever, build_postgres_index


@pytest.fixture
def retriever(docs: Path, pg_url: str, pg_table: str) -> PostgresRetriever:
    build_postgres_index(docs, pg_url, table=pg_table)
    return PostgresRetriever(pg_url, table=pg_table)


def test_it_is_a_retriever(retriever: PostgresRetriever) -> None:
    assert isinstance(retriever, Retriever)


def test_the_best_chunk_for_a_query_comes_first(retriever: PostgresRetriever) -> None:
    snippets = retriever.retrieve("how long does express shipping take?", k=3)
    assert snippets[0].source == "shipping.md > Shipping"
    assert "express shipping" in snippets[0].text
    assert [s.score for s in snippets] == sorted((s.score for s in snippets), reverse=True)


def test_any_word_of_the_query_may_match(retriever: PostgresRetriever) -> None:
    sources = {s.source for s in retriever.retrieve("refunds desk", k=5)}
    assert {"refunds.md > Refunds", "contact.txt"} <= sources


def test_at_most_k_snippets_come_back(retriever: PostgresRetriever) -> None:
    assert len(retriever.retrieve("refunds shipping desk sale", k=2)) == 2


def test_a_query_matching_nothing_gives_no_snippets(retriever: PostgresRetriever) -> None:
    assert retriever.retrieve("zebra xylophone", k=3) == []


def test_snippet_ids_are_those_of_the_sqlite_index(retriever: PostgresRetriever, docs: Path, tmp_path: Path) -> None:
    from llm_fsm.retrieval import FTSRetriever, build_index

    build_index(docs, tmp_path / "i.db")
    in_sqlite = {(s.id, s.source, s.text) for s in FTSRetriever(tmp_path / "i.db").retrieve("refunds sale", k=5)}
    in_postgres = {(s.id, s.source, s.text) for s in retriever.retrieve("refunds sale", k=5)}
    assert in_postgres == in_sqlite


@pytest.mark.parametrize(
    "query",
    [
        '"refunds',
        "refunds' OR 1=1 --",
        "'; DROP TABLE {table}; --",
        "refunds & | ! : * <-> ( ) \\",
        "!refunds",
        "refunds:*",
        "ref:A & !!",
        "\x00refunds",
        "-refunds",
        "",
        "?!",
        "a" * 5000 + " refunds",
        "refunds \ud800 caf\u00e9 \u0661\u0662",
        " ".join(f"w{n}" for n in range(10_000)),
    ],
)
def test_query_syntax_in_the_users_words_never_raises(
    retriever: PostgresRetriever, pg_url: str, pg_table: str, query: str
) -> None:
    retriever.retrieve(query.format(table=pg_table), k=3)
    import psycopg

    with psycopg.connect(pg_url) as conn:
        assert conn.execute(f"SELECT count(*) FROM {pg_table}").fetchone() == (4,)


@pytest.mark.parametrize("query", ["!refunds", "-refunds", "refunds & !thirty"])
def test_operators_in_the_users_words_are_not_operators(retriever: PostgresRetriever, query: str) -> None:
    assert retriever.retrieve(query, k=1)[0].source == "refunds.md > Refunds"


def test_it_answers_through_a_connection_pool_the_application_owns(docs: Path, pg_url: str, pg_table: str) -> None:
    from psycopg_pool import ConnectionPool

    build_postgres_index(docs, pg_url, table=pg_table)
    with ConnectionPool(pg_url, min_size=1, max_size=2) as pool:
        assert PostgresRetriever(pool, table=pg_table).retrieve("refunds", k=1)[0].source == "refunds.md > Refunds"


def test_a_missing_index_is_a_typed_error(pg_url: str, pg_table: str) -> None:
    with pytest.raises(RetrievalIndexError, match="llm-fsm index"):
        PostgresRetriever(pg_url, table=pg_table)


def test_an_index_of_no_documents_is_a_typed_error(tmp_path: Path, pg_url: str, pg_table: str) -> None:
    build_postgres_index(tmp_path, pg_url, table=pg_table)
    with pytest.raises(RetrievalIndexError, match="no documents"):
        PostgresRetriever(pg_url, table=pg_table)


def test_a_database_that_is_down_at_start_up_is_a_typed_error() -> None:
    url = f"postgresql://nobody:secret@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(RetrievalError, match="unavailable") as raised:
        PostgresRetriever(url)
    assert "secret" not in str(raised.value)


def test_a_database_that_goes_down_is_a_retrieval_error_the_state_can_handle(
    docs: Path, own_pg: PostgresServer
) -> None:
    build_postgres_index(docs, own_pg.url())
    retriever = PostgresRetriever(own_pg.url())
    assert retriever.retrieve("refunds", k=1)
    own_pg.stop()
    with pytest.raises(RetrievalError, match="unavailable"):
        retriever.retrieve("refunds", k=1)


def test_a_restarted_database_is_answered_on_a_fresh_connection(docs: Path, own_pg: PostgresServer) -> None:
    build_postgres_index(docs, own_pg.url())
    retriever = PostgresRetriever(own_pg.url())
    assert retriever.retrieve("refunds", k=1)
    own_pg.stop()
    own_pg.start()
    assert retriever.retrieve("refunds", k=1)[0].source == "refunds.md > Refunds"


def test_a_query_is_answered_from_the_gin_index(retriever: PostgresRetriever, pg_url: str, pg_table: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_url) as conn:
        conn.execute("SET enable_seqscan = off")  # four rows: left alone, the planner would rightly scan them
        plan = conn.execute(sql.SQL("EXPLAIN ") + retriever._statement(2), ("refunds", "days", 3)).fetchall()
    assert f"Bitmap Index Scan on {pg_table}_tsv" in "\n".join(line for (line,) in plan)
