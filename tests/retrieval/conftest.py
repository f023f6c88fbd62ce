"""A folder of documents the retrievers' tests search; a throwaway PostgreSQL cluster for the PostgreSQL retriever's
tests (the store tests' server, tests/stores), and a table name of each test's own, so tests share the cluster and
never each other's index."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from stores.postgres_server import PostgresServer, why_not  # tests/stores, on the path as pytest puts it

#: four chunks: two sections of refunds.md, one of shipping.md, one of contact.txt
DOCS = {
    "refunds.md": "# Refunds\nRefunds are paid within thirty days of the return.\n\n"
    "## Exceptions\nSale items are final and never refunded.\n",
    "shipping.md": "# Shipping\nParcels ship in five days; express shipping takes one day.\n",
    "contact.txt": "Write to the help desk; the desk answers within a day.\n",
}


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PostgresServer]:
    reason = why_not()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.destroy()


@pytest.fixture
def pg_url(pg_cluster: PostgresServer) -> str:
    return pg_cluster.url()


@pytest.fixture
def pg_table() -> str:
    return f"docs_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def own_pg() -> Iterator[PostgresServer]:
    """A cluster of this test alone, which the test may stop."""
    reason = why_not()
    if reason is not None:
        pytest.skip(reason)
    server = PostgresServer().start()
    yield server
    server.destroy()
