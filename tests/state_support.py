"""Both state backends for one test (issue 13): `state` is a SQLite file's path, then a
PostgreSQL URL (a schema of the test's own, `tests.pg_support.pg_url`). Registered in
`tests/conftest.py`; a test takes `state` and opens `StateStore(state)`.

The end-to-end tests (the CLI, the configuration, `syncd serve`) take `backend` instead: they
run once with the state in `STATE_DIR/syncd.db`, once with `SYNCD_STATE_URL` naming a PostgreSQL
schema of their own (`use_backend` sets the environment and says where the commands then keep
their state). `@sqlite_only` keeps one test on SQLite, with a comment saying why."""

from __future__ import annotations

import base64
import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from syncd.state import packing
from syncd.state.dialect import SQLITE
from syncd.state.sqlite_schema import PACKED
from syncd.state.tables import CHANGES, CURRENT_RESOURCES, RESOURCES, index_name
from tests.pg_support import fresh_schema

__all__ = ["BACKENDS", "backend", "count_rows", "is_pg", "other_state", "sqlite_only", "state", "unpacked", "use_backend"]

BACKENDS = ("sqlite", "postgresql")

sqlite_only = pytest.mark.parametrize("backend", ["sqlite"])
"""A test of a behaviour only the SQLite state has (say why beside it): `backend` is "sqlite" only."""


@pytest.fixture(params=["sqlite", "postgresql"])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where the mirror lives: `StateStore(state)` opens either backend."""
    if request.param == "sqlite":
        return tmp_path / "state" / "syncd.db"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Which state the commands under test use: "sqlite" (the embedded default) or "postgresql"."""
    return str(request.param)


def use_backend(backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, state_dir: Path) -> Path | str:
    """Point syncd's environment at `backend`'s state and say where that state is (what
    `syncd.read.sync.default_db` gives): `state_dir/syncd.db`, or a fresh schema's URL in
    `SYNCD_STATE_URL` (the state directory still holds what is not state: backups, the lock)."""
    if backend == "sqlite":
        monkeypatch.delenv("SYNCD_STATE_URL", raising=False)
        return state_dir / "syncd.db"
    assert backend == "postgresql", backend
    url = str(request.getfixturevalue("pg_url"))
    monkeypatch.setenv("SYNCD_STATE_URL", url)

    def kept_in_postgresql() -> None:  # a command or daemon that ignored state_url would pass unseen
        files = [name for name in ("syncd.db", "daemon.db") if (state_dir / name).exists()]
        assert not files, f"{state_dir}: {', '.join(files)} made although SYNCD_STATE_URL is set"

    request.addfinalizer(kept_in_postgresql)
    return url


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
    with fresh_schema(str(request.getfixturevalue("pg_server"))) as url:
        yield url


_STORED = "tenant, kind, id, org, parent_kind, parent_id, position, listing, scope, data, hash, first_seen_run, last_seen_run, deleted_run"


def hex_of_stored(value: str | None) -> str | None:
    """A hash in the hex form of before migration 0008 whose stored form is `value`: its 128 bits
    in hex, then 128 bits of zeros (the rest of an object's sha256, which nothing reads since)."""
    return None if value is None else base64.urlsafe_b64decode(value + "==").hex() + "0" * 32


def stored_hashes_undone(conn: sqlite3.Connection) -> None:
    """The hashes of the file in the hex form of before migration 0008 (`hex_of_stored`), and
    0008 not recorded: what a file an older syncd wrote holds, for what reads hashes."""
    conn.create_function("hex_of_stored", 1, hex_of_stored, deterministic=True)
    conn.execute("UPDATE resources SET hash = hex_of_stored(hash)")
    conn.execute("UPDATE staged SET hash = hex_of_stored(hash)")
    conn.execute("UPDATE changes SET old_hash = hex_of_stored(old_hash), new_hash = hex_of_stored(new_hash)")
    conn.execute("DELETE FROM migrations WHERE name = '0008_stored_hashes'")


def _narrower_indexes_undone(conn: sqlite3.Connection) -> None:
    """The indexes as before migration 0007 (it comes after 0006), and 0007 not recorded."""
    for table in (RESOURCES, CHANGES):
        for index in table.later_indexes:
            conn.execute(f"DROP INDEX IF EXISTS {index_name(index)}")
        for index in table.indexes:
            if index_name(index) in table.dropped:
                conn.execute(index.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
    conn.execute("DELETE FROM migrations WHERE name = '0007_narrower_indexes'")


def unpacked(path: Path) -> None:
    """Make the file at `path` (closed) what the release before migration 0006 wrote (0007 and 0008 undone too): its
    objects as JSON text in `resources` as 0001 made it (`json_valid` checked), no dictionaries,
    0006 not recorded; its indexes and view as they were. What syncd then reads is a file of
    0001-0005 with these objects (the schema check compares tables and views, not their order)."""
    with contextlib.closing(packing.connect(path, isolation_level=None)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        stored_hashes_undone(conn)
        _narrower_indexes_undone(conn)
        indexes = [sql for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'resources' AND sql IS NOT NULL ORDER BY rowid"
        )]  # fmt: skip
        conn.execute("DROP VIEW current_resources")
        conn.execute("ALTER TABLE resources RENAME TO resources_packed")
        conn.execute(RESOURCES.create(SQLITE, later=False))
        text = _STORED.replace(" data,", " syncd_json(data),")
        conn.execute(f"INSERT INTO resources ({_STORED}) SELECT {text} FROM resources_packed")
        conn.execute("DROP TABLE resources_packed")
        for sql in [*indexes, CURRENT_RESOURCES, "DROP TABLE dictionaries"]:
            conn.execute(sql)
        assert conn.execute("DELETE FROM migrations WHERE name = ?", [PACKED]).rowcount == 1
        conn.execute("COMMIT")
