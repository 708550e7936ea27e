"""A real PostgreSQL for the tests that need one (issue 13): never skipped.

`.ci/run` creates a fresh database for each test run and names it in `SYNCD_TEST_PG_URL`;
without it (a developer's machine) the session creates its own fresh database on
127.0.0.1:5432 and drops it at the end. Each test then gets a schema of its own in that
database (`pg_url`: the URL with `search_path` set), so tests and xdist workers share nothing.
A server that cannot be reached fails the test with the reason: a skipped test would hide it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest

__all__ = ["DEFAULT_SERVER", "fresh_schema", "pg_server", "pg_url", "with_search_path"]

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def with_search_path(url: str, schema: str) -> str:
    parts = urlsplit(url)
    option = quote(f"-csearch_path={schema}", safe="")
    query = f"{parts.query}&options={option}" if parts.query else f"options={option}"
    return urlunsplit(parts._replace(query=query))


def _database_url(server: str, name: str) -> str:
    return urlunsplit(urlsplit(server)._replace(path=f"/{name}"))


def _connect(url: str) -> psycopg.Connection:
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        pytest.fail(f"PostgreSQL is needed and cannot be reached at {url}: {str(exc).strip().splitlines()[0]}", pytrace=False)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of this run's own, fresh database."""
    given = os.environ.get("SYNCD_TEST_PG_URL")
    if given:
        _connect(given).close()
        yield given
        return
    name = f"syncd_test_{os.getpid()}_{secrets.token_hex(3)}"
    with _connect(DEFAULT_SERVER) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _database_url(DEFAULT_SERVER, name)
    finally:
        with _connect(DEFAULT_SERVER) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def fresh_schema(server: str) -> Iterator[str]:
    """A new schema in `server`'s database, as a URL whose `search_path` is it; dropped after."""
    schema = f"t_{secrets.token_hex(6)}"
    with _connect(server) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield with_search_path(server, schema)
    finally:
        with _connect(server) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A schema of this test's own in the run's database."""
    with fresh_schema(pg_server) as url:
        yield url
