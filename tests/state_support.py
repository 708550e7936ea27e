"""Both state backends for one test (issue 13): `state` is a SQLite file's path, then a
PostgreSQL URL (a schema of the test's own, `tests.pg_support.pg_url`). Registered in
`tests/conftest.py`; a test takes `state` and opens `Mirror(state)`."""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.pg_support import with_search_path

__all__ = ["count_rows", "is_pg", "other_state", "state"]


@pytest.fixture(params=["sqlite", "postgresql"])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where the mirror lives: `Mirror(state)` opens either backend."""
    if request.param == "sqlite":
        return tmp_path / "state" / "syncd.db"
    return str(request.getfixturevalue("pg_url"))


def is_pg(state: Path | str) -> bool:
    return isinstance(state, str) and state.startswith("postgresql")


def count_rows(state: Path | str, table: str, where: str = "", params: Any = ()) -> int:
    """Rows of `table` as ANOTHER connection sees them (what was committed)."""
    sql = f"SELECT count(*) FROM {table}" + (f" WHERE {where}" if where else "")
    if is_pg(state):
        with psycopg.connect(str(state), autocommit=True) as conn:
            row = conn.execute(sql.replace("?", "%s"), params).fetchone()
    else:
        with contextlib.closing(sqlite3.connect(state)) as conn:
            row = conn.execute(sql, params).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def other_state(state: Path | str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """A second, empty state of `state`'s backend (a file beside it, or another schema)."""
    if not is_pg(state):
        yield tmp_path / "other" / "syncd.db"
        return
    server = str(request.getfixturevalue("pg_server"))
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield with_search_path(server, schema)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
