"""The mirror on the PostgreSQL state a fleet shares (`StateStore("postgresql://...")`, issue 13).

Why a handle shaped like sqlite-utils' `Database` (`execute`, `executemany`, `query`,
`atomic`, `conn`): the StateStore, its merge and the write side's journal run the same SQL on
both backends. Their `?` and `:name` placeholders become psycopg's `%s` and `%(name)s`
here (`translate`, string literals left alone), and JSON columns come back as text, as
SQLite gives them, so the code above decodes them the same way.

Writers take a session advisory lock per tenant (`syncd.state.pg_writers`); the server lets
it go when the holder's connection ends, however the process died, so the next writer of the
tenant may fail the runs it left `running`. The connection names its process (pid, host) in
`application_name`, which a busy writer's message shows.
A writable session that closes clean is kept for this process's next open of the same state
(`syncd.state.pg_idle`): a new session costs the server a backend each time.
Imported only when a `state_url` is used (psycopg is not loaded for the SQLite state).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.string import TextLoader

from syncd.pg.connect import connect, display_url
from syncd.pg.migrations import applied_migrations, migrate, unknown_migrations
from syncd.state.errors import StateError, NewerStateError
from syncd.state.pg_idle import IDLE
from syncd.state.pg_schema import MIRROR_MIGRATIONS

__all__ = ["PgDatabase", "open_pg", "translate", "where"]

_TABLES_MIGRATION = MIRROR_MIGRATIONS[0].name
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|::|\?|:[A-Za-z_]\w*|%")


def where(url: str) -> str:
    """The state as messages name it: its URL without the password."""
    return display_url(url)


def _token(match: re.Match[str]) -> str:
    text = match.group(0)
    if text == "?":
        return "%s"
    if text == "%" or text[0] in "'\"":
        return text.replace("%", "%%")
    if text[0] == ":" and text != "::":
        return f"%({text[1:]})s"
    return text


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> str:
    """SQLite-style placeholders (`?`, `:name`) as psycopg's; `%` escaped; literals kept."""
    return _TOKEN.sub(_token, sql)


class PgDatabase:
    """A psycopg connection with the subset of sqlite-utils' `Database` the mirror uses.

    `url`: the writable state's, whose sessions this process keeps for its next open when they
    close clean (`syncd.state.pg_idle`); None: the session is closed with the handle."""

    def __init__(self, conn: psycopg.Connection, url: str | None = None) -> None:
        self.conn = conn
        self.url = url
        for name in ("json", "jsonb"):
            conn.adapters.register_loader(name, TextLoader)

    def pin(self) -> None:
        """This session is recorded with a fleet run (`syncd.pg.fencing`): a takeover may end it
        at any time, so it is closed with the handle, never handed to a later open."""
        self.url = None

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> psycopg.Cursor[Any]:
        cursor = self.conn.cursor()
        cursor.execute(translate(sql), params)
        return cursor

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(translate(sql), rows)

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        with self.conn.cursor(row_factory=dict_row) as cursor:
            cursor.execute(translate(sql), params)
            yield from cursor

    @contextlib.contextmanager
    def atomic(self) -> Iterator[PgDatabase]:
        """One transaction (a savepoint inside another), as sqlite-utils' `atomic`."""
        with self.conn.transaction():
            yield self

    def table_names(self) -> list[str]:
        rows = self.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
            "AND table_type = 'BASE TABLE' ORDER BY table_name"
        )
        return [name for (name,) in rows.fetchall()]

    def close(self) -> None:
        if self.url is None:
            self.conn.close()
        else:
            IDLE.give(self.url, self.conn)


def _migrated(conn: psycopg.Connection, url: str) -> PgDatabase:
    """`conn`'s handle once the mirror's tables are up to date; `conn` closed if they cannot be."""
    try:
        migrate(conn, MIRROR_MIGRATIONS)
    except BaseException:
        conn.close()
        raise
    return PgDatabase(conn, url)


def open_pg(url: str, *, readonly: bool = False) -> PgDatabase:
    """The state at `url`, the mirror's tables brought up to date; or, `readonly`, one read-only
    snapshot (REPEATABLE READ) for the StateStore's life, nothing migrated or written.
    PgError (one line) when the server cannot be used; StateError when a read-only
    state holds no mirror; NewerStateError when a newer syncd upgraded it."""
    if not readonly:
        kept = IDLE.take(url)
        if kept is not None:
            with contextlib.suppress(psycopg.OperationalError):  # the server ended it meanwhile: a new one below
                return _migrated(kept, url)
        return _migrated(connect(url, application_name=f"syncd mirror pid {os.getpid()} on {socket.gethostname()}"), url)
    conn = connect(url, application_name="syncd mirror (read-only)", autocommit=False)
    try:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        applied = applied_migrations(conn)  # the snapshot starts here, held until close
    except BaseException:
        conn.close()
        raise
    unknown = unknown_migrations(applied)
    if unknown or _TABLES_MIGRATION not in applied:
        conn.close()
        if unknown:
            raise NewerStateError(
                f"the PostgreSQL state at {where(url)} was upgraded by a newer syncd "
                f"(unknown migration {unknown[0]!r}); upgrade syncd to use it"
            )
        raise StateError(f"the PostgreSQL state at {where(url)} holds no syncd mirror yet")
    return PgDatabase(conn)
